package test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDRBDResourcesEndToEnd: through the real `cairn serve`, a group spawns a
// definition, replicas are autoplaced across racks with a tiebreaker, the tiebreaker
// goes when a third disk comes, every node's resource file (from `cairn drbd render`)
// passes the real drbdadm, the seeding plan is the day-0 scheme, and `cairn audit` shows
// each allocation.
func TestDRBDResourcesEndToEnd(t *testing.T) {
	s := startServe(t, t.TempDir())
	nats := []string{"--nats", s.natsURL()}
	cmd := func(verb, body string) reply {
		t.Helper()
		out, code := run(t, append([]string{"cmd", verb, body}, nats...)...)
		r := decode[reply](t, out)
		require.Equal(t, 0, code, "%s %s: %+v", verb, body, r.Error)
		return r
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 6; i++ {
		cmd("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"RACK%d"}`, i, i, i, (i-1)%3+1))
		cmd("sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":104857600}`, i))
	}
	cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin","drbd_options":{"protocol":"C"}}`)
	r := cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":1048576}`)
	// rd.created, vd.created, three replica.added (two disks and the tiebreaker), then
	// the claims: the port and the three nodes.
	require.Len(t, r.Events, 9)

	type replica struct {
		Node       string `json:"node"`
		NodeID     int    `json:"node_id"`
		Diskless   bool   `json:"diskless"`
		Tiebreaker bool   `json:"tiebreaker"`
		Minors     []struct{ Volume, Minor int }
	}
	type definition struct {
		Port     int       `json:"port"`
		Replicas []replica `json:"replicas"`
	}
	get := func() definition {
		status, body := httpJSON(t, "GET", s.url("/cairn/v1/resources/r1"), "")
		require.Equal(t, 200, status, body)
		return decode[definition](t, body)
	}
	rd := get()
	assert.Equal(t, 7000, rd.Port)
	require.Len(t, rd.Replicas, 3)
	racks := map[string]bool{}
	var tb string
	for _, rep := range rd.Replicas {
		var n int
		fmt.Sscanf(rep.Node, "n%d", &n)
		racks[fmt.Sprintf("RACK%d", (n-1)%3+1)] = true
		if rep.Tiebreaker {
			tb = rep.Node
		}
	}
	assert.Len(t, racks, 3, "two disks and the tiebreaker in three racks: %+v", rd.Replicas)
	require.NotEmpty(t, tb)

	// every node's file passes drbdadm (as that host), all of them side by side
	if testtools.Have(t, "drbdadm") {
		for _, rep := range rd.Replicas {
			out := renderEventually(t, nats, "r1", rep.Node)
			assert.Contains(t, out, "protocol C;")
			dir := t.TempDir()
			res := filepath.Join(dir, "r1.res")
			require.NoError(t, os.WriteFile(res, []byte(out), 0o644))
			host := strings.Replace(rep.Node, "n", "h", 1)
			c := exec.Command("drbdadm", "-c", res, "sh-nop")
			c.Env = append(os.Environ(), "DRBD_DRIVER_VERSION_OVERRIDE=9.2.0", "__DRBD_NODE__="+host)
			msg, err := c.CombinedOutput()
			require.NoError(t, err, "drbdadm refused %s's file: %s\n%s", rep.Node, msg, out)
		}
	} else {
		t.Log("drbdadm not installed: resource files not checked by drbd-utils (CI installs it)")
	}

	// the seeding plan: 32 set-gi calls, always --force; the first disk's own id gets RANDOM:DAY0:::1:1
	var first replica
	for _, rep := range rd.Replicas {
		if !rep.Diskless && (first.Node == "" || rep.NodeID < first.NodeID) {
			first = rep
		}
	}
	out, code := run(t, append([]string{"drbd", "seed-plan", "r1", "--node", first.Node}, nats...)...)
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 32)
	for _, l := range lines {
		assert.Contains(t, l, "drbdmeta --force")
		assert.Contains(t, l, "set-gi")
	}
	assert.Regexp(t, fmt.Sprintf(`--node-id %d .* set-gi [0-9A-F]{16}:[0-9A-F]{16}:::1:1`, first.NodeID), out)
	out, _ = run(t, append([]string{"drbd", "seed-plan", "r1", "--node", tb}, nats...)...)
	assert.Contains(t, out, "diskless")

	// a third disk: the tiebreaker goes, and its node is told to tear down
	r = cmd("replica.add", `{"resource":"r1","place_count":3}`)
	var types []string
	for _, e := range r.Events {
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{"replica.added", "replica.removed", "node.claimed"}, types, "the new disk claims its node")
	rd = get()
	require.Len(t, rd.Replicas, 3)
	for _, rep := range rd.Replicas {
		assert.False(t, rep.Diskless, "%+v", rep)
	}
	require.Eventually(t, func() bool {
		_, code := run(t, append([]string{"drbd", "render", "r1", "--node", tb}, nats...)...)
		return code == 1
	}, 10e9, 50e6, "the tiebreaker's node no longer gets r1")

	// the audit shows every allocation of r1
	out, code = run(t, append([]string{"audit", "--json", "--subject", "cairn.ev.rd.r1"}, nats...)...)
	require.Equal(t, 0, code)
	for _, want := range []string{`"rd.created"`, `"vd.created"`, `"replica.added"`, `"replica.removed"`, `"node_id"`, `"minors"`, `"day0_gi"`, `"port":7000`} {
		assert.Contains(t, out, want)
	}

	// rd.delete: an empty definition goes, its port with it (one with replicas takes
	// them along: commands.TestDeleteDefinition, and the LINSTOR CLI session)
	cmd("rd.create", `{"name":"scratch"}`)
	status, body := httpJSON(t, "GET", s.url("/cairn/v1/resources/scratch"), "")
	require.Equal(t, 200, status, body)
	scratchPort := decode[definition](t, body).Port
	status, body = httpJSON(t, "POST", s.url("/cairn/v1/commands/rd.delete"), `{"name":"scratch"}`)
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, `"rd.deleted"`)
	status, _ = httpJSON(t, "GET", s.url("/cairn/v1/resources/scratch"), "")
	assert.Equal(t, 404, status)
	out, code = run(t, append([]string{"audit", "--json", "--type", "rd.deleted"}, nats...)...)
	require.Equal(t, 0, code)
	assert.Contains(t, out, fmt.Sprintf(`"port":%d`, scratchPort))

	// refusals over HTTP name what was wrong and change nothing
	status, body = httpJSON(t, "POST", s.url("/cairn/v1/commands/replica.add"), `{"resource":"r1","node":"n1","diskless":"yes"}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, "diskless")
	status, body = httpJSON(t, "POST", s.url("/cairn/v1/commands/rg.spawn"), `{"resource_group":"rg2","name":"r2","size_kib":1099511627776000}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, "size_kib")
}

// renderEventually runs `cairn drbd render` until the dispatcher has published.
func renderEventually(t *testing.T, nats []string, rd, node string) string {
	t.Helper()
	var out string
	require.Eventually(t, func() bool {
		var code int
		out, code = run(t, append([]string{"drbd", "render", rd, "--node", node}, nats...)...)
		return code == 0
	}, 10e9, 50e6, "no desired state of %s for %s", rd, node)
	return out
}

// Cairn's lists page in name order: ?limit= items after ?after= (the previous page's
// "next"), the last page without "next"; a bad limit names the parameter.
func TestNativeListsPage(t *testing.T) {
	s := startServe(t, t.TempDir())
	nats := []string{"--nats", s.natsURL()}
	_, code := run(t, append([]string{"cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`}, nats...)...)
	require.Equal(t, 0, code)
	for i := 1; i <= 5; i++ {
		_, code = run(t, append([]string{"cmd", "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i)}, nats...)...)
		require.Equal(t, 0, code)
		_, code = run(t, append([]string{"cmd", "rd.create", fmt.Sprintf(`{"name":"r%d"}`, i)}, nats...)...)
		require.Equal(t, 0, code)
	}
	type page struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
		Next string `json:"next"`
	}
	assert.Equal(t, []string{"r1", "r2", "r3", "r4", "r5"}, pagedNames(t, s, "resources", 2))
	status, body := httpJSON(t, "GET", s.url("/cairn/v1/nodes?limit=3&after=n1"), "")
	require.Equal(t, 200, status)
	p := decode[page](t, body)
	require.Len(t, p.Nodes, 3)
	assert.Equal(t, "n2", p.Nodes[0].Name)
	assert.Equal(t, "n4", p.Next)
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/storage-pools?limit=0"), "")
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `"field":"limit"`)

	// Filters page from the views' indexes: the definitions of a group, those with a
	// replica on a node.
	for _, c := range [][2]string{
		{"rg.create", `{"name":"g","place_count":1}`},
		{"rd.create", `{"name":"g3","resource_group":"g"}`}, {"rd.create", `{"name":"g1","resource_group":"g"}`},
		{"rd.create", `{"name":"g2","resource_group":"g"}`},
		{"sp.create", `{"node":"n2","name":"thin","provider":"file_thin","pool":"/var/lib/x","capacity_kib":1048576}`},
		{"vd.create", `{"resource":"r4","volume":0,"size_kib":4096}`}, {"vd.create", `{"resource":"r2","volume":0,"size_kib":4096}`},
		{"replica.add", `{"resource":"r4","node":"n2"}`}, {"replica.add", `{"resource":"r2","node":"n2"}`},
	} {
		out, code := run(t, append([]string{"cmd", c[0], c[1]}, nats...)...)
		require.Equal(t, 0, code, out)
	}
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/resources?resource_group=g&limit=2"), "")
	require.Equal(t, 200, status, body)
	p = decode[page](t, body)
	require.Len(t, p.Resources, 2)
	assert.Equal(t, []string{"g1", "g2"}, []string{p.Resources[0].Name, p.Resources[1].Name})
	assert.Equal(t, "g2", p.Next)
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/resources?resource_group=g&after=g2"), "")
	require.Equal(t, 200, status, body)
	p = decode[page](t, body)
	require.Len(t, p.Resources, 1)
	assert.Equal(t, "g3", p.Resources[0].Name)
	assert.Empty(t, p.Next)
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/resources?node=n2"), "")
	require.Equal(t, 200, status, body)
	p = decode[page](t, body)
	require.Len(t, p.Resources, 2)
	assert.Equal(t, []string{"r2", "r4"}, []string{p.Resources[0].Name, p.Resources[1].Name})
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/resources?node=n2&resource_group=g"), "")
	assert.Equal(t, 400, status, body)
}

// Pages of /cairn/v1/nodes cut at a node's name neither skip nor repeat a node, also
// when one name extends another with '-' or '.' (DNS names do): walked one node a page,
// the pages are the whole list. The views keep a node under "v/node/<name>/", so such
// names sort before the name they extend; the cursor compared names and lost "n1".
func TestNodePagesWithNamesThatExtendOthers(t *testing.T) {
	s := startServe(t, t.TempDir())
	nats := []string{"--nats", s.natsURL()}
	_, code := run(t, append([]string{"cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`}, nats...)...)
	require.Equal(t, 0, code)
	for i, n := range []string{"n1", "n1-a", "n1.b.example.com", "n1-a-b", "n2"} {
		out, code := run(t, append([]string{"cmd", "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, n, i, i+1)}, nats...)...)
		require.Equal(t, 0, code, out)
	}
	type page struct {
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
		Next string `json:"next"`
	}
	status, body := httpJSON(t, "GET", s.url("/cairn/v1/nodes"), "")
	require.Equal(t, 200, status, body)
	var whole []string
	for _, n := range decode[page](t, body).Nodes {
		whole = append(whole, n.Name)
	}
	require.ElementsMatch(t, []string{"n1", "n1-a", "n1.b.example.com", "n1-a-b", "n2"}, whole)
	assert.Equal(t, whole, pagedNames(t, s, "nodes", 1))
}

// pagedNames follows the pages of a native list (nodes, resources, …) of limit items
// from the start, each page's "next" the following page's after, and returns the
// names in the order served.
func pagedNames(t *testing.T, s *serve, list string, limit int) []string {
	t.Helper()
	var names []string
	after := ""
	for range 1000 {
		status, body := httpJSON(t, "GET", s.url(fmt.Sprintf("/cairn/v1/%s?limit=%d&after=%s", list, limit, url.QueryEscape(after))), "")
		require.Equal(t, 200, status, body)
		p := decode[map[string]json.RawMessage](t, body)
		for _, item := range decode[[]struct {
			Name string `json:"name"`
		}](t, string(p[list])) {
			names = append(names, item.Name)
		}
		if p["next"] == nil {
			return names
		}
		after = decode[string](t, string(p["next"]))
	}
	t.Fatalf("%s: more than 1,000 pages", list)
	return nil
}

// TestReadersNeverSeeHalfASpawn: while eight clients spawn definitions through the real
// `cairn serve` (each rg.spawn one atomic batch: the definition, its volume, its
// replicas; concurrent ones grouped into one batch), every definition a reader lists over
// HTTP has all its replicas: the views are committed only where a batch ends.
func TestReadersNeverSeeHalfASpawn(t *testing.T) {
	s := startServe(t, t.TempDir())
	nc, err := nats.Connect(s.natsURL())
	require.NoError(t, err)
	defer nc.Close()
	cmd := func(verb, body string) bool { // assert, not require: spawners call it too
		resp, err := nc.Request("cairn.cmd."+verb, []byte(body), 30*time.Second)
		return assert.NoError(t, err) && assert.Contains(t, string(resp.Data), `"ok":true`, "%s %s", verb, body)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 4; i++ {
		cmd("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
		cmd("sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":1073741824}`, i))
	}
	cmd("rg.create", `{"name":"rg","place_count":3,"storage_pool":"thin"}`)

	type page struct {
		Resources []struct {
			Name     string            `json:"name"`
			Replicas []json.RawMessage `json:"replicas"`
		} `json:"resources"`
	}
	list := func() page {
		status, body := httpJSON(t, "GET", s.url("/cairn/v1/resources?limit=10000"), "")
		require.Equal(t, 200, status, body)
		return decode[page](t, body)
	}
	require.True(t, cmd("rg.spawn", `{"resource_group":"rg","name":"first","size_kib":4096}`))
	first := list()
	require.Len(t, first.Resources, 1)
	whole := len(first.Resources[0].Replicas)
	require.Equal(t, 3, whole)

	var spawned sync.WaitGroup
	stop := make(chan struct{})
	for c := range 8 {
		spawned.Add(1)
		go func() {
			defer spawned.Done()
			for i := range 25 {
				if !cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg","name":"r%d-%d","size_kib":4096}`, c, i)) {
					return
				}
			}
		}()
	}
	go func() { spawned.Wait(); close(stop) }()
	reads, seen := 0, 0
	var partial []string
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		for _, rd := range list().Resources {
			if len(rd.Replicas) != whole {
				partial = append(partial, fmt.Sprintf("%s with %d of its %d replicas (list %d)", rd.Name, len(rd.Replicas), whole, reads))
			}
			seen++
		}
		reads++
	}
	assert.Len(t, list().Resources, 201)
	t.Logf("%d lists read, %d definitions checked", reads, seen)
	assert.Empty(t, partial, "definitions listed without all their replicas")
	assert.Greater(t, reads, 2, "the reader listed while the spawns went on")
}
