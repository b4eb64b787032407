package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ret_code parts, from LINSTOR's sharedconsts.py (linstor-common), written out here so
// that the test does not take them from the code under test.
const (
	lsError   uint64 = 0xC000000000000000
	lsWarn    uint64 = 0x8000000000000000
	lsInfo    uint64 = 0x4000000000000000
	lsCreate  uint64 = 0x01000000
	lsModify  uint64 = 0x02000000
	lsDelete  uint64 = 0x03000000
	lsNode    uint64 = 0x3C0000
	lsRscDfn  uint64 = 0x380000
	lsRsc     uint64 = 0x340000
	lsVlmDfn  uint64 = 0x300000
	lsStorPl  uint64 = 0x140000
	lsRscGrp  uint64 = 0x440000
	lsCreated uint64 = 1
	lsDeleted uint64 = 2
	lsMod     uint64 = 3
)

func retCode(parts ...uint64) int64 {
	var v uint64
	for _, p := range parts {
		v |= p
	}
	return int64(v)
}

type apiCallRc struct {
	RetCode    int64             `json:"ret_code"`
	Message    string            `json:"message"`
	Cause      string            `json:"cause"`
	Details    string            `json:"details"`
	Correction string            `json:"correction"`
	ObjRefs    map[string]string `json:"obj_refs"`
}

// linstorHTTP calls the LINSTOR API as the Python client does (no Content-Type on
// bodies) and checks every answer against LINSTOR's OpenAPI document.
type linstorHTTP struct {
	t   *testing.T
	s   *serve
	api *openAPI
}

func (l linstorHTTP) call(method, path, body string) (int, string) {
	l.t.Helper()
	req, err := http.NewRequest(method, l.s.url(path), strings.NewReader(body))
	require.NoError(l.t, err)
	req.Header.Del("Content-Type")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(l.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(l.t, "application/json", resp.Header.Get("Content-Type"), "%s %s", method, path)
	l.api.check(l.t, method, path, resp.StatusCode, string(b))
	return resp.StatusCode, string(b)
}

// rcs calls and decodes the ApiCallRc list, requiring the status.
func (l linstorHTTP) rcs(status int, method, path, body string) []apiCallRc {
	l.t.Helper()
	got, b := l.call(method, path, body)
	require.Equal(l.t, status, got, "%s %s %s: %s", method, path, body, b)
	return decode[[]apiCallRc](l.t, b)
}

func (l linstorHTTP) get(path string, into any) {
	l.t.Helper()
	status, b := l.call("GET", path, "")
	require.Equal(l.t, 200, status, "GET %s: %s", path, b)
	reflect.ValueOf(into).Elem().SetZero()
	require.NoError(l.t, json.Unmarshal([]byte(b), into), b)
}

// TestLinstorAPIContract drives every LINSTOR call Cairn serves over HTTP, as the
// unmodified client sends them (no Content-Type, place_count as a string, lower-case
// enums, capitalised booleans), checks each answer against LINSTOR's OpenAPI document,
// the ret_codes and statuses LINSTOR gives (values from linstor-common), and that a
// refused call changes nothing.
func TestLinstorAPIContract(t *testing.T) {
	l := linstorHTTP{t: t, api: loadOpenAPI(t)}
	l.s = startServe(t, t.TempDir(), "--heartbeat-timeout", "10m")
	s := l.s

	var version map[string]string
	l.get("/v1/controller/version", &version)
	assert.Equal(t, "1.28.0", version["rest_api_version"])
	// LINSTOR's health check (linstor-proxmox looks for a controller with it): 200.
	status, body := httpJSON(t, "GET", s.url("/health"), "")
	assert.Equal(t, 200, status, body)

	// Before cluster.create a node cannot join: the message says what to do.
	rc := l.rcs(500, "POST", "/v1/nodes", `{"name":"n1","type":"satellite","net_interfaces":[{"name":"default","address":"10.0.0.1"}]}`)
	assert.Contains(t, rc[0].Message, "cluster.create")
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)

	for i, site := range []string{"fra1", "ber1", "ams1", "par1"} {
		n := string(rune('1' + i))
		rc := l.rcs(201, "POST", "/v1/nodes", `{"name":"n`+n+`","type":"satellite","props":{"Aux/site":"`+site+`"},"net_interfaces":[{"name":"default","address":"10.0.0.`+n+`","satellite_port":3366,"satellite_encryption_type":"plain","is_active":true}]}`)
		require.Len(t, rc, 1)
		assert.Equal(t, int64(20709377), rc[0].RetCode, "node created, as LINSTOR answers it")
		assert.Equal(t, "n"+n, rc[0].ObjRefs["Node"])
	}
	rc = l.rcs(500, "POST", "/v1/nodes", `{"name":"n1","type":"satellite","net_interfaces":[{"name":"default","address":"10.0.0.1"}]}`)
	assert.Equal(t, int64(-4611686018406678028), rc[0].RetCode, "FAIL_EXISTS_NODE on create, as LINSTOR answers it")
	rc = l.rcs(500, "POST", "/v1/nodes", `{"name":"n9","type":"satellite","net_interfaces":[{"name":"default","address":"not-an-ip"}]}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsNode, 210), rc[0].RetCode, "FAIL_INVLD_NET_ADDR: %s", rc[0].Message)
	rc = l.rcs(500, "POST", "/v1/nodes", `{"name":"n9","type":"controller","net_interfaces":[{"name":"default","address":"10.0.0.9"}]}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsNode, 201), rc[0].RetCode, "FAIL_INVLD_NODE_TYPE")

	var nodes []struct {
		Name             string            `json:"name"`
		ConnectionStatus string            `json:"connection_status"`
		Props            map[string]string `json:"props"`
		NetInterfaces    []struct {
			Address string `json:"address"`
		} `json:"net_interfaces"`
	}
	l.get("/v1/nodes?nodes=n1&nodes=N3", &nodes)
	require.Len(t, nodes, 2, "name filters are repeated keys and case-insensitive")
	assert.Equal(t, "n1", nodes[0].Name)
	assert.Equal(t, "ONLINE", nodes[0].ConnectionStatus)
	assert.Equal(t, "fra1", nodes[0].Props["Aux/site"])
	assert.Equal(t, "10.0.0.1", nodes[0].NetInterfaces[0].Address)
	l.get("/v1/nodes?props=Aux/site=ams1", &nodes)
	require.Len(t, nodes, 1)
	assert.Equal(t, "n3", nodes[0].Name)
	l.get("/v1/nodes?offset=1&limit=2", &nodes)
	require.Len(t, nodes, 2)
	assert.Equal(t, "n2", nodes[0].Name)
	rc = l.rcs(404, "GET", "/v1/nodes/ghost", "")
	assert.Equal(t, retCode(lsError, lsNode, 300), rc[0].RetCode, "FAIL_NOT_FOUND_NODE")

	// The replication address: the node's one interface, "default" (node.modify); named
	// interfaces and PrefNic: linstor_netif_test.go.
	var netifs []map[string]any
	l.get("/v1/nodes/n2/net-interfaces", &netifs)
	require.Len(t, netifs, 1)
	assert.Equal(t, "10.0.0.2", netifs[0]["address"])
	rc = l.rcs(200, "PUT", "/v1/nodes/n2/net-interfaces/default", `{"name":"default","address":"10.0.9.2"}`)
	assert.Equal(t, retCode(lsModify, 0x1C0000, lsMod), rc[0].RetCode, "MODIFIED on the net interface (MASK_NET_IF)")
	var netif map[string]any
	l.get("/v1/nodes/n2/net-interfaces/default", &netif)
	assert.Equal(t, "10.0.9.2", netif["address"])
	rc = l.rcs(500, "PUT", "/v1/nodes/n2/net-interfaces/default", `{"name":"default","address":"10.0.0.1"}`)
	assert.Equal(t, retCode(lsError, lsModify, lsNode, 500), rc[0].RetCode, "FAIL_EXISTS_NODE: n1 has it: %s", rc[0].Message)
	l.rcs(404, "GET", "/v1/nodes/n2/net-interfaces/eth1", "")

	// Node properties: Aux/* set and removed (node.modify); Cairn's own stay.
	rc = l.rcs(200, "PUT", "/v1/nodes/n4", `{"override_props":{"Aux/rack":"r9"},"delete_props":["Aux/site"]}`)
	assert.Equal(t, retCode(lsModify, lsNode, lsMod), rc[0].RetCode)
	var n4 struct {
		Props map[string]string `json:"props"`
	}
	l.get("/v1/nodes/n4", &n4)
	assert.Equal(t, "r9", n4.Props["Aux/rack"])
	assert.NotContains(t, n4.Props, "Aux/site")
	l.rcs(200, "PUT", "/v1/nodes/n4", `{"override_props":{"Aux/site":"par1"},"delete_props":["Aux/rack"]}`)
	rc = l.rcs(500, "PUT", "/v1/nodes/n4", `{"override_props":{"Cairn/Host":"elsewhere"}}`)
	assert.Equal(t, retCode(lsError, lsModify, lsNode, 213), rc[0].RetCode, "FAIL_INVLD_PROP")
	rc = l.rcs(404, "PUT", "/v1/nodes/ghost", `{"override_props":{"Aux/x":"1"}}`)
	assert.Equal(t, retCode(lsError, lsModify, lsNode, 300), rc[0].RetCode)

	// Storage pools: the capacity travels as Cairn/CapacityKiB; without it the pool
	// takes nothing until set-property gives one (sp.modify), and a warning says so.
	rc = l.rcs(201, "POST", "/v1/nodes/n1/storage-pools", `{"storage_pool_name":"thin","provider_kind":"LVM_THIN","props":{"StorDriver/StorPoolName":"vg0/thin"}}`)
	require.Len(t, rc, 2)
	assert.Equal(t, retCode(lsWarn, lsCreate, lsStorPl, 3001), rc[1].RetCode)
	assert.Contains(t, rc[1].Correction, "Cairn/CapacityKiB")
	rc = l.rcs(200, "PUT", "/v1/nodes/n1/storage-pools/thin", `{"override_props":{"Cairn/CapacityKiB":"104857600"}}`)
	assert.Equal(t, retCode(lsModify, lsStorPl, lsMod), rc[0].RetCode)
	rc = l.rcs(500, "PUT", "/v1/nodes/n1/storage-pools/thin", `{"override_props":{"StorDriver/StorPoolName":"vg1/thin"}}`)
	assert.Equal(t, retCode(lsError, lsModify, lsStorPl, 213), rc[0].RetCode, "FAIL_INVLD_PROP")
	for _, n := range []string{"n2", "n3", "n4"} {
		rc = l.rcs(201, "POST", "/v1/nodes/"+n+"/storage-pools", `{"storage_pool_name":"thin","provider_kind":"LVM_THIN","props":{"StorDriver/StorPoolName":"vg0/thin","Cairn/CapacityKiB":"104857600"}}`)
		assert.Equal(t, retCode(lsCreate, lsStorPl, lsCreated), rc[0].RetCode)
	}
	rc = l.rcs(500, "POST", "/v1/nodes/n1/storage-pools", `{"storage_pool_name":"thin","provider_kind":"ZFS","props":{"StorDriver/StorPoolName":"tank","Cairn/CapacityKiB":"1048576"}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsStorPl, 510), rc[0].RetCode, "FAIL_EXISTS_STOR_POOL")
	rc = l.rcs(404, "POST", "/v1/nodes/ghost/storage-pools", `{"storage_pool_name":"thin","provider_kind":"ZFS","props":{"StorDriver/StorPoolName":"tank","Cairn/CapacityKiB":"1048576"}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsNode, 300), rc[0].RetCode, "FAIL_NOT_FOUND_NODE on a pool create")
	var pools []struct {
		Name          string            `json:"storage_pool_name"`
		Node          string            `json:"node_name"`
		Kind          string            `json:"provider_kind"`
		Free          int64             `json:"free_capacity"`
		Total         int64             `json:"total_capacity"`
		FreeSpaceMgr  string            `json:"free_space_mgr_name"`
		Props         map[string]string `json:"props"`
		SupportsSnaps *bool             `json:"supports_snapshots"`
	}
	l.get("/v1/view/storage-pools?nodes=n2", &pools)
	require.Len(t, pools, 1)
	assert.Equal(t, "LVM_THIN", pools[0].Kind)
	assert.Equal(t, int64(104857600), pools[0].Total)
	assert.Equal(t, "vg0/thin", pools[0].Props["StorDriver/StorPoolName"])
	assert.NotEmpty(t, pools[0].FreeSpaceMgr)
	l.get("/v1/nodes/n3/storage-pools", &pools)
	require.Len(t, pools, 1)
	var pool struct {
		Name string `json:"storage_pool_name"`
	}
	l.get("/v1/nodes/n3/storage-pools/thin", &pool)
	assert.Equal(t, "thin", pool.Name)
	l.rcs(404, "GET", "/v1/nodes/n3/storage-pools/nope", "")

	// Resource groups: place_count as a string, options as DrbdOptions/* properties (an
	// untyped one round-trips), replicas_on_different by an Aux property.
	rc = l.rcs(201, "POST", "/v1/resource-groups", `{"name":"rg2","select_filter":{"place_count":"2","storage_pool":"thin","replicas_on_different":["Aux/site"],"layer_stack":["drbd","storage"]},"props":{"DrbdOptions/Net/protocol":"C","DrbdOptions/Net/ping-timeout":"10"}}`)
	assert.Equal(t, retCode(lsCreate, lsRscGrp, lsCreated), rc[0].RetCode)
	rc = l.rcs(500, "POST", "/v1/resource-groups", `{"name":"rgx","select_filter":{"layer_stack":["luks","drbd","storage"]}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRscGrp, 225), rc[0].RetCode, "FAIL_INVLD_LAYER_STACK: %s", rc[0].Message)
	rc = l.rcs(500, "POST", "/v1/resource-groups", `{"name":"rg2","select_filter":{"place_count":"2"}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRscGrp, 522), rc[0].RetCode, "FAIL_EXISTS_RSC_GRP")
	rc = l.rcs(500, "POST", "/v1/resource-groups", `{"name":"rg3","props":{"DrbdOptions/Resource/quorum":"most"}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRscGrp, 213), rc[0].RetCode, "FAIL_INVLD_PROP: %s", rc[0].Message)
	l.rcs(404, "GET", "/v1/resource-groups/rg3", "")
	// Properties outside DrbdOptions/ round-trip unchanged (rg.properties-changed).
	l.rcs(201, "POST", "/v1/resource-groups", `{"name":"rg3","props":{"Foo/bar":"1","Aux/sc":"gold"}}`)
	var rg3 struct {
		Props map[string]string `json:"props"`
	}
	l.get("/v1/resource-groups/rg3", &rg3)
	assert.Equal(t, map[string]string{"Foo/bar": "1", "Aux/sc": "gold"}, rg3.Props)
	rc = l.rcs(200, "PUT", "/v1/resource-groups/rg3", `{"override_props":{"Aux/sc":"silver"},"delete_props":["Foo/bar"]}`)
	assert.Equal(t, retCode(lsModify, lsRscGrp, lsMod), rc[0].RetCode)
	l.get("/v1/resource-groups/rg3", &rg3)
	assert.Equal(t, map[string]string{"Aux/sc": "silver"}, rg3.Props)
	// Placement and options (rg.modify): what the CLI's resource-group modify sends.
	rc = l.rcs(200, "PUT", "/v1/resource-groups/rg3", `{"select_filter":{"place_count":"3","storage_pool_list":["thin"]},"override_props":{"DrbdOptions/Net/protocol":"A"}}`)
	assert.Equal(t, retCode(lsModify, lsRscGrp, lsMod), rc[0].RetCode)
	var rg3f struct {
		Props        map[string]string `json:"props"`
		SelectFilter struct {
			PlaceCount  int    `json:"place_count"`
			StoragePool string `json:"storage_pool"`
		} `json:"select_filter"`
	}
	l.get("/v1/resource-groups/rg3", &rg3f)
	assert.Equal(t, 3, rg3f.SelectFilter.PlaceCount)
	assert.Equal(t, "thin", rg3f.SelectFilter.StoragePool)
	assert.Equal(t, map[string]string{"Aux/sc": "silver", "DrbdOptions/Net/protocol": "A"}, rg3f.Props)
	rc = l.rcs(501, "PUT", "/v1/resource-groups/rg3", `{"description":"gold tier"}`)
	assert.Contains(t, rc[0].Message, "description")
	var group struct {
		Name         string            `json:"name"`
		Props        map[string]string `json:"props"`
		SelectFilter struct {
			PlaceCount          int      `json:"place_count"`
			ReplicasOnDifferent []string `json:"replicas_on_different"`
		} `json:"select_filter"`
	}
	l.get("/v1/resource-groups/rg2", &group)
	assert.Equal(t, 2, group.SelectFilter.PlaceCount)
	assert.Equal(t, []string{"Aux/site"}, group.SelectFilter.ReplicasOnDifferent)
	assert.Equal(t, map[string]string{"DrbdOptions/Net/protocol": "C", "DrbdOptions/Net/ping-timeout": "10"}, group.Props)
	var vgs []any
	l.get("/v1/resource-groups/rg2/volume-groups", &vgs)
	assert.Empty(t, vgs)

	rc = l.rcs(201, "POST", "/v1/resource-groups/rg2/spawn", `{"resource_definition_name":"r1","volume_sizes":[1048576],"partial":false,"definitions_only":false,"select_filter":{}}`)
	assert.Equal(t, retCode(lsCreate, lsRscDfn, lsCreated), rc[0].RetCode)
	type resource struct {
		Name    string   `json:"name"`
		Created int64    `json:"create_timestamp"`
		Node    string   `json:"node_name"`
		Flags   []string `json:"flags"`
		Layer   struct {
			Type string `json:"type"`
			Drbd struct {
				NodeID   int   `json:"node_id"`
				TCPPorts []int `json:"tcp_ports"`
			} `json:"drbd"`
		} `json:"layer_object"`
		Volumes []struct {
			Number     int    `json:"volume_number"`
			Pool       string `json:"storage_pool_name"`
			DevicePath string `json:"device_path"`
		} `json:"volumes"`
	}
	var rs []resource
	l.get("/v1/view/resources?resources=r1", &rs)
	require.Len(t, rs, 3, "two disks on different sites and a tiebreaker: %+v", rs)
	sites := map[string]bool{}
	diskful := 0
	for _, r := range rs {
		assert.InDelta(t, time.Now().UnixMilli(), r.Created, float64(time.Minute.Milliseconds()), "created just now, in ms")
		assert.Equal(t, "DRBD", r.Layer.Type)
		assert.Equal(t, []int{7000}, r.Layer.Drbd.TCPPorts)
		require.Len(t, r.Volumes, 1)
		assert.True(t, strings.HasPrefix(r.Volumes[0].DevicePath, "/dev/drbd"), r.Volumes[0].DevicePath)
		if !contains(r.Flags, "TIE_BREAKER") {
			diskful++
			assert.Equal(t, "thin", r.Volumes[0].Pool)
			var n struct {
				Props map[string]string `json:"props"`
			}
			l.get("/v1/nodes/"+r.Node, &n)
			sites[n.Props["Aux/site"]] = true
		} else {
			assert.Contains(t, r.Flags, "DRBD_DISKLESS")
		}
	}
	assert.Equal(t, 2, diskful)
	assert.Len(t, sites, 2, "replicas_on_different Aux/site")
	var allRs []resource
	l.get("/v1/view/resources?limit=2&offset=1", &allRs)
	require.Len(t, allRs, 2, "paged")
	assert.Equal(t, rs[1].Node, allRs[0].Node)
	l.get("/v1/view/resources?resources=R1&nodes="+rs[0].Node, &allRs)
	require.Len(t, allRs, 1, "names in any case, filters combined")
	l.get("/v1/view/resources?resources=r1&resources=nope&offset=3", &allRs)
	assert.Empty(t, allRs, "past the end: an empty list")

	var rds []struct {
		Name  string            `json:"name"`
		Group string            `json:"resource_group_name"`
		Props map[string]string `json:"props"`
		Vols  []struct {
			Number int    `json:"volume_number"`
			Size   uint64 `json:"size_kib"`
		} `json:"volume_definitions"`
	}
	l.get("/v1/resource-definitions?resource_definitions=r1&with_volume_definitions=True", &rds)
	require.Len(t, rds, 1)
	assert.Equal(t, "rg2", rds[0].Group)
	require.Len(t, rds[0].Vols, 1)
	assert.Equal(t, uint64(1048576), rds[0].Vols[0].Size)
	l.get("/v1/resource-definitions?with_volume_definitions=False", &rds)
	require.Len(t, rds, 1)
	assert.Empty(t, rds[0].Vols)
	// Streamed in pages: offset and limit as LINSTOR's.
	l.get("/v1/resource-definitions?offset=0&limit=1", &rds)
	require.Len(t, rds, 1)
	assert.Equal(t, "r1", rds[0].Name)
	l.get("/v1/resource-definitions?offset=1", &rds)
	assert.Empty(t, rds, "past the end: an empty list")
	l.get("/v1/resource-definitions?resource_definitions=nope", &rds)
	assert.Empty(t, rds)

	// Definition properties: set and delete a DRBD option; a foreign key changes nothing.
	rc = l.rcs(200, "PUT", "/v1/resource-definitions/r1", `{"override_props":{"DrbdOptions/Resource/quorum":"majority","DrbdOptions/Net/max-buffers":"8000"}}`)
	assert.Equal(t, retCode(lsModify, lsRscDfn, lsMod), rc[0].RetCode)
	var rd struct {
		Props map[string]string `json:"props"`
	}
	l.get("/v1/resource-definitions/r1", &rd)
	assert.Equal(t, map[string]string{"DrbdOptions/Resource/quorum": "majority", "DrbdOptions/Net/max-buffers": "8000"}, rd.Props)
	// linstor-csi marks what it provisioned: a free-form property, kept as given.
	l.rcs(200, "PUT", "/v1/resource-definitions/r1", `{"override_props":{"Aux/csi-provisioning-completed-by":"linstor-csi/v1.6.0"}}`)
	l.get("/v1/resource-definitions/r1", &rd)
	assert.Equal(t, "linstor-csi/v1.6.0", rd.Props["Aux/csi-provisioning-completed-by"])
	l.rcs(200, "PUT", "/v1/resource-definitions/r1", `{"delete_props":["Aux/csi-provisioning-completed-by"]}`)
	rc = l.rcs(500, "PUT", "/v1/resource-definitions/r1", `{"override_props":{"DrbdOptions/Net/max-buffers":"lots"}}`)
	assert.Equal(t, retCode(lsError, lsModify, lsRscDfn, 213), rc[0].RetCode, "FAIL_INVLD_PROP: %s", rc[0].Message)
	l.rcs(200, "PUT", "/v1/resource-definitions/r1", `{"delete_props":["DrbdOptions/Net/max-buffers"]}`)
	l.get("/v1/resource-definitions/r1", &rd)
	assert.Equal(t, map[string]string{"DrbdOptions/Resource/quorum": "majority"}, rd.Props)

	// make-available on the tiebreaker's node makes it a diskless resource of its own,
	// as LINSTOR does; DELETE with keep_tiebreaker=false removes it, and no tiebreaker
	// comes back in its place.
	var tb string
	for _, r := range rs {
		if contains(r.Flags, "TIE_BREAKER") {
			tb = r.Node
		}
	}
	require.NotEmpty(t, tb)
	status, body = l.call("POST", "/v1/resource-definitions/r1/resources/"+tb+"/make-available", `{"diskful":false}`)
	require.Contains(t, []int{200, 201}, status, body)
	var one0 resource
	l.get("/v1/resource-definitions/r1/resources/"+tb, &one0)
	assert.NotContains(t, one0.Flags, "TIE_BREAKER")
	assert.Contains(t, one0.Flags, "DRBD_DISKLESS")
	l.rcs(200, "DELETE", "/v1/resource-definitions/r1/resources/"+tb+"?keep_tiebreaker=false", "")
	l.get("/v1/resource-definitions/r1/resources", &rs)
	require.Len(t, rs, 2, "the diskless resource stayed or a tiebreaker came back: %+v", rs)

	// Autoplace one more: three disks, the tiebreaker goes; then more than the nodes.
	rc = l.rcs(201, "POST", "/v1/resource-definitions/r1/autoplace", `{"select_filter":{"additional_place_count":1}}`)
	assert.Equal(t, retCode(lsCreate, lsRsc, lsCreated), rc[0].RetCode)
	l.get("/v1/resource-definitions/r1/resources", &rs)
	require.Len(t, rs, 3)
	for _, r := range rs {
		assert.NotContains(t, r.Flags, "TIE_BREAKER")
	}
	rc = l.rcs(500, "POST", "/v1/resource-definitions/r1/autoplace", `{"select_filter":{"place_count":5}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRsc, 996), rc[0].RetCode, "FAIL_NOT_ENOUGH_NODES")
	assert.Contains(t, rc[0].Message, "passed over", "Cairn's explanation stays")

	// A diskless resource on the fourth node, toggled to a disk and back.
	var left string
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if !hasNode(rs, func(r resource) string { return r.Node }, n) {
			left = n
		}
	}
	rc = l.rcs(201, "POST", "/v1/resource-definitions/r1/resources", `[{"resource":{"node_name":"`+left+`","flags":["DRBD_DISKLESS"]}}]`)
	assert.Equal(t, retCode(lsCreate, lsRsc, lsCreated), rc[0].RetCode)
	var one resource
	l.get("/v1/resource-definitions/r1/resources/"+left, &one)
	assert.Contains(t, one.Flags, "DRBD_DISKLESS")
	rc = l.rcs(500, "POST", "/v1/resource-definitions/r1/resources", `[{"resource":{"node_name":"`+left+`"}}]`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRsc, 502), rc[0].RetCode, "FAIL_EXISTS_RSC")
	l.rcs(200, "PUT", "/v1/resource-definitions/r1/resources/"+left+"/toggle-disk/diskful/thin", "")
	l.get("/v1/resource-definitions/r1/resources/"+left, &one)
	assert.NotContains(t, one.Flags, "DRBD_DISKLESS")
	l.rcs(200, "PUT", "/v1/resource-definitions/r1/resources/"+left+"/toggle-disk/diskless", "")
	rc = l.rcs(200, "POST", "/v1/resource-definitions/r1/resources/"+left+"/make-available", `{"diskful":false}`)
	assert.Equal(t, retCode(lsInfo, lsCreate, lsRsc, 10007), rc[0].RetCode, "INFO_NOOP: already there")
	l.rcs(200, "POST", "/v1/resource-definitions/r1/resources/"+left+"/deactivate", "")
	l.get("/v1/resource-definitions/r1/resources/"+left, &one)
	assert.Contains(t, one.Flags, "INACTIVE")
	l.rcs(200, "POST", "/v1/resource-definitions/r1/resources/"+left+"/activate", "")
	var vols []map[string]any
	l.get("/v1/resource-definitions/r1/resources/"+left+"/volumes", &vols)
	require.Len(t, vols, 1)

	// Deleting a resource that is not there is a warning (linstor-csi relies on it).
	rc = l.rcs(200, "DELETE", "/v1/resource-definitions/r1/resources/ghost", "")
	assert.Equal(t, retCode(lsWarn, lsDelete, lsRsc, 3000), rc[0].RetCode, "WARN_NOT_FOUND")
	rc = l.rcs(200, "DELETE", "/v1/resource-definitions/r1/resources/"+left, "")
	assert.Equal(t, retCode(lsDelete, lsRsc, lsDeleted), rc[0].RetCode)

	// Definitions and volume definitions by hand.
	rc = l.rcs(201, "POST", "/v1/resource-definitions", `{"resource_definition":{"name":"r2","resource_group_name":"rg2"}}`)
	assert.Equal(t, retCode(lsCreate, lsRscDfn, lsCreated), rc[0].RetCode)
	rc = l.rcs(500, "POST", "/v1/resource-definitions", `{"resource_definition":{"name":"r2"}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRscDfn, 501), rc[0].RetCode, "FAIL_EXISTS_RSC_DFN")
	l.rcs(201, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"size_kib":102400}}`)
	l.rcs(201, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"size_kib":102400}}`)
	rc = l.rcs(500, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"volume_number":1,"size_kib":102400}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsVlmDfn, 503), rc[0].RetCode, "FAIL_EXISTS_VLM_DFN")
	rc = l.rcs(500, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"size_kib":1}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsVlmDfn, 206), rc[0].RetCode, "FAIL_INVLD_VLM_SIZE: %s", rc[0].Message)
	var vds []struct {
		Number int `json:"volume_number"`
	}
	l.get("/v1/resource-definitions/r2/volume-definitions", &vds)
	require.Len(t, vds, 2)
	assert.Equal(t, 1, vds[1].Number, "without a number the next one")
	l.get("/v1/resource-definitions/r2/volume-definitions/1", &vds[0])
	l.rcs(404, "GET", "/v1/resource-definitions/r2/volume-definitions/7", "")
	// Volume-definition properties as linstor-gateway gives them at creation, and as a
	// volume-definition modify patches them (override_props, delete_props,
	// delete_namespaces); flags Cairn does not keep are refused and change nothing.
	l.rcs(201, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"volume_number":3,"size_kib":102400,"props":{"FileSystem/Type":"ext4","FileSystem/User":"1000"}}}`)
	var vd3 struct {
		Props map[string]string `json:"props"`
	}
	l.get("/v1/resource-definitions/r2/volume-definitions/3", &vd3)
	assert.Equal(t, map[string]string{"FileSystem/Type": "ext4", "FileSystem/User": "1000"}, vd3.Props)
	l.rcs(200, "PUT", "/v1/resource-definitions/r2/volume-definitions/3", `{"override_props":{"FileSystem/MkfsParams":"-E nodiscard"},"delete_props":["FileSystem/User"]}`)
	vd3.Props = nil
	l.get("/v1/resource-definitions/r2/volume-definitions/3", &vd3)
	assert.Equal(t, map[string]string{"FileSystem/Type": "ext4", "FileSystem/MkfsParams": "-E nodiscard"}, vd3.Props)
	rc = l.rcs(501, "PUT", "/v1/resource-definitions/r2/volume-definitions/3", `{"flags":["GROSS_SIZE"]}`)
	assert.Contains(t, rc[0].Message, "GROSS_SIZE")
	l.rcs(501, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"volume_number":4,"size_kib":102400,"flags":["GROSS_SIZE"]}}`)
	l.rcs(404, "GET", "/v1/resource-definitions/r2/volume-definitions/4", "")
	l.rcs(200, "PUT", "/v1/resource-definitions/r2/volume-definitions/3", `{"delete_namespaces":["FileSystem"]}`)
	vd3.Props = nil
	l.get("/v1/resource-definitions/r2/volume-definitions/3", &vd3)
	assert.Empty(t, vd3.Props)
	l.rcs(200, "DELETE", "/v1/resource-definitions/r2/volume-definitions/3", "")
	// A volume of a definition without replicas goes (vd.delete); the only one of r1
	// (deployed) not.
	l.rcs(201, "POST", "/v1/resource-definitions/r2/volume-definitions", `{"volume_definition":{"volume_number":5,"size_kib":102400}}`)
	rc = l.rcs(200, "DELETE", "/v1/resource-definitions/r2/volume-definitions/5", "")
	assert.Equal(t, retCode(lsDelete, lsVlmDfn, lsDeleted), rc[0].RetCode)
	l.rcs(404, "DELETE", "/v1/resource-definitions/r2/volume-definitions/5", "")
	rc = l.rcs(500, "DELETE", "/v1/resource-definitions/r1/volume-definitions/0", "")
	assert.Equal(t, retCode(lsError, lsDelete, lsVlmDfn, 997), rc[0].RetCode, "FAIL_IN_USE: %s", rc[0].Message)
	rc = l.rcs(404, "POST", "/v1/resource-definitions/nope/autoplace", `{"select_filter":{"place_count":2}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRscDfn, 301), rc[0].RetCode, "FAIL_NOT_FOUND_RSC_DFN")

	// Deletes of what is in use say so (FAIL_IN_USE); unused, they go.
	rc = l.rcs(500, "PUT", "/v1/nodes/"+rs[0].Node+"/storage-pools/thin", `{"override_props":{"Cairn/CapacityKiB":"4096"}}`)
	assert.Equal(t, retCode(lsError, lsModify, lsStorPl, 997), rc[0].RetCode, "FAIL_IN_USE: below what replicas take: %s", rc[0].Message)
	rc = l.rcs(500, "DELETE", "/v1/nodes/"+rs[0].Node+"/storage-pools/thin", "")
	assert.Equal(t, retCode(lsError, lsDelete, lsStorPl, 997), rc[0].RetCode, "FAIL_IN_USE: %s", rc[0].Message)
	rc = l.rcs(500, "DELETE", "/v1/resource-groups/rg2", "")
	assert.Equal(t, retCode(lsError, lsDelete, lsRscGrp, 501), rc[0].RetCode, "FAIL_EXISTS_RSC_DFN, as LINSTOR answers a group with definitions: %s", rc[0].Message)
	rc = l.rcs(200, "DELETE", "/v1/resource-groups/rg3", "")
	assert.Equal(t, retCode(lsDelete, lsRscGrp, lsDeleted), rc[0].RetCode)
	l.rcs(404, "DELETE", "/v1/resource-groups/rg3", "")
	l.rcs(201, "POST", "/v1/nodes/n1/storage-pools", `{"storage_pool_name":"spare","provider_kind":"ZFS","props":{"StorDriver/StorPoolName":"tank","Cairn/CapacityKiB":"1048576"}}`)
	rc = l.rcs(200, "DELETE", "/v1/nodes/n1/storage-pools/spare", "")
	assert.Equal(t, retCode(lsDelete, lsStorPl, lsDeleted), rc[0].RetCode)
	l.rcs(404, "GET", "/v1/nodes/n1/storage-pools/spare", "")

	// A replica's own properties (PUT …/resources/{node}: linstor-gui, `linstor resource
	// set-property`): DrbdOptions/* are its own DRBD options, the rest kept as given.
	rc = l.rcs(200, "PUT", "/v1/resource-definitions/r1/resources/"+rs[0].Node, `{"override_props":{"Aux/a":"b","DrbdOptions/Disk/al-extents":"6007"}}`)
	assert.Equal(t, retCode(lsModify, lsRsc, lsMod), rc[0].RetCode, "%+v", rc)
	var withProps struct {
		Props map[string]string `json:"props"`
	}
	l.get("/v1/resource-definitions/r1/resources/"+rs[0].Node, &withProps)
	assert.Equal(t, map[string]string{"Aux/a": "b", "DrbdOptions/Disk/al-extents": "6007"}, withProps.Props)
	rc = l.rcs(404, "PUT", "/v1/resource-definitions/r1/resources/ghost", `{"override_props":{"Aux/a":"b"}}`)
	assert.Equal(t, retCode(lsError, lsModify, lsRsc, 302), rc[0].RetCode, "FAIL_NOT_FOUND_RSC: %s", rc[0].Message)
	l.rcs(200, "PUT", "/v1/resource-definitions/r1/resources/"+rs[0].Node, `{"delete_props":["Aux/a","DrbdOptions/Disk/al-extents"]}`)

	// Physical storage: no agent runs here, so no node reported devices (the agents' lsblk
	// reports are tested through the CLI); a node that does not exist is 404.
	var phys []any
	l.get("/v1/physical-storage", &phys)
	assert.Empty(t, phys)
	l.get("/v1/physical-storage/n1", &phys)
	assert.Empty(t, phys)
	rc = l.rcs(404, "GET", "/v1/physical-storage/ghost", "")
	assert.Equal(t, retCode(lsError, lsNode, 300), rc[0].RetCode, "FAIL_NOT_FOUND_NODE: %s", rc[0].Message)
	// A device pool as golinstor sends it (client/physicalstorage.go CreateDevicePool:
	// PhysicalStorageCreate, provider kind LVM_THIN; with_storage_pool always present, its
	// name empty when not asked): a storage pool whose agent makes the back end (tested
	// through the CLI); one without a storage pool is refused.
	l.rcs(201, "POST", "/v1/physical-storage/n2", `{"provider_kind":"LVM_THIN","device_paths":["/dev/sdb"],"pool_name":"lvmthin","with_storage_pool":{"name":"hostdevs","props":null}}`)
	var devPool struct {
		ProviderKind string            `json:"provider_kind"`
		Props        map[string]string `json:"props"`
	}
	l.get("/v1/nodes/n2/storage-pools/hostdevs", &devPool)
	assert.Equal(t, "LVM_THIN", devPool.ProviderKind)
	assert.Equal(t, "linstor_lvmthin/lvmthin", devPool.Props["StorDriver/StorPoolName"])
	rc = l.rcs(500, "POST", "/v1/physical-storage/n2", `{"provider_kind":"LVM","device_paths":["/dev/sdc"],"pool_name":"x","with_storage_pool":{"name":"","props":null}}`)
	assert.Contains(t, rc[0].Details, "field: with_storage_pool", rc[0].Message)

	// External files as golinstor sends them (client/controller.go ModifyExternalFile,
	// GetExternalFiles; client/resourcedefinition.go DeployExternalFile): the path
	// query-escaped as the name, the content in base64.
	const gw = "/etc/drbd-reactor.d/linstor-gateway-iscsi-r1.toml"
	esc := url.QueryEscape(gw)
	rc = l.rcs(404, "POST", "/v1/resource-definitions/r1/files/"+esc, "")
	assert.Equal(t, retCode(lsError, lsModify, 0x500000, 320), rc[0].RetCode, "FAIL_NOT_FOUND_EXT_FILE: %s", rc[0].Message)
	l.rcs(200, "PUT", "/v1/files/"+esc, `{"path":"`+gw+`","content":"`+base64.StdEncoding.EncodeToString([]byte("[[promoter]]\n"))+`"}`)
	rc = l.rcs(500, "PUT", "/v1/files/"+url.QueryEscape("/etc/x/../y"), `{"content":""}`)
	assert.Equal(t, retCode(lsError, lsModify, 0x500000, 235), rc[0].RetCode, "FAIL_INVLD_EXT_FILE_NAME: %s", rc[0].Message)
	l.rcs(500, "PUT", "/v1/files/"+esc, `{"path":"/etc/other","content":""}`)
	type extFile struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	var files []extFile
	l.get("/v1/files", &files)
	assert.Equal(t, []extFile{{Path: gw}}, files, "no content unless asked")
	l.get("/v1/files?content=true", &files)
	assert.Equal(t, []extFile{{Path: gw, Content: base64.StdEncoding.EncodeToString([]byte("[[promoter]]\n"))}}, files)
	var oneFile extFile
	l.get("/v1/files/"+esc, &oneFile)
	assert.Equal(t, files[0], oneFile)
	var check struct {
		Allowed *bool `json:"allowed"`
	}
	l.get("/v1/files/"+esc+"/check/n1", &check)
	require.NotNil(t, check.Allowed)
	assert.False(t, *check.Allowed, "no agent announced allowed paths")
	l.rcs(404, "GET", "/v1/files/"+esc+"/check/ghost", "")
	var fileStatus struct {
		ActualPath   string `json:"actual_path"`
		ContentMatch *bool  `json:"content_match"`
	}
	l.get("/v1/files/"+esc+"/status/n1", &fileStatus)
	require.NotNil(t, fileStatus.ContentMatch)
	assert.False(t, *fileStatus.ContentMatch, "no agent wrote it")
	assert.Empty(t, fileStatus.ActualPath)
	rc = l.rcs(404, "GET", "/v1/files/"+url.QueryEscape("/etc/none")+"/status/n1", "")
	assert.Equal(t, retCode(lsError, 0x500000, 320), rc[0].RetCode, "FAIL_NOT_FOUND_EXT_FILE: %s", rc[0].Message)
	l.rcs(200, "POST", "/v1/resource-definitions/r1/files/"+esc, "")
	l.rcs(404, "POST", "/v1/resource-definitions/nope/files/"+esc, "")
	l.rcs(200, "DELETE", "/v1/resource-definitions/r1/files/"+esc, "")
	l.rcs(200, "POST", "/v1/resource-definitions/r1/files/"+esc, "")

	// Deleting a definition removes its resources first, as LINSTOR does.
	rc = l.rcs(200, "DELETE", "/v1/resource-definitions/r1", "")
	assert.Equal(t, retCode(lsDelete, lsRscDfn, lsDeleted), rc[0].RetCode, "%+v", rc)
	require.Len(t, rc, 2, "%+v", rc)
	assert.Equal(t, retCode(lsInfo, lsDelete, lsRscDfn), rc[1].RetCode)
	assert.Contains(t, rc[1].Message, "deleted with its 3 replica(s)")
	rc = l.rcs(404, "GET", "/v1/resource-definitions/r1", "")
	assert.Equal(t, retCode(lsError, lsRscDfn, 301), rc[0].RetCode)
	rc = l.rcs(404, "DELETE", "/v1/resource-definitions/r1", "")
	assert.Equal(t, retCode(lsError, lsDelete, lsRscDfn, 301), rc[0].RetCode)
	// The file it deployed stays registered; deleted, it is gone (a second delete warns).
	l.get("/v1/files/"+esc, &oneFile)
	assert.Equal(t, gw, oneFile.Path)
	rc = l.rcs(200, "DELETE", "/v1/files/"+esc, "")
	assert.Equal(t, retCode(lsDelete, 0x500000, lsDeleted), rc[0].RetCode)
	rc = l.rcs(200, "DELETE", "/v1/files/"+esc, "")
	assert.Equal(t, retCode(lsWarn, lsDelete, 0x500000, 3000), rc[0].RetCode)
	rc = l.rcs(404, "GET", "/v1/files/"+esc, "")
	assert.Equal(t, retCode(lsError, 0x500000, 320), rc[0].RetCode)

	// A node lost for good takes its resources with it; a node without any just goes.
	l.rcs(201, "POST", "/v1/resource-definitions/r2/resources", `[{"resource":{"node_name":"n4"}}]`)
	rc = l.rcs(500, "DELETE", "/v1/nodes/n4", "")
	assert.Contains(t, rc[0].Message, "holds replicas")
	rc = l.rcs(200, "DELETE", "/v1/nodes/n4/lost", "")
	require.Len(t, rc, 3, "%+v", rc)
	assert.Equal(t, retCode(lsDelete, lsRsc, lsDeleted), rc[0].RetCode)
	assert.Equal(t, retCode(lsDelete, lsNode, lsDeleted), rc[1].RetCode)
	assert.Contains(t, rc[2].Message, "r2 has no replica left", "node.lost says what it left behind")
	l.rcs(404, "GET", "/v1/nodes/n4", "")
	l.get("/v1/resource-definitions/r2/resources", &rs)
	assert.Empty(t, rs)
	rc = l.rcs(200, "DELETE", "/v1/nodes/n3", "")
	assert.Equal(t, retCode(lsDelete, lsNode, lsDeleted), rc[0].RetCode)
	rc = l.rcs(404, "DELETE", "/v1/nodes/n3", "")
	assert.Equal(t, retCode(lsError, lsDelete, lsNode, 300), rc[0].RetCode)

	// Every command carried the LINSTOR caller as its actor.
	out, code := run(t, "audit", "--nats", s.natsURL(), "--type", "rd.deleted", "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"actor":"linstor:127.0.0.1:`)

	// Unparseable JSON is 400; what Cairn does not serve is 501, never 404.
	rc = l.rcs(400, "POST", "/v1/resource-groups", `{"name":`)
	assert.True(t, uint64(rc[0].RetCode)&lsError == lsError)
	for _, c := range [][2]string{{"GET", "/v1/view/backups"}, {"GET", "/v1/sos-report"},
		{"POST", "/v1/resource-definitions/r2/snapshot-shipping"}} {
		rc = l.rcs(501, c[0], c[1], `{}`)
		assert.Contains(t, rc[0].Message, "Cairn does not serve")
	}
	// No remotes yet, and a list that says so in the shape the clients decode (an object:
	// golinstor client/remote.go GetAll; the OpenAPI document's array is not what they read).
	status, body = httpJSON(t, "GET", s.url("/v1/remotes"), "")
	require.Equal(t, 200, status, body)
	assert.JSONEq(t, `{"s3_remotes":[],"linstor_remotes":[],"ebs_remotes":[]}`, body)
	var none []any
	l.get("/v1/remotes/s3", &none)
	assert.Empty(t, none)
	// A LINSTOR remote is another cluster (golinstor client/remote.go CreateLinstor):
	// listed without its passphrase (Cairn's token for it), modified, deleted.
	l.rcs(200, "POST", "/v1/remotes/linstor", `{"remote_name":"dr","url":"http://127.0.0.1:1","passphrase":"cairn_secret-token"}`)
	status, body = httpJSON(t, "GET", s.url("/v1/remotes"), "")
	require.Equal(t, 200, status, body)
	assert.JSONEq(t, `{"s3_remotes":[],"linstor_remotes":[{"remote_name":"dr","url":"http://127.0.0.1:1"}],"ebs_remotes":[]}`, body)
	l.rcs(200, "PUT", "/v1/remotes/linstor/dr", `{"url":"http://127.0.0.2:3370"}`)
	l.get("/v1/remotes/linstor", &none)
	require.Len(t, none, 1)
	assert.Equal(t, "http://127.0.0.2:3370", none[0].(map[string]any)["url"])
	rc = l.rcs(404, "POST", "/v1/remotes/dr/backups/ship", `{"src_rsc_name":"ghost","dst_rsc_name":"x"}`)
	assert.Contains(t, rc[0].Message, "ghost")
	l.rcs(200, "DELETE", "/v1/remotes?remote_name=dr", "")
	// A modify of a volume definition that says nothing to change is refused naming it.
	rc = l.rcs(500, "PUT", "/v1/resource-definitions/r2/volume-definitions/0", `{}`)
	assert.Contains(t, rc[0].Message, "nothing to change")
	// Error reports: the refusals above, newest first; without content on request.
	var reports []struct {
		Filename  string `json:"filename"`
		ErrorTime int64  `json:"error_time"`
		Node      string `json:"node_name"`
		Text      string `json:"text"`
	}
	l.get("/v1/error-reports", &reports)
	require.NotEmpty(t, reports)
	assert.True(t, strings.HasPrefix(reports[0].Filename, "ErrorReport-refusal-"), reports[0].Filename)
	assert.True(t, strings.HasSuffix(reports[0].Filename, ".log"), "LINSTOR's file name, which the CLI takes the id from")
	assert.Contains(t, reports[0].Text, "refused")
	var dup string
	for _, r := range reports {
		if strings.Contains(r.Text, "node.add") && strings.Contains(r.Text, "already_exists") {
			dup = r.Filename
		}
	}
	require.NotEmpty(t, dup, "the duplicate node create is reported")
	// An agent's failure is a report too (its latest status on the replica).
	nc, err := nats.Connect(s.natsURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), "cairn.status.n1.drbd.r2",
		[]byte(`{"resource":"r2","node":"n1","at":"2026-12-02T00:00:00Z","revision":7,"phase":"failed","error":"backing volume: no space"}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l.get("/v1/error-reports/drbd-r2-n1-r7", &reports)
		return len(reports) == 1 && strings.Contains(reports[0].Text, "no space") && reports[0].Node == "n1"
	}, 10*time.Second, 20*time.Millisecond, "the agent's failure never became a report")
	l.get("/v1/error-reports?withContent=False", &reports)
	assert.Empty(t, reports[0].Text)
	for _, id := range []string{dup, strings.TrimSuffix(strings.TrimPrefix(dup, "ErrorReport-"), ".log")} {
		l.get("/v1/error-reports/"+id, &reports) // by file name, and by the id the CLI shows
		require.Len(t, reports, 1, id)
		assert.Contains(t, reports[0].Text, "node n1 already exists")
	}
	l.get(fmt.Sprintf("/v1/error-reports?since=%d", time.Now().Add(time.Hour).UnixMilli()), &reports)
	assert.Empty(t, reports)

	// Controller properties: DrbdOptions/* are the deployment's options, others kept.
	var ctrl map[string]string
	l.get("/v1/controller/properties", &ctrl)
	assert.Empty(t, ctrl)
	l.rcs(201, "POST", "/v1/controller/properties", `{"override_props":{"Aux/cluster":"prod","Autoplacer/Weights/MaxFreeSpace":"1","DrbdOptions/Net/protocol":"C"}}`)
	l.get("/v1/controller/properties", &ctrl)
	assert.Equal(t, map[string]string{"Aux/cluster": "prod", "Autoplacer/Weights/MaxFreeSpace": "1", "DrbdOptions/Net/protocol": "C"}, ctrl)
	rc = l.rcs(500, "POST", "/v1/controller/properties", `{"override_props":{"DrbdOptions/Net/protocol":"Z"}}`)
	assert.Equal(t, retCode(lsError, lsModify, 0x100000, 213), rc[0].RetCode, "FAIL_INVLD_PROP: %s", rc[0].Message)
	rc = l.rcs(501, "POST", "/v1/controller/properties", `{"delete_namespaces":["Aux"]}`)
	assert.Contains(t, rc[0].Message, "namespaces")
	l.rcs(201, "POST", "/v1/controller/properties", `{"delete_props":["Aux/cluster","DrbdOptions/Net/protocol"]}`)
	l.get("/v1/controller/properties", &ctrl)
	assert.Equal(t, map[string]string{"Autoplacer/Weights/MaxFreeSpace": "1"}, ctrl)
	// LINSTOR's own DrbdOptions/ settings, as piraeus-operator sets them, are kept as
	// given (they are no DRBD options); an unknown DrbdOptions/ key is still refused.
	l.rcs(201, "POST", "/v1/controller/properties", `{"override_props":{"DrbdOptions/auto-quorum":"suspend-io","DrbdOptions/AutoEvictAllowEviction":"False"}}`)
	l.get("/v1/controller/properties", &ctrl)
	assert.Equal(t, "suspend-io", ctrl["DrbdOptions/auto-quorum"])
	assert.Equal(t, "False", ctrl["DrbdOptions/AutoEvictAllowEviction"])
	rc = l.rcs(500, "POST", "/v1/controller/properties", `{"override_props":{"DrbdOptions/Bogus":"1"}}`)
	assert.Contains(t, rc[0].Message, "DrbdOptions/Bogus")
	l.rcs(201, "POST", "/v1/controller/properties", `{"delete_props":["DrbdOptions/auto-quorum","DrbdOptions/AutoEvictAllowEviction"]}`)
	l.get("/v1/controller/properties", &ctrl)
	assert.Equal(t, map[string]string{"Autoplacer/Weights/MaxFreeSpace": "1"}, ctrl)

	// The key-value store: kv.modify and kv.delete, namespaces removed key by key.
	rc = l.rcs(200, "PUT", "/v1/key-value-store/csi", `{"override_props":{"a/b":"1","a/c":"2","x":"3"}}`)
	assert.Equal(t, retCode(lsModify, 0x400000, lsMod), rc[0].RetCode)
	type kvs struct {
		Name  string            `json:"name"`
		Props map[string]string `json:"props"`
	}
	var stores []kvs
	l.get("/v1/key-value-store/csi", &stores)
	require.Len(t, stores, 1)
	assert.Equal(t, map[string]string{"a/b": "1", "a/c": "2", "x": "3"}, stores[0].Props)
	l.rcs(200, "PUT", "/v1/key-value-store/csi", `{"override_props":{"y":"4"},"delete_namespaces":["a"]}`)
	l.get("/v1/key-value-store", &stores)
	require.Len(t, stores, 1)
	assert.Equal(t, kvs{Name: "csi", Props: map[string]string{"x": "3", "y": "4"}}, stores[0])
	rc = l.rcs(500, "PUT", "/v1/key-value-store/csi", `{"override_props":{"z":"1"},"delete_props":["z"]}`)
	assert.Equal(t, retCode(lsError, lsModify, 0x400000, 213), rc[0].RetCode, "FAIL_INVLD_PROP: %s", rc[0].Message)
	l.rcs(200, "DELETE", "/v1/key-value-store/csi", "")
	rc = l.rcs(200, "DELETE", "/v1/key-value-store/csi", "")
	assert.Equal(t, retCode(lsWarn, lsDelete, 0x400000, 3000), rc[0].RetCode)
	// An instance that does not exist is 404 FAIL_NOT_FOUND_KVS, as LINSTOR answers
	// (golinstor's KeyValueStore.Get then returns NotFoundError, which linstor-csi handles;
	// on 200 [] it failed "expected exactly one KV, got 0" and every CreateSnapshot with it).
	rc = l.rcs(404, "GET", "/v1/key-value-store/csi", "")
	assert.Equal(t, retCode(lsError, 0x400000, 316), rc[0].RetCode, "FAIL_NOT_FOUND_KVS: %s", rc[0].Message)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasNode[T any](items []T, name func(T) string, n string) bool {
	for _, it := range items {
		if name(it) == n {
			return true
		}
	}
	return false
}

// TestLinstorListsPageAndFilter: LINSTOR's lists of nodes, storage pools (all, and one
// node's), resource groups and key-value instances answer every offset/limit page as
// the same slice of the whole list in its stable order, filters first; the lists are
// streamed one item at a time from the views (streamPage), so a page is cut while the
// walk goes, and a filter that matches nothing answers [].
func TestLinstorListsPageAndFilter(t *testing.T) {
	l := linstorHTTP{t: t, api: loadOpenAPI(t)}
	l.s = startServe(t, t.TempDir(), "--heartbeat-timeout", "10m")
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", l.s.natsURL())
	require.Equal(t, 0, code)
	for i := 1; i <= 5; i++ {
		n := fmt.Sprintf("n%d", i)
		l.rcs(201, "POST", "/v1/nodes", `{"name":"`+n+`","type":"satellite","props":{"Aux/odd":"`+fmt.Sprint(i%2 == 1)+`"},"net_interfaces":[{"name":"default","address":"10.0.0.`+fmt.Sprint(i)+`"}]}`)
		for _, p := range []string{"fast", "slow"} {
			l.rcs(201, "POST", "/v1/nodes/"+n+"/storage-pools", `{"storage_pool_name":"`+p+`","provider_kind":"ZFS","props":{"StorDriver/StorPoolName":"tank","Cairn/CapacityKiB":"1048576"}}`)
		}
		l.rcs(201, "POST", "/v1/resource-groups", `{"name":"g`+fmt.Sprint(i)+`"}`)
		l.rcs(200, "PUT", "/v1/key-value-store/kv"+fmt.Sprint(i), `{"override_props":{"k":"v"}}`)
	}
	type named struct {
		Name     string `json:"name"`
		NodeName string `json:"node_name"`
		PoolName string `json:"storage_pool_name"`
	}
	key := func(x named) string { return x.Name + x.NodeName + "/" + x.PoolName }
	list := func(path string) []string {
		var items []named
		l.get(path, &items)
		out := []string{}
		for _, x := range items {
			out = append(out, key(x))
		}
		return out
	}
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/v1/nodes", []string{"n1/", "n2/", "n3/", "n4/", "n5/"}},
		{"/v1/nodes?props=Aux/odd=true", []string{"n1/", "n3/", "n5/"}},
		{"/v1/view/storage-pools", []string{"n1/fast", "n1/slow", "n2/fast", "n2/slow", "n3/fast", "n3/slow", "n4/fast", "n4/slow", "n5/fast", "n5/slow"}},
		{"/v1/view/storage-pools?storage_pools=slow&nodes=n2&nodes=N4", []string{"n2/slow", "n4/slow"}},
		{"/v1/nodes/n3/storage-pools", []string{"n3/fast", "n3/slow"}},
		{"/v1/resource-groups", []string{"g1/", "g2/", "g3/", "g4/", "g5/"}}, // no default group is listed
		{"/v1/key-value-store", []string{"kv1/", "kv2/", "kv3/", "kv4/", "kv5/"}},
	} {
		all := list(c.path)
		require.Equal(t, c.want, all, c.path)
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		for _, p := range [][2]int{{0, 2}, {1, 2}, {2, 100}, {len(all) - 1, 1}, {len(all), 5}, {0, 0}} {
			got := list(fmt.Sprintf("%s%soffset=%d&limit=%d", c.path, sep, p[0], p[1]))
			want := all[min(p[0], len(all)):]
			if p[1] > 0 && p[1] < len(want) {
				want = want[:p[1]]
			}
			assert.Equal(t, want, got, "%s offset %d limit %d", c.path, p[0], p[1])
		}
	}
	assert.Empty(t, list("/v1/view/storage-pools?nodes=ghost"))

	// Resources: definitions with several replicas each and one with none; a page deep in the whole list
	// skips over the replica counts (v/rd-replicas/) without decoding a definition, and
	// answers the same slice as every other page.
	for i, place := range []int{1, 3, 0, 2} {
		name := fmt.Sprintf("d%d", i)
		if place == 0 {
			l.rcs(201, "POST", "/v1/resource-definitions", `{"resource_definition":{"name":"`+name+`"}}`)
			continue
		}
		l.rcs(201, "POST", "/v1/resource-groups/g"+fmt.Sprint(i+1)+"/spawn", fmt.Sprintf(`{"resource_definition_name":%q,"volume_sizes":[4096],"select_filter":{"place_count":%d,"storage_pool":"fast"}}`, name, place))
	}
	all := list("/v1/view/resources")
	require.Greater(t, len(all), 5, "%v", all)
	for off := 0; off <= len(all)+1; off++ {
		for _, lim := range []int{0, 1, 2, 100} {
			got := list(fmt.Sprintf("/v1/view/resources?offset=%d&limit=%d", off, lim))
			want := all[min(off, len(all)):]
			if lim > 0 && lim < len(want) {
				want = want[:lim]
			}
			assert.Equal(t, want, got, "resources offset %d limit %d", off, lim)
		}
	}
	status, body := l.call("GET", "/v1/nodes/ghost/storage-pools", "")
	assert.Equal(t, 404, status, body)
}

// LINSTOR's size queries: `linstor resource-group query-size-info` (the real CLI) and
// linstor-proxmox's POST /v1/queries/resource-groups/query-all-size-info with
// {"ignore_cache_older_than_sec": N}, as LINBIT/linstor-proxmox LINBIT/Linstor.pm
// (query_all_size_info) sends it and LINSTORPlugin.pm (status) reads it:
// space_info.capacity_in_kib and available_size_in_kib per group, a group missing from
// result being an inactive storage. The answer is what the group's next spawn could
// take: the least free (and least total) of the pools autoplace would choose now.
func TestLinstorSizeInfo(t *testing.T) {
	l := linstorHTTP{t: t, api: loadOpenAPI(t)}
	l.s = startServe(t, t.TempDir(), "--heartbeat-timeout", "10m")
	cmd := func(verb, body string) {
		out, code := run(t, "cmd", verb, body, "--nats", l.s.natsURL())
		require.Equal(t, 0, code, out)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i, gib := range []int{1, 2, 4} {
		n := fmt.Sprintf("n%d", i+1)
		cmd("node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, n, i+1, i+1))
		// Thick pools: what a disk takes is what the pool holds (a thin one promises 20
		// times its capacity).
		cmd("sp.create", fmt.Sprintf(`{"node":%q,"name":"thick","provider":"lvm","pool":"vg0","capacity_kib":%d}`, n, gib<<20))
	}
	cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thick"}`)
	cmd("rg.create", `{"name":"rg5","place_count":5,"storage_pool":"thick"}`)
	type sizeInfo struct {
		SpaceInfo struct {
			Max       uint64 `json:"max_vlm_size_in_kib"`
			Available uint64 `json:"available_size_in_kib"`
			Capacity  uint64 `json:"capacity_in_kib"`
			Next      []struct {
				Node string `json:"node_name"`
				Pool string `json:"stor_pool_name"`
			} `json:"next_spawn_result"`
		} `json:"space_info"`
		Reports []apiCallRc `json:"reports"`
	}
	var qsi sizeInfo
	status, body := l.call("POST", "/v1/resource-groups/rg2/query-size-info", `{}`)
	require.Equal(t, 200, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &qsi))
	assert.Equal(t, uint64(2<<20), qsi.SpaceInfo.Max, "n3 (4 GiB) and n2 (2 GiB): a volume of 2 GiB fits both")
	assert.Equal(t, uint64(2<<20), qsi.SpaceInfo.Available)
	assert.Equal(t, uint64(2<<20), qsi.SpaceInfo.Capacity)
	require.Len(t, qsi.SpaceInfo.Next, 2)
	assert.Equal(t, "n3", qsi.SpaceInfo.Next[0].Node)

	cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":1048576}`) // 1 GiB on n3 and n2
	var all struct {
		Result map[string]sizeInfo `json:"result"`
	}
	status, body = l.call("POST", "/v1/queries/resource-groups/query-all-size-info", `{"ignore_cache_older_than_sec":60}`)
	require.Equal(t, 200, status, body)
	require.NoError(t, json.Unmarshal([]byte(body), &all))
	require.Contains(t, all.Result, "rg2")
	assert.Equal(t, uint64(1<<20), all.Result["rg2"].SpaceInfo.Available, "n3 has 3 GiB left, n2 and n1 1 GiB each")
	assert.Equal(t, uint64(1<<20), all.Result["rg2"].SpaceInfo.Capacity)
	assert.Zero(t, all.Result["rg5"].SpaceInfo.Max, "five disks do not fit on three nodes")
	require.NotEmpty(t, all.Result["rg5"].Reports)
	assert.Contains(t, all.Result["rg5"].Reports[0].Message, "autoplace needs 5")

	linstor := linstorCLI(t, "http://"+l.s.httpAddr)
	out, errb, code := linstor("resource-group", "query-size-info", "rg2")
	require.Equal(t, 0, code, out+errb)
	assert.Contains(t, out, "1 GiB")
	assert.Contains(t, out, "thick on n3")
}
