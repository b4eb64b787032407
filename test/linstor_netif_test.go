package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type netInterface struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	IsActive bool   `json:"is_active"`
}

// TestLinstorNetInterfacesAsPiraeusDrivesThem replays piraeus-operator v2's node
// registration (internal/controller/linstorsatellite_controller.go: one interface per
// pod IP named default-ipv4/default-ipv6; pkg/linstorhelper/client.go
// CreateOrUpdateNode: properties first, PrefNic among them, then create or modify each
// wanted interface, then delete the managed ones not wanted) on a node that operator v1
// registered with "default", with replicas running: the replication address moves to
// the preferred interface's, and the peer's DRBD resource file follows. The real
// LINSTOR CLI then creates, lists and deletes an interface, and the refusals change
// nothing.
func TestLinstorNetInterfacesAsPiraeusDrivesThem(t *testing.T) {
	c := startSimCluster(t, 2)
	l := linstorHTTP{t: t, s: c.s, api: loadOpenAPI(t)}
	c.cmd("rd.create", `{"name":"r1"}`)
	c.cmd("vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`)
	c.cmd("replica.add", `{"resource":"r1","node":"n1","storage_pool":"thin"}`)
	c.cmd("replica.add", `{"resource":"r1","node":"n2","storage_pool":"thin"}`)
	c.waitUpToDate("r1", 2, 60*time.Second)

	netifs := func(node string) []netInterface {
		var out []netInterface
		l.get("/v1/nodes/"+node+"/net-interfaces", &out)
		return out
	}
	assert.Equal(t, []netInterface{{Name: "default", Address: "10.0.0.2", IsActive: true}}, netifs("n2"))

	// Operator v2 on a node v1 registered: properties (PrefNic) first …
	l.rcs(200, "PUT", "/v1/nodes/n2", `{"override_props":{"PrefNic":"default-ipv4","Aux/piraeus.io/configured-interfaces":"[\"default-ipv4\"]"}}`)
	var node struct {
		Props         map[string]string `json:"props"`
		NetInterfaces []netInterface    `json:"net_interfaces"`
	}
	l.get("/v1/nodes/n2", &node)
	assert.Equal(t, "default-ipv4", node.Props["PrefNic"])
	assert.Equal(t, "10.0.0.2", c.nodeAddress("n2"), "PrefNic names no interface yet: the address stays")
	// … then the wanted interface is created (the pod's IP) …
	rc := l.rcs(201, "POST", "/v1/nodes/n2/net-interfaces", `{"name":"default-ipv4","address":"10.0.1.2","satellite_port":3366,"satellite_encryption_type":"Plain"}`)
	assert.Equal(t, "n2", rc[0].ObjRefs["Node"])
	assert.Equal(t, "10.0.1.2", c.nodeAddress("n2"), "the preferred interface exists now: replication uses it")
	// … and the managed one no longer wanted is deleted.
	l.rcs(200, "DELETE", "/v1/nodes/n2/net-interfaces/default", "")
	assert.Equal(t, []netInterface{{Name: "default-ipv4", Address: "10.0.1.2", IsActive: true}}, netifs("n2"))

	// The peer's resource file (what drbdadm adjusts DRBD to) has the new address.
	res := filepath.Join(c.root("n1"), "etc", "drbd.d", "r1.res")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(res)
		return err == nil && strings.Contains(string(b), "10.0.1.2:") && !strings.Contains(string(b), "10.0.0.2:")
	}, 30*time.Second, 100*time.Millisecond, "n1's resource file never got n2's new address")

	// A second reconcile changes nothing (ensureWantedInterface compares and skips).
	l.get("/v1/nodes/n2", &node)
	assert.Equal(t, []netInterface{{Name: "default-ipv4", Address: "10.0.1.2", IsActive: true}}, node.NetInterfaces)

	// A node piraeus registers from scratch: its interface and PrefNic at creation.
	l.rcs(201, "POST", "/v1/nodes", `{"name":"n3","type":"Satellite","props":{"PrefNic":"default-ipv4","Aux/piraeus.io/last-applied":"[\"PrefNic\"]"},"net_interfaces":[{"name":"default-ipv4","address":"10.0.1.3","satellite_port":3366,"satellite_encryption_type":"Plain"},{"name":"default-ipv6","address":"fd00::3","satellite_port":3366,"satellite_encryption_type":"Plain"}]}`)
	assert.Equal(t, "10.0.1.3", c.nodeAddress("n3"))
	assert.Equal(t, []netInterface{{Name: "default-ipv4", Address: "10.0.1.3", IsActive: true}, {Name: "default-ipv6", Address: "fd00::3"}}, netifs("n3"))

	// Refusals: LINSTOR's codes, nothing changed.
	before := c.nodeSpec("n2")
	rc = l.rcs(500, "POST", "/v1/nodes/n2/net-interfaces", `{"name":"default-ipv4","address":"10.0.9.9"}`)
	assert.Equal(t, retCode(lsError, lsCreate, 0x1C0000, 505), rc[0].RetCode, "FAIL_EXISTS_NET_IF: %s", rc[0].Message)
	rc = l.rcs(404, "DELETE", "/v1/nodes/n2/net-interfaces/ghost", "")
	assert.Equal(t, retCode(lsError, lsDelete, 0x1C0000, 305), rc[0].RetCode, "FAIL_NOT_FOUND_NET_IF: %s", rc[0].Message)
	rc = l.rcs(500, "DELETE", "/v1/nodes/n2/net-interfaces/default-ipv4", "")
	assert.Contains(t, rc[0].Message, "without a network interface")
	rc = l.rcs(404, "GET", "/v1/nodes/ghost/net-interfaces/default", "")
	assert.Equal(t, retCode(lsError, lsNode, 300), rc[0].RetCode, "FAIL_NOT_FOUND_NODE: %s", rc[0].Message)
	assert.JSONEq(t, before, c.nodeSpec("n2"), "a refused call changes nothing")

	// The real CLI: node interface create / list / modify / delete.
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	ok := linstorOK(t, linstor)
	assert.Contains(t, ok("node", "interface", "create", "n1", "data", "10.9.0.1"), "SUCCESS")
	list := ok("node", "interface", "list", "n1")
	assert.Contains(t, list, "data")
	assert.Contains(t, list, "10.9.0.1")
	assert.Equal(t, "10.0.0.1", c.nodeAddress("n1"), "an interface that is not preferred leaves replication where it is")
	ok("node", "interface", "modify", "n1", "data", "--ip", "10.9.0.2")
	ok("node", "set-property", "n1", "PrefNic", "data")
	assert.Equal(t, "10.9.0.2", c.nodeAddress("n1"))
	ok("node", "set-property", "n1", "PrefNic") // no preference: the address stays where it is
	assert.Equal(t, "10.9.0.2", c.nodeAddress("n1"))
	out, errb, code := linstor("node", "interface", "delete", "n1", "data")
	require.Equal(t, 10, code, "the interface replication uses cannot go while no other has its address: %s%s", out, errb)
	assert.Contains(t, out+errb, "PrefNic")
	ok("node", "set-property", "n1", "PrefNic", "default")
	assert.Equal(t, "10.0.0.1", c.nodeAddress("n1"))
	assert.Contains(t, ok("node", "interface", "delete", "n1", "data"), "SUCCESS")
	var nis [][]struct {
		NetInterfaces []netInterface `json:"net_interfaces"`
	}
	out = ok("-m", "node", "interface", "list", "n1")
	require.NoError(t, json.Unmarshal([]byte(out), &nis), out)
	require.Len(t, nis, 1, out)
	require.Len(t, nis[0], 1, out)
	assert.Equal(t, []netInterface{{Name: "default", Address: "10.0.0.1", IsActive: true}}, nis[0][0].NetInterfaces)
}

// nodeSpec is the node's spec in Cairn's own API, as JSON.
func (c *simCluster) nodeSpec(node string) string {
	c.t.Helper()
	status, body := httpJSON(c.t, "GET", c.s.url("/cairn/v1/nodes/"+node), "")
	require.Equal(c.t, 200, status, body)
	var n struct {
		Spec json.RawMessage `json:"spec"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(body), &n), body)
	return string(n.Spec)
}

// nodeAddress is the node's replication address in Cairn's own API.
func (c *simCluster) nodeAddress(node string) string {
	c.t.Helper()
	var spec struct {
		Address string `json:"address"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(c.nodeSpec(node)), &spec))
	return spec.Address
}

// TestLinstorStatsConfigSpaceReportAndResourceOnNode: linstor-gui's dashboard counts
// (src/app/features/*/api.ts: /v1/stats/*) and connection indicator
// (/v1/controller/config), the space report of `linstor space-reporting query`
// (linstor-proxmox reads it too), and the resource create on a named node and the GET
// of one volume, against LINSTOR's OpenAPI document; the counts follow creates and
// deletes.
func TestLinstorStatsConfigSpaceReportAndResourceOnNode(t *testing.T) {
	c := startSimCluster(t, 3)
	l := linstorHTTP{t: t, s: c.s, api: loadOpenAPI(t)}
	count := func(what string) int {
		t.Helper()
		var out struct {
			Count *int `json:"count"`
		}
		l.get("/v1/stats/"+what, &out)
		require.NotNil(t, out.Count, what)
		return *out.Count
	}
	assert.Equal(t, 3, count("nodes"))
	assert.Equal(t, 3, count("storage-pools"))
	assert.Equal(t, 0, count("resource-definitions"))
	assert.Equal(t, 0, count("resources"))

	c.cmd("rd.create", `{"name":"r1"}`)
	c.cmd("vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`)
	rc := l.rcs(201, "POST", "/v1/resource-definitions/r1/resources/n1", `{"resource":{"props":{"StorPoolName":"thin"}}}`)
	assert.Equal(t, "n1", rc[0].ObjRefs["Node"])
	l.rcs(201, "POST", "/v1/resource-definitions/r1/resources/n2", `{"resource":{"node_name":"n2","props":{"StorPoolName":"thin"}}}`)
	rc = l.rcs(500, "POST", "/v1/resource-definitions/r1/resources/n3", `{"resource":{"node_name":"n2"}}`)
	assert.Contains(t, rc[0].Message, "the path node n3")
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	assert.Equal(t, 1, count("resource-definitions"))
	assert.Equal(t, len(rv.Replicas), count("resources"), "the two disks and the tiebreaker Cairn added")
	assert.Equal(t, 3, len(rv.Replicas))

	var vol struct {
		VolumeNumber    *int   `json:"volume_number"`
		StoragePoolName string `json:"storage_pool_name"`
	}
	l.get("/v1/resource-definitions/r1/resources/n2/volumes/0", &vol)
	require.NotNil(t, vol.VolumeNumber)
	assert.Equal(t, "thin", vol.StoragePoolName)
	// `linstor volume list` shows each replica's DRBD minor (Cairn's, per node).
	linstorOut := linstorOK(t, linstorCLI(t, "http://"+c.s.httpAddr))("volume", "list", "--resources", "r1")
	for _, rep := range rv.Replicas {
		m, ok := rep.Minor(0)
		require.True(t, ok)
		assert.Regexp(t, `\|\s*r1\s*\|\s*`+rep.Node+`\s*\|[^|\n]*\|\s*0\s*\|\s*`+strconv.Itoa(m)+`\s*\|`, linstorOut, "%s's minor %d", rep.Node, m)
	}
	rc = l.rcs(404, "GET", "/v1/resource-definitions/r1/resources/n2/volumes/7", "")
	assert.Equal(t, retCode(lsError, 0x2C0000, 304), rc[0].RetCode, "FAIL_NOT_FOUND_VLM: %s", rc[0].Message)

	var cfg struct {
		HTTP struct {
			Enabled bool `json:"enabled"`
			Port    int  `json:"port"`
		} `json:"http"`
		Log struct {
			Level string `json:"level"`
		} `json:"log"`
	}
	l.get("/v1/controller/config", &cfg)
	assert.True(t, cfg.HTTP.Enabled)
	assert.Equal(t, c.s.httpAddr[strings.LastIndex(c.s.httpAddr, ":")+1:], strconv.Itoa(cfg.HTTP.Port), "the port the request came in on")
	assert.Contains(t, []string{"ERROR", "WARN", "INFO", "DEBUG", "TRACE"}, cfg.Log.Level)

	// The space report: each pool with what its replicas were given, and the total.
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	out, errb, code := linstor("space-reporting", "query")
	require.Equal(t, 0, code, out+errb)
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.Contains(t, out, n)
	}
	assert.Regexp(t, `n1\s+thin\s+FILE_THIN\s+4\d{3}\s`, out, "n1's pool holds one 4 MiB replica (with DRBD's metadata)")
	assert.Regexp(t, `n3\s+thin\s+FILE_THIN\s+0\s`, out)
	assert.Contains(t, out, "Total allocated:")

	c.cmd("rd.delete", `{"name":"r1"}`)
	require.Eventually(t, func() bool { return count("resources") == 0 }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, 0, count("resource-definitions"))
}
