package test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinstorAutoplaceHonoursItsSelectFilter: what LINSTOR's clients put in an
// autoplace's select_filter is honoured or refused, never dropped. linstor-csi's
// topology scheduler (pkg/topology/scheduler/autoplacetopology/autoplacetopology.go)
// places the replica a pod needs with node_name_list, place_count 1 and
// additional_place_count 1; the CLI's `resource create --auto-place N -s POOL` sends
// storage_pool_list, `--do-not-place-with` not_place_with_rsc, `--x-replicas-on-different`
// x_replicas_on_different_map (linstorapi.py). Checked on Cairn's own view of the
// replicas and on the disks' pools.
func TestLinstorAutoplaceHonoursItsSelectFilter(t *testing.T) {
	c := startSimCluster(t, 4)
	l := linstorHTTP{t: t, s: c.s, api: loadOpenAPI(t)}
	for _, n := range []string{"n3", "n4"} {
		require.NoError(t, os.MkdirAll(filepath.Join(c.root(n), "var/lib/cairn/fast"), 0o755))
		c.cmd("sp.create", `{"node":"`+n+`","name":"fast","provider":"file_thin","pool":"/var/lib/cairn/fast","capacity_kib":1048576}`)
	}
	for _, n := range []string{"n1", "n2"} {
		c.cmd("node.modify", `{"name":"`+n+`","properties":{"zone":"z1"}}`)
	}
	for _, n := range []string{"n3", "n4"} {
		c.cmd("node.modify", `{"name":"`+n+`","properties":{"zone":"z2"}}`)
	}
	diskful := func(rd string) map[string]string { // node → pool
		out := map[string]string{}
		for _, r := range c.resource(rd).Replicas {
			if !r.Diskless {
				out[r.Node] = r.StoragePool
			}
		}
		return out
	}
	for _, rd := range []string{"a1", "a2", "a3"} {
		c.cmd("rd.create", `{"name":"`+rd+`"}`)
		c.cmd("vd.create", `{"resource":"`+rd+`","volume":0,"size_kib":4096}`)
	}

	// The CLI's pool choice: the disk goes on "fast" (the thin pools have more room).
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	ok := linstorOK(t, linstor)
	ok("resource", "create", "--storage-pool", "fast", "--auto-place", "1", "a1")
	got := diskful("a1")
	require.Len(t, got, 1)
	for node, pool := range got {
		assert.Equal(t, "fast", pool, "on %s", node)
	}

	// linstor-csi's placement on the pod's node.
	l.rcs(201, "POST", "/v1/resource-definitions/a1/autoplace", `{"select_filter":{"node_name_list":["n2"],"place_count":1,"additional_place_count":1}}`)
	got = diskful("a1")
	require.Len(t, got, 2)
	assert.Contains(t, got, "n2", "the requisite node")

	// Not with a1: a2's disk goes where no replica of a1 is (its two disks and the
	// tiebreaker Cairn added take three of the four nodes, as LINSTOR counts them).
	ok("resource", "create", "--do-not-place-with", "a1", "--auto-place", "1", "a2")
	var a1 []string
	for _, r := range c.resource("a1").Replicas {
		a1 = append(a1, r.Node)
	}
	require.Len(t, a1, 3)
	a2 := slices.Sorted(keysOf(diskful("a2")))
	require.Len(t, a2, 1)
	assert.NotContains(t, a1, a2[0], "a2 on %v, a1 on %v", a2, a1)

	// At most one disk per zone: two disks, one in each.
	ok("resource", "create", "--x-replicas-on-different", "zone", "1", "--auto-place", "2", "a3")
	zones := map[string]int{}
	for n := range diskful("a3") {
		zones[map[string]string{"n1": "z1", "n2": "z1", "n3": "z2", "n4": "z2"}[n]]++
	}
	assert.Equal(t, map[string]int{"z1": 1, "z2": 1}, zones)
	// A third cannot be placed: both zones have one. LINSTOR's FAIL_NOT_ENOUGH_NODES,
	// naming why each node was passed over.
	rc := l.rcs(500, "POST", "/v1/resource-definitions/a3/autoplace", `{"select_filter":{"place_count":3,"x_replicas_on_different_map":{"zone":1}}}`)
	assert.Equal(t, retCode(lsError, lsCreate, lsRsc, 996), rc[0].RetCode, "%s", rc[0].Message)
	assert.Contains(t, rc[0].Message, "x_replicas_on_different")

	// What Cairn cannot honour is refused naming the field, and places nothing.
	before := diskful("a3")
	rc = l.rcs(500, "POST", "/v1/resource-definitions/a3/autoplace", `{"select_filter":{"place_count":3,"not_place_with_rsc_regex":"a.*"}}`)
	assert.Contains(t, rc[0].Details, "field: not_place_with_rsc_regex", rc[0].Message)
	rc = l.rcs(500, "POST", "/v1/resource-definitions/a3/autoplace", `{"select_filter":{"place_count":3,"replicas_on_same":["Aux/zone=z3"]}}`)
	assert.Contains(t, rc[0].Message, `is not "z3" (replicas_on_same zone=z3)`, "no node is in z3")
	rc = l.rcs(500, "POST", "/v1/resource-definitions/a3/autoplace", `{"select_filter":{"place_count":3,"provider_list":["ZFS"]}}`)
	assert.Contains(t, rc[0].Message, "no storage pool of provider zfs")
	assert.Equal(t, before, diskful("a3"))

	// A group keeps one pool, one provider and bare property keys: what it cannot keep
	// is refused naming the field (linstor-csi's rg modify sends the StorageClass's
	// lists), and no group appears.
	for field, filter := range map[string]string{
		"storage_pool_list":           `{"storage_pool_list":["thin","fast"]}`,
		"node_name_list":              `{"node_name_list":["n1"]}`,
		"not_place_with_rsc":          `{"not_place_with_rsc_regex":"db-.*"}`,
		"x_replicas_on_different_map": `{"x_replicas_on_different_map":{"Aux/zone":1}}`,
	} {
		rc = l.rcs(500, "POST", "/v1/resource-groups", `{"name":"rgx","select_filter":`+filter+`}`)
		assert.Contains(t, rc[0].Details, "field: "+field, rc[0].Message)
		l.rcs(404, "GET", "/v1/resource-groups/rgx", "")
	}

	// A fixed value (LINSTOR's replicas_on_same "Aux/zone=z1"): every disk on a node of
	// that zone, in an autoplace and in a group the CLI creates, which lists it back.
	c.cmd("rd.create", `{"name":"a4"}`)
	c.cmd("vd.create", `{"resource":"a4","volume":0,"size_kib":4096}`)
	l.rcs(201, "POST", "/v1/resource-definitions/a4/autoplace", `{"select_filter":{"place_count":2,"replicas_on_same":["Aux/zone=z1"]}}`)
	assert.Equal(t, []string{"n1", "n2"}, slices.Sorted(keysOf(diskful("a4"))))
	ok("resource-group", "create", "rgz", "--place-count", "2", "--replicas-on-same", "zone=z2") // the CLI adds Aux/
	out, _, _ := linstor("resource-group", "list")
	assert.Contains(t, out, "Aux/zone=z2")
	ok("resource-group", "spawn-resources", "rgz", "a5", "4M")
	assert.Equal(t, []string{"n3", "n4"}, slices.Sorted(keysOf(diskful("a5"))))

	rv := c.waitUpToDate("a1", 2, 60*time.Second)
	assert.Len(t, upToDate(rv), 2)
}

func keysOf(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	}
}
