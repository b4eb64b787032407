package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/projections"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// drbdCluster makes a cluster of n storage nodes in three racks, each with a thin pool
// "thin" of capacity KiB (and "thick" on the even ones).
func drbdCluster(t *testing.T, s *server.Server, n int, capacity uint64) {
	t.Helper()
	must(t, s, "cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= n; i++ {
		must(t, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"RACK%d","properties":{"site":"S%d"}}`, i, i, i, (i-1)%3+1, (i-1)/6+1))
		must(t, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":%d}`, i, capacity))
		// No over-provisioning: the tests count on capacity as the pool's hard limit.
		must(t, s, "sp.modify", fmt.Sprintf(`{"node":"n%d","name":"thin","overprovision":1}`, i))
		if i%2 == 0 {
			must(t, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thick","provider":"lvm","pool":"vg0","capacity_kib":%d}`, i, capacity))
		}
	}
}

func must(t *testing.T, s *server.Server, verb, body string) admission.Reply {
	t.Helper()
	r := servertest.Submit(s, verb, body)
	require.True(t, r.OK, "%s %s: %+v", verb, body, r.Error)
	return r
}

func refused(t *testing.T, s *server.Server, verb, body, code, msg string) {
	t.Helper()
	before := servertest.LastSeq(t, s)
	r := servertest.Submit(s, verb, body)
	require.False(t, r.OK, "%s %s accepted", verb, body)
	assert.Equal(t, code, r.Error.Code, r.Error.Message)
	assert.Contains(t, r.Error.Message, msg)
	assert.Equal(t, before, servertest.LastSeq(t, s), "a refused command appended")
}

func definition(t *testing.T, s *server.Server, name string) projections.ResourceDefinition {
	t.Helper()
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	rd, ok, err := v.ResourceDefinition(name)
	require.NoError(t, err)
	require.True(t, ok, "no definition %s", name)
	return rd
}

// layout summarises a definition as node:kind sorted ("n1:disk n4:disk n2:tb").
func layout(rd projections.ResourceDefinition) string {
	var parts []string
	for _, r := range rd.Replicas {
		kind := "disk"
		switch {
		case r.Tiebreaker:
			kind = "tb"
		case r.Diskless:
			kind = "diskless"
		}
		parts = append(parts, r.Node+":"+kind)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func TestResourceLifecycle(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 6, 10<<20)
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin","replicas_on_different":["failure_domain"],"drbd_options":{"auto_promote":false}}`)

	// a group spawns a definition: two diskful replicas in different racks and a
	// tiebreaker in the third rack
	r := must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":1048576}`)
	rd := definition(t, s, "r1")
	assert.Equal(t, 7000, rd.Port)
	require.Len(t, rd.Volumes, 1)
	assert.Regexp(t, "^[0-9A-F]{16}$", rd.Volumes[0].Day0GI)
	require.Len(t, rd.Replicas, 3, layout(rd))
	domains := map[string]bool{}
	for _, rep := range rd.Replicas {
		domains[fmt.Sprintf("RACK%d", (nodeNum(rep.Node)-1)%3+1)] = true
		assert.Len(t, rep.Minors, 1)
		assert.GreaterOrEqual(t, rep.Minors[0].Minor, 1000)
	}
	assert.Len(t, domains, 3, "replicas and tiebreaker spread over the racks: %s", layout(rd))
	assert.Equal(t, 1, strings.Count(layout(rd), ":tb"), layout(rd))
	types := []string{}
	for _, e := range r.Events {
		types = append(types, e.Type)
	}
	// The claims end the append: the port, and each node placed on.
	assert.Equal(t, []string{"rd.created", "vd.created", "replica.added", "replica.added", "replica.added",
		"port.claimed", "node.claimed", "node.claimed", "node.claimed"}, types)
	ids := map[int]bool{}
	for _, rep := range rd.Replicas {
		assert.False(t, ids[rep.NodeID], "duplicate node id")
		ids[rep.NodeID] = true
	}
	// the first diskful replica seeds RANDOM:DAY0, the second starts at day 0
	first, second := rd.Replicas[0], rd.Replicas[1]
	require.NotEmpty(t, first.Seeds)
	day0 := rd.Volumes[0].Day0GI
	for _, sd := range first.Seeds {
		if sd.NodeID == first.NodeID {
			assert.True(t, strings.HasSuffix(sd.GI, ":"+day0+":::1:1"), sd.GI)
		}
	}
	for _, sd := range second.Seeds {
		if sd.NodeID == second.NodeID {
			assert.Equal(t, day0+"::::1:1", sd.GI)
		}
	}

	// a third diskful replica: the tiebreaker goes
	tb := ""
	for _, rep := range rd.Replicas {
		if rep.Tiebreaker {
			tb = rep.Node
		}
	}
	target := ""
	for i := 1; i <= 6; i++ {
		if _, has := rd.Replica(fmt.Sprintf("n%d", i)); !has {
			target = fmt.Sprintf("n%d", i)
			break
		}
	}
	r = must(t, s, "replica.add", fmt.Sprintf(`{"resource":"r1","node":%q}`, target))
	assert.Equal(t, []string{"replica.added", "replica.removed", "node.claimed"}, eventTypes(r))
	rd = definition(t, s, "r1")
	assert.NotContains(t, layout(rd), ":tb")
	_, still := rd.Replica(tb)
	assert.False(t, still, "tiebreaker %s still there: %s", tb, layout(rd))

	// back to two: the tiebreaker returns
	r = must(t, s, "replica.remove", fmt.Sprintf(`{"resource":"r1","node":%q}`, target))
	assert.Equal(t, []string{"replica.removed", "replica.added", "node.claimed"}, eventTypes(r))
	rd = definition(t, s, "r1")
	assert.Equal(t, 1, strings.Count(layout(rd), ":tb"), layout(rd))

	// removing the tiebreaker keeps it
	for _, rep := range rd.Replicas {
		if rep.Tiebreaker {
			tb = rep.Node
		}
	}
	r = must(t, s, "replica.remove", fmt.Sprintf(`{"resource":"r1","node":%q}`, tb))
	assert.Empty(t, r.Events)
	assert.Contains(t, strings.Join(r.Warnings, " "), "kept")

	// promoting the tiebreaker to a disk: full sync, no seeds, and no tiebreaker needed
	r = must(t, s, "replica.toggle-disk", fmt.Sprintf(`{"resource":"r1","node":%q,"diskless":false}`, tb))
	rd = definition(t, s, "r1")
	p, _ := rd.Replica(tb)
	assert.True(t, p.FullSync)
	assert.Empty(t, p.Seeds)
	assert.False(t, p.Diskless)
	assert.Equal(t, 3, strings.Count(layout(rd), ":disk"), layout(rd))
	assert.Len(t, rd.Replicas, 3, "three disks and no tiebreaker: %s", layout(rd))

	// refusals
	refused(t, s, "replica.add", `{"resource":"r1","node":"`+tb+`"}`, cairn.CodeAlreadyExists, "already has a diskful replica")
	refused(t, s, "replica.add", `{"resource":"ghost","node":"n1"}`, cairn.CodeNotFound, "ghost does not exist")
	refused(t, s, "replica.add", `{"resource":"r1","node":"ghost"}`, cairn.CodeNotFound, "not in the cluster")
	refused(t, s, "node.remove", `{"name":"`+tb+`"}`, cairn.CodePreconditionFailed, "holds replicas of 1 resource(s) (r1)")
	refused(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`, cairn.CodeAlreadyExists, "r1 already exists")
	refused(t, s, "vd.create", `{"resource":"r1","volume":1,"size_kib":1099511627776}`, cairn.CodePreconditionFailed, "KiB free; volume 1 of r1 needs 1099511627776 KiB")
	refused(t, s, "vd.create", `{"resource":"r1","volume":1,"size_kib":1}`, cairn.CodeInvalidArgument, "minimum")
	// A volume added to the deployed definition: every replica gets a minor and seeds.
	r = must(t, s, "vd.create", `{"resource":"r1","volume":1,"size_kib":4096}`)
	assert.Equal(t, []string{"vd.created", "replica.volume-added", "replica.volume-added", "replica.volume-added",
		"node.claimed", "node.claimed", "node.claimed"}, eventTypes(r), "each node's minors are claimed")
	for _, rep := range definition(t, s, "r1").Replicas {
		m0, ok0 := rep.Minor(0)
		m1, ok1 := rep.Minor(1)
		assert.True(t, ok0 && ok1 && m0 != m1, "%s: minors %v", rep.Node, rep.Minors)
	}
	must(t, s, "vd.delete", `{"resource":"r1","volume":1}`)
	assert.Len(t, definition(t, s, "r1").Replicas[0].Minors, 1)

	// activation: reallocate_port is the only way a port changes
	must(t, s, "resource.deactivate", `{"resource":"r1"}`)
	assert.True(t, definition(t, s, "r1").Replicas[0].Inactive)
	must(t, s, "resource.activate", `{"resource":"r1","reallocate_port":true}`)
	rd = definition(t, s, "r1")
	assert.Equal(t, 7001, rd.Port)
	assert.False(t, rd.Replicas[0].Inactive)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r2","size_kib":4096}`)
	assert.Equal(t, 7000, definition(t, s, "r2").Port, "the freed port is reused first")
}

func nodeNum(n string) int {
	var i int
	fmt.Sscanf(n, "n%d", &i)
	return i
}

func eventTypes(r admission.Reply) []string {
	out := []string{}
	for _, e := range r.Events {
		out = append(out, e.Type)
	}
	return out
}

func TestAutoplaceRefusalNamesWhatIsShort(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 8192)
	must(t, s, "rg.create", `{"name":"big","place_count":3,"storage_pool":"thick"}`)
	refused(t, s, "rg.spawn", `{"resource_group":"big","name":"r1","size_kib":4096}`, cairn.CodePreconditionFailed,
		"autoplace needs 3 more diskful replica(s) of 4096 KiB and found 1 eligible node(s); passed over n1: no storage pool named thick; n3: no storage pool named thick")
	must(t, s, "rg.create", `{"name":"huge","place_count":2,"storage_pool":"thin"}`)
	refused(t, s, "rg.spawn", `{"resource_group":"huge","name":"r1","size_kib":16384}`, cairn.CodePreconditionFailed, "only 8192 KiB free in storage pool named thin (needs 16384)")
	must(t, s, "node.set-state", `{"name":"n3","state":"offline"}`)
	must(t, s, "rg.create", `{"name":"three","place_count":3}`)
	refused(t, s, "rg.spawn", `{"resource_group":"three","name":"r1","size_kib":4096}`, cairn.CodePreconditionFailed, "n3: offline")
}

func TestAllocationRangesRunOutCleanly(t *testing.T) {
	s := servertest.Start(t, func(c *server.Config) {
		c.Admission.Ports = replicas.Range{Min: 7000, Max: 7001}
		c.Admission.Minors = replicas.Range{Min: 1000, Max: 1002}
	})
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"a"}`)
	must(t, s, "rd.create", `{"name":"b"}`)
	refused(t, s, "rd.create", `{"name":"c"}`, cairn.CodePreconditionFailed, "no free TCP port left in range 7000-7001 (1 needed)")
	// four volumes on one node need four minors; the range has three
	for v := range 4 {
		must(t, s, "vd.create", fmt.Sprintf(`{"resource":"a","volume":%d,"size_kib":4096}`, v))
	}
	refused(t, s, "replica.add", `{"resource":"a","node":"n1"}`, cairn.CodePreconditionFailed, "no free minor on node n1 left in range 1000-1002 (4 needed)")
	// three fit, and the next definition on that node finds none
	must(t, s, "vd.create", `{"resource":"b","volume":0,"size_kib":4096}`)
	for v := 1; v < 3; v++ {
		must(t, s, "vd.create", fmt.Sprintf(`{"resource":"b","volume":%d,"size_kib":4096}`, v))
	}
	must(t, s, "replica.add", `{"resource":"b","node":"n1"}`)
	rd := definition(t, s, "b")
	var got []int
	for _, m := range rd.Replicas[0].Minors {
		got = append(got, m.Minor)
	}
	assert.Equal(t, []int{1000, 1001, 1002}, got)
	// freed on removal, handed out again
	must(t, s, "replica.remove", `{"resource":"b","node":"n1"}`)
	must(t, s, "replica.add", `{"resource":"b","node":"n1"}`)
	assert.Equal(t, 1000, definition(t, s, "b").Replicas[0].Minors[0].Minor)
}

// TestConcurrentReplicaAdds: 100 concurrent replica.add across 20 definitions and 10
// nodes never hand out a node id twice in a definition, a port twice, or a minor twice
// on a node; every refusal says why.
func TestConcurrentReplicaAdds(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 10, 1<<30)
	nc := servertest.Client(t, s)
	for i := range 20 {
		must(t, s, "rd.create", fmt.Sprintf(`{"name":"r%d"}`, i))
		must(t, s, "vd.create", fmt.Sprintf(`{"resource":"r%d","volume":0,"size_kib":4096}`, i))
	}
	var wg sync.WaitGroup
	replies := make([]admission.Reply, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = servertest.SendAnswered(t, nc, "replica.add", fmt.Sprintf(`{"resource":"r%d","node":"n%d","diskless":%t}`, i%20, (i/20+i)%10+1, i%7 == 0))
		}()
	}
	wg.Wait()
	accepted := 0
	for _, r := range replies {
		if r.OK {
			accepted++
		}
		if !r.OK {
			assert.NotEmpty(t, r.Error.Message)
			switch r.Error.Code {
			case cairn.CodeAlreadyExists:
			case cairn.CodePreconditionFailed:
				assert.Contains(t, r.Error.Message, "no replica with a disk yet")
			default:
				t.Errorf("unexpected refusal: %+v", r.Error)
			}
		}
	}
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	rds, err := v.ResourceDefinitions()
	require.NoError(t, err)
	ports := map[int]string{}
	minors := map[string]string{}
	total, tiebreakers := 0, 0
	for _, rd := range rds {
		assert.True(t, rd.Port >= 7000 && rd.Port <= 7999)
		require.NotContains(t, ports, rd.Port, "port handed out twice")
		ports[rd.Port] = rd.Name
		ids := map[int]bool{}
		for _, r := range rd.Replicas {
			total++
			if r.Tiebreaker {
				tiebreakers++
			}
			require.False(t, ids[r.NodeID], "node id %d twice in %s", r.NodeID, rd.Name)
			ids[r.NodeID] = true
			for _, m := range r.Minors {
				key := fmt.Sprintf("%s/%d", r.Node, m.Minor)
				require.NotContains(t, minors, key, "minor handed out twice")
				minors[key] = rd.Name
			}
		}
	}
	assert.Equal(t, accepted, total-tiebreakers, "every accepted add is one replica; the rest are tiebreakers the rule added")
	assert.Greater(t, accepted, 50)
}

// TestModifyIsAPatch: rd.modify sets what it names, unsets what it lists and keeps every
// other option, an explicit false included; unknown DrbdOptions keys round-trip.
func TestModifyIsAPatch(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"r1","drbd_options":{"auto_promote":false,"extra":{"DrbdOptions/Net/ping-timeout":"10"}}}`)
	must(t, s, "rd.modify", `{"name":"r1","drbd_options":{"protocol":"A","extra":{"DrbdOptions/Disk/c-max-rate":"100M"}}}`)
	o := definition(t, s, "r1").DRBDOptions
	require.NotNil(t, o.AutoPromote)
	assert.False(t, *o.AutoPromote, "the explicit false set at creation is kept")
	assert.Equal(t, "A", *o.Protocol)
	assert.Equal(t, map[string]string{"DrbdOptions/Net/ping-timeout": "10", "DrbdOptions/Disk/c-max-rate": "100M"}, o.Extra)

	must(t, s, "rd.modify", `{"name":"r1","unset":["auto_promote","DrbdOptions/Net/ping-timeout"]}`)
	o = definition(t, s, "r1").DRBDOptions
	assert.Nil(t, o.AutoPromote)
	assert.Equal(t, map[string]string{"DrbdOptions/Disk/c-max-rate": "100M"}, o.Extra)

	r := must(t, s, "rd.modify", `{"name":"r1","drbd_options":{"protocol":"A"}}`)
	assert.Empty(t, r.Events)
	assert.Contains(t, strings.Join(r.Warnings, " "), "nothing changed")
	refused(t, s, "rd.modify", `{"name":"r1","drbd_options":{"protocol":"C"},"unset":["protocol"]}`, cairn.CodeInvalidArgument, "both set and unset")
	refused(t, s, "rd.modify", `{"name":"r1","drbd_options":{"extra":{"DrbdOptions/Net/x":"1"}},"unset":["DrbdOptions/Net/x"]}`, cairn.CodeInvalidArgument, "both set and unset")
	refused(t, s, "rd.modify", `{"name":"r1","unset":["bogus"]}`, cairn.CodeInvalidArgument, "neither a typed option")
	refused(t, s, "rd.modify", `{"name":"r1","drbd_options":{"protocol":"X"}}`, cairn.CodeInvalidArgument, "protocol")
	refused(t, s, "rd.modify", `{"name":"r1"}`, cairn.CodeInvalidArgument, "")
	refused(t, s, "rd.modify", `{"name":"ghost","unset":["protocol"]}`, cairn.CodeNotFound, "ghost")
	// An extra option that duplicates a typed one is refused at the door, naming the
	// field (it was accepted, and every agent's render of r1 then failed for good).
	for _, c := range [][2]string{
		{"rd.modify", `{"name":"r1","drbd_options":{"extra":{"DrbdOptions/Net/max-buffers":"8000"}}}`},
		{"rd.create", `{"name":"r2","drbd_options":{"extra":{"DrbdOptions/Net/max-buffers":"8000"}}}`},
		{"rg.create", `{"name":"g2","place_count":2,"drbd_options":{"extra":{"DrbdOptions/Net/max-buffers":"8000"}}}`},
		{"controller.modify", `{"drbd_options":{"extra":{"DrbdOptions/Net/max-buffers":"8000"}}}`},
	} {
		refused(t, s, c[0], c[1], cairn.CodeInvalidArgument, "duplicates the typed option max_buffers")
		r := servertest.Submit(s, c[0], c[1])
		assert.Equal(t, "drbd_options.extra[DrbdOptions/Net/max-buffers]", r.Error.Field, c[0])
	}
}

// TestDeleteDefinition: rd.delete takes a definition away with its replicas (diskless
// first, then the disks, in one atomic append, as LINSTOR does), its volumes and its
// port; one in use (Primary on a node, as its agent reports) is refused naming the node;
// the name can be used again.
func TestDeleteDefinition(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rg.create", `{"name":"rg","place_count":2}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg","name":"r1","size_kib":[4096]}`)
	port := definition(t, s, "r1").Port
	rd := definition(t, s, "r1")
	require.Len(t, rd.Replicas, 3, "two disks and a tiebreaker")
	refused(t, s, "rd.delete", `{"name":"ghost"}`, cairn.CodeNotFound, "ghost")
	refused(t, s, "rd.delete", `{"name":"r1","force":true}`, cairn.CodeInvalidArgument, "force")

	// An agent reports r1 Primary on a disk's node: in use, refused.
	var disk string
	for _, r := range rd.Replicas {
		if !r.Diskless {
			disk = r.Node
		}
	}
	nc := servertest.Client(t, s)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	report := func(role string) {
		body := fmt.Sprintf(`{"resource":"r1","node":%q,"at":"2026-12-02T00:00:00Z","revision":1,"phase":"applied","role":%q}`, disk, role)
		_, err := js.Publish(context.Background(), "cairn.status."+disk+".drbd.r1", []byte(body))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			v, err := s.DB.Read()
			require.NoError(t, err)
			defer v.Close()
			st, err := v.ResourceStatus("r1")
			require.NoError(t, err)
			return st[disk].Role == role
		}, 10*time.Second, 10*time.Millisecond)
	}
	report("Primary")
	refused(t, s, "rd.delete", `{"name":"r1"}`, cairn.CodePreconditionFailed, "in use (Primary on "+disk+")")
	report("Secondary")

	r := must(t, s, "rd.delete", `{"name":"r1"}`)
	var types []string
	for _, e := range r.Events {
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{"replica.removed", "replica.removed", "replica.removed", "rd.deleted"}, types)
	assert.Contains(t, r.Warnings[0], "deleted with its 3 replica(s)")
	v, err := s.DB.Read()
	require.NoError(t, err)
	_, ok, err := v.ResourceDefinition("r1")
	require.NoError(t, err)
	for _, rep := range rd.Replicas {
		held, err := v.NodeResources(rep.Node)
		require.NoError(t, err)
		assert.NotContains(t, held, "r1", "%s no longer holds r1", rep.Node)
	}
	v.Close()
	assert.False(t, ok, "the definition is gone")
	refused(t, s, "rd.delete", `{"name":"r1"}`, cairn.CodeNotFound, "r1")

	must(t, s, "rd.create", `{"name":"r2"}`)
	assert.Equal(t, port, definition(t, s, "r2").Port, "the freed port is allocated again")
	must(t, s, "rd.create", `{"name":"r1"}`)
	assert.Empty(t, definition(t, s, "r1").Volumes, "a definition made again under the name starts empty")
}

// With three storage nodes, two disks and the tiebreaker on the third, autoplace of a
// third disk gives the tiebreaker's replica a disk (LINSTOR's tiebreaker takeover):
// before, every node was passed over as "already holds a replica".
func TestAutoplaceTakesOverTheTiebreaker(t *testing.T) {
	s := servertest.Start(t)
	must(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 3; i++ {
		must(t, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
		must(t, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":10485760}`, i))
	}
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rd := definition(t, s, "r1")
	var tb string
	for _, r := range rd.Replicas {
		if r.Tiebreaker {
			tb = r.Node
		}
	}
	require.NotEmpty(t, tb, layout(rd))

	r := must(t, s, "replica.add", `{"resource":"r1","place_count":3}`)
	rd = definition(t, s, "r1")
	assert.Equal(t, "n1:disk n2:disk n3:disk", layout(rd))
	require.Equal(t, []string{"replica.disk-toggled", "node.claimed"}, eventTypes(r), "the tiebreaker's replica gets a disk, room claimed on its node")
	assert.Equal(t, "cairn.ev.node."+tb, r.Events[1].Subject)
	took, _ := rd.Replica(tb)
	assert.True(t, took.FullSync, "a diskless replica getting a disk holds nothing: full sync")
	assert.Equal(t, "thin", took.StoragePool)

	// A fourth disk has nowhere to go: the refusal still says why.
	refused(t, s, "replica.add", `{"resource":"r1","place_count":4}`, cairn.CodePreconditionFailed, "already holds a replica")
}

// node.modify sets and removes the operator's node properties, and placement reads
// them: replicas_on_same puts both disks on the two nodes node.modify gave the same site.
func TestNodeModifyProperties(t *testing.T) {
	s := servertest.Start(t)
	must(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 3; i++ {
		must(t, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","properties":{"room":"r%d"}}`, i, i, i, i))
		must(t, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":10485760}`, i))
	}
	r := must(t, s, "node.modify", `{"name":"n1","properties":{"site":"a"}}`)
	require.Len(t, r.Events, 1)
	assert.Equal(t, "node.properties-changed", r.Events[0].Type)
	r = must(t, s, "node.modify", `{"name":"n1","properties":{"site":"a"}}`)
	assert.Empty(t, r.Events, "nothing changed")
	assert.Contains(t, r.Warnings[0], "nothing changed")
	must(t, s, "node.modify", `{"name":"n2","properties":{"site":"b"},"unset":["room"]}`)
	must(t, s, "node.modify", `{"name":"n3","properties":{"site":"b"}}`)
	refused(t, s, "node.modify", `{"name":"n3","properties":{"site":"c"},"unset":["site"]}`, cairn.CodeInvalidArgument, "both set and removed")
	refused(t, s, "node.modify", `{"name":"ghost","properties":{"site":"c"}}`, cairn.CodeNotFound, "not in the cluster")
	refused(t, s, "node.modify", `{"name":"n3"}`, cairn.CodeInvalidArgument, "")

	v, err := s.DB.Read()
	require.NoError(t, err)
	n2, _, err := v.Node("n2")
	require.NoError(t, err)
	v.Close()
	assert.Equal(t, map[string]string{"site": "b"}, n2.Spec.Properties)

	must(t, s, "rg.create", `{"name":"same","place_count":2,"storage_pool":"thin","replicas_on_same":["site"]}`)
	must(t, s, "rg.spawn", `{"resource_group":"same","name":"r1","size_kib":4096}`)
	rd := definition(t, s, "r1")
	assert.Equal(t, "n1:tb n2:disk n3:disk", layout(rd), "the two nodes of site b")
}

// Definitions and groups keep free-form properties (LINSTOR's outside DrbdOptions/):
// set at creation (rd.create, rg.spawn, rg.create) and patched by rd.modify and
// rg.modify, alongside the DRBD options.
func TestFreeFormProperties(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 10485760)
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin","properties":{"Aux/sc":"gold"}}`)
	must(t, s, "rd.create", `{"name":"r1","properties":{"Aux/csi":"v1","Foo/x":"1"}}`)
	r := must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r2","size_kib":4096,"properties":{"Aux/pvc":"data"}}`)
	assert.Equal(t, "rd.properties-changed", r.Events[1].Type, "in the spawn's one atomic append")
	assert.Equal(t, map[string]string{"Aux/pvc": "data"}, definition(t, s, "r2").Properties)

	r = must(t, s, "rd.modify", `{"name":"r1","properties":{"Aux/csi":"v2"},"unset_properties":["Foo/x"],"drbd_options":{"quorum":"majority"}}`)
	assert.Len(t, r.Events, 2, "options and properties: two events")
	rd := definition(t, s, "r1")
	assert.Equal(t, map[string]string{"Aux/csi": "v2"}, rd.Properties)
	assert.Equal(t, "majority", *rd.DRBDOptions.Quorum)
	r = must(t, s, "rd.modify", `{"name":"r1","properties":{"Aux/csi":"v2"}}`)
	assert.Empty(t, r.Events)
	assert.Contains(t, r.Warnings[0], "nothing changed")
	refused(t, s, "rd.modify", `{"name":"r1","properties":{"DrbdOptions/Net/protocol":"A"}}`, cairn.CodeInvalidArgument, "drbd_options")
	refused(t, s, "rd.modify", `{"name":"r1","properties":{"a":"1"},"unset_properties":["a"]}`, cairn.CodeInvalidArgument, "both set and removed")
	refused(t, s, "rd.create", `{"name":"r3","properties":{"DrbdOptions/Net/protocol":"A"}}`, cairn.CodeInvalidArgument, "drbd_options")
	many := make([]string, 0, 128)
	for i := range 128 {
		many = append(many, fmt.Sprintf(`"k%d":"v"`, i))
	}
	refused(t, s, "rd.modify", `{"name":"r1","properties":{`+strings.Join(many, ",")+`}}`, cairn.CodeInvalidArgument, "at most 128")

	must(t, s, "rg.modify", `{"name":"rg2","properties":{"Aux/sc":"silver","Aux/tier":"1"}}`)
	must(t, s, "rg.modify", `{"name":"rg2","unset_properties":["Aux/tier"]}`)
	v, err := s.DB.Read()
	require.NoError(t, err)
	g, _, err := v.ResourceGroup("rg2")
	require.NoError(t, err)
	v.Close()
	assert.Equal(t, map[string]string{"Aux/sc": "silver"}, g.Properties)
	refused(t, s, "rg.modify", `{"name":"ghost","properties":{"a":"1"}}`, cairn.CodeNotFound, "does not exist")

	must(t, s, "controller.modify", `{"properties":{"Aux/cluster":"prod"}}`)
	r = must(t, s, "controller.modify", `{"properties":{"Aux/cluster":"prod"}}`)
	assert.Contains(t, r.Warnings[0], "the controller already has these properties")
	refused(t, s, "controller.modify", `{"properties":{"DrbdOptions/Net/protocol":"C"}}`, cairn.CodeInvalidArgument, "drbd_options")
	must(t, s, "controller.modify", `{"unset_properties":["Aux/cluster"]}`)
	v, err = s.DB.Read()
	require.NoError(t, err)
	props, err := v.ControllerProperties()
	require.NoError(t, err)
	v.Close()
	assert.Nil(t, props)
}

// sp.delete and rg.delete remove what nothing uses, and say what still uses it.
func TestStoragePoolAndGroupDelete(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 10485760)
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rd := definition(t, s, "r1")
	var disk string
	for _, r := range rd.Replicas {
		if !r.Diskless {
			disk = r.Node
		}
	}
	refused(t, s, "sp.delete", fmt.Sprintf(`{"node":%q,"name":"thin"}`, disk), cairn.CodePreconditionFailed, "holds the disks of 1 resource(s) (r1)")
	refused(t, s, "rg.delete", `{"name":"rg2"}`, cairn.CodePreconditionFailed, "has resource definitions (r1)")
	refused(t, s, "sp.delete", `{"node":"n1","name":"nope"}`, cairn.CodeNotFound, "no storage pool nope")
	refused(t, s, "rg.delete", `{"name":"nope"}`, cairn.CodeNotFound, "does not exist")

	// n2's thick pool holds nothing: it goes, and a new one of the name can come.
	must(t, s, "sp.delete", `{"node":"n2","name":"thick"}`)
	v, err := s.DB.Read()
	require.NoError(t, err)
	pools, err := v.NodeStoragePools("n2")
	require.NoError(t, err)
	v.Close()
	require.Len(t, pools, 1)
	assert.Equal(t, "thin", pools[0].Name)
	must(t, s, "sp.create", `{"node":"n2","name":"thick","provider":"lvm","pool":"vg1","capacity_kib":4096}`)

	for _, r := range rd.Replicas {
		if r.Diskless {
			continue
		}
		must(t, s, "replica.remove", fmt.Sprintf(`{"resource":"r1","node":%q}`, r.Node))
	}
	must(t, s, "rd.delete", `{"name":"r1"}`)
	must(t, s, "sp.delete", fmt.Sprintf(`{"node":%q,"name":"thin"}`, disk))
	must(t, s, "rg.delete", `{"name":"rg2"}`)
	must(t, s, "rg.create", `{"name":"rg2","place_count":3}`)
}

// A pool created without its capacity is not autoplaced on until sp.modify gives one
// (or its agent reports one): the refusals say so; the operator may still place a disk
// there by name (with a warning); sp.modify never goes below what replicas take.
func TestStoragePoolCapacityGivenLater(t *testing.T) {
	s := servertest.Start(t)
	must(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 3; i++ {
		must(t, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
		must(t, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin"}`, i))
	}
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	refused(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`, cairn.CodePreconditionFailed, "has no capacity yet (its agent has not reported one; sp.modify can give one)")
	must(t, s, "rd.create", `{"name":"r1","resource_group":"rg2"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":8192}`)
	r := must(t, s, "replica.add", `{"resource":"r1","node":"n3"}`)
	assert.Contains(t, strings.Join(r.Warnings, " "), "storage pool thin on node n3 has no capacity yet")
	assert.Contains(t, strings.Join(r.Warnings, " "), "placed on it by your choice")

	r = must(t, s, "sp.modify", `{"node":"n1","name":"thin","capacity_kib":10485760}`)
	assert.Equal(t, "sp.modified", r.Events[0].Type)
	must(t, s, "replica.add", `{"resource":"r1"}`)
	assert.Equal(t, "n1:disk n2:tb n3:disk", layout(definition(t, s, "r1")), "autoplace took the pool with a capacity, never n2's unknown one")
	refused(t, s, "sp.modify", `{"node":"n1","name":"thin","capacity_kib":4096}`, cairn.CodePreconditionFailed, "replicas take 8192 KiB")
	r = must(t, s, "sp.modify", `{"node":"n1","name":"thin","capacity_kib":10485760}`)
	assert.Empty(t, r.Events)
	assert.Contains(t, r.Warnings[0], "nothing changed")
	refused(t, s, "sp.modify", `{"node":"n9","name":"thin","capacity_kib":10485760}`, cairn.CodeNotFound, "no storage pool")
}

// Capacity the back ends report: autoplace ranks on the reported free space, a thin
// pool promises its over-provisioning ratio times what it holds, a thick pool's disks
// come off its reported free, and reports within 1% are no news.
func TestReportedCapacity(t *testing.T) {
	s := servertest.Start(t)
	must(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 3; i++ {
		must(t, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
		must(t, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin"}`, i))
	}
	report := func(node string, total, free uint64) admission.Reply {
		return servertest.Submit(s, "sp.capacity-report", fmt.Sprintf(`{"node":%q,"name":"thin","total_kib":%d,"free_kib":%d,"at":"2026-12-02T12:00:00Z"}`, node, total, free))
	}
	// n1 and n3 report; n3 has the most free. n2 never reports.
	require.True(t, report("n1", 1<<20, 1<<19).OK)
	require.True(t, report("n3", 1<<20, 1<<20).OK)
	must(t, s, "rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg1","name":"r1","size_kib":4096}`)
	assert.Equal(t, "n3:disk", layout(definition(t, s, "r1")), "placed on the pool reporting the most free")

	// Thin: n1 may promise 20 x its free (512 MiB): 10 GiB; more is refused.
	refused(t, s, "rg.spawn", `{"resource_group":"rg1","name":"big","size_kib":25165824}`, cairn.CodePreconditionFailed, "")
	must(t, s, "sp.modify", `{"node":"n3","name":"thin","overprovision":1}`)
	must(t, s, "sp.modify", `{"node":"n1","name":"thin","overprovision":1}`)
	refused(t, s, "rg.spawn", `{"resource_group":"rg1","name":"r2","size_kib":1048576}`, cairn.CodePreconditionFailed, "")
	must(t, s, "rg.spawn", `{"resource_group":"rg1","name":"r2","size_kib":1040000}`)
	assert.Equal(t, "n3:disk", layout(definition(t, s, "r2")), "at ratio 1 only n3 holds it")
	refused(t, s, "sp.modify", `{"node":"n1","name":"thin","overprovision":0.5}`, cairn.CodeInvalidArgument, "overprovision")

	// Within 1% of the recorded report: no event; more: recorded.
	r := report("n1", 1<<20, 1<<19+5000)
	require.True(t, r.OK)
	assert.Empty(t, r.Events)
	assert.Contains(t, r.Warnings[0], "within 1%")
	r = report("n1", 1<<20, 1<<19+20000)
	require.True(t, r.OK)
	assert.Equal(t, []string{"sp.capacity-reported"}, eventTypes(r))
	refused(t, s, "sp.capacity-report", `{"node":"n1","name":"thin","total_kib":10,"free_kib":20,"at":"2026-12-02T12:00:00Z"}`, cairn.CodeInvalidArgument, "free_kib 20 is more than total_kib 10")
	refused(t, s, "sp.capacity-report", `{"node":"n1","name":"nope","total_kib":10,"free_kib":2,"at":"2026-12-02T12:00:00Z"}`, cairn.CodeNotFound, "no storage pool nope")

	// Thick: the reported free, less what disks took since the report.
	must(t, s, "sp.create", `{"node":"n2","name":"thick","provider":"lvm","pool":"vg0"}`)
	require.True(t, servertest.Submit(s, "sp.capacity-report", `{"node":"n2","name":"thick","total_kib":1048576,"free_kib":20480,"at":"2026-12-02T12:00:00Z"}`).OK)
	refused(t, s, "sp.modify", `{"node":"n2","name":"thick","overprovision":2}`, cairn.CodeInvalidArgument, "only thin pools")
	must(t, s, "rd.create", `{"name":"t1"}`)
	must(t, s, "vd.create", `{"resource":"t1","volume":0,"size_kib":16384}`)
	must(t, s, "replica.add", `{"resource":"t1","node":"n2","storage_pool":"thick"}`)
	must(t, s, "rd.create", `{"name":"t2"}`)
	must(t, s, "vd.create", `{"resource":"t2","volume":0,"size_kib":8192}`)
	refused(t, s, "replica.add", `{"resource":"t2","node":"n2","storage_pool":"thick"}`, cairn.CodePreconditionFailed, "has 4096 KiB free; t2 needs 8192 KiB")
}

// rg.modify patches a group's placement and DRBD options: the next autoplace uses the
// new placement, and every node holding a replica of one of the group's definitions gets
// desired state with the new options (the dispatcher publishes it again).
func TestGroupModify(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 4, 1<<30)
	must(t, s, "rg.create", `{"name":"rg","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg","name":"r1","size_kib":4096}`)
	must(t, s, "rd.create", `{"name":"loose"}`) // no group: not touched

	r := must(t, s, "rg.modify", `{"name":"rg","place_count":3,"drbd_options":{"protocol":"A","extra":{"DrbdOptions/Net/ping-timeout":"11"}},"properties":{"Aux/tier":"1"}}`)
	modifiedAt := r.Events[0].Seq
	var types []string
	for _, e := range r.Events {
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{"rg.modified", "rg.properties-changed"}, types)
	v, err := s.DB.Read()
	require.NoError(t, err)
	g, _, err := v.ResourceGroup("rg")
	require.NoError(t, err)
	v.Close()
	assert.Equal(t, 3, g.PlaceCount)
	assert.Equal(t, "A", *g.DRBDOptions.Protocol)
	assert.Equal(t, "thin", g.StoragePool, "what the patch does not name keeps its value")

	// The nodes of r1 get the group's new options.
	nc := servertest.Client(t, s)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	rd := definition(t, s, "r1")
	for _, rep := range rd.Replicas {
		require.Eventually(t, func() bool {
			d, ok := published(t, js, rep.Node, "r1")
			if !ok {
				return false
			}
			// Its revision is the group change's: newer desired state, and a status
			// carrying it tells the change was carried out.
			return d.Options.Protocol != nil && *d.Options.Protocol == "A" && d.Options.Extra["DrbdOptions/Net/ping-timeout"] == "11" &&
				d.Revision == modifiedAt
		}, 10*time.Second, 20*time.Millisecond, "%s never got the group's new options at revision %d", rep.Node, modifiedAt)
	}

	// The next autoplace follows the new place count.
	must(t, s, "replica.add", `{"resource":"r1"}`)
	disks := 0
	for _, rep := range definition(t, s, "r1").Replicas {
		if !rep.Diskless {
			disks++
		}
	}
	assert.Equal(t, 3, disks)

	r = must(t, s, "rg.modify", `{"name":"rg","place_count":3,"drbd_options":{"protocol":"A"}}`)
	assert.Empty(t, r.Events)
	assert.Contains(t, r.Warnings[0], "nothing changed")
	refused(t, s, "rg.modify", `{"name":"rg","drbd_options":{"protocol":"C"},"unset":["protocol"]}`, cairn.CodeInvalidArgument, "both set and unset")
	refused(t, s, "rg.modify", `{"name":"rg","unset":["bogus"]}`, cairn.CodeInvalidArgument, "bogus")
	must(t, s, "rg.modify", `{"name":"rg","unset":["protocol"],"storage_pool":""}`)
	v, err = s.DB.Read()
	require.NoError(t, err)
	g, _, err = v.ResourceGroup("rg")
	require.NoError(t, err)
	v.Close()
	assert.Nil(t, g.DRBDOptions.Protocol)
	assert.Empty(t, g.StoragePool)
}

// node.modify moves a node's replication address: every node holding a replica of a
// definition with one on it gets desired state naming the new address; an address
// another node has is refused.
func TestNodeModifyAddress(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rg.create", `{"name":"rg","place_count":2}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg","name":"r1","size_kib":4096}`)
	rd := definition(t, s, "r1")
	moved := rd.Replicas[0].Node
	refused(t, s, "node.modify", fmt.Sprintf(`{"name":%q,"address":"10.0.0.3"}`, moved), cairn.CodeAlreadyExists, "already has address 10.0.0.3")
	r := must(t, s, "node.modify", fmt.Sprintf(`{"name":%q,"address":"10.9.9.9"}`, moved))
	assert.Equal(t, "node.address-changed", r.Events[0].Type)
	movedAt := r.Events[0].Seq
	r = must(t, s, "node.modify", fmt.Sprintf(`{"name":%q,"address":"10.9.9.9"}`, moved))
	assert.Empty(t, r.Events)

	nc := servertest.Client(t, s)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	for _, rep := range rd.Replicas {
		require.Eventually(t, func() bool {
			d, ok := published(t, js, rep.Node, "r1")
			if !ok {
				return false
			}
			for _, peer := range d.Replicas {
				if peer.Node == moved {
					return peer.Address == "10.9.9.9" && d.Revision == movedAt
				}
			}
			return false
		}, 10*time.Second, 20*time.Millisecond, "%s never got %s's new address", rep.Node, moved)
	}
}

// controller.modify sets DRBD options for the whole deployment: every node of every
// definition gets them, and a narrower level (here the definition) still wins.
func TestControllerOptions(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rg.create", `{"name":"rg","place_count":2}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg","name":"r1","size_kib":4096}`)
	must(t, s, "rd.modify", `{"name":"r1","drbd_options":{"protocol":"C"}}`)
	r := must(t, s, "controller.modify", `{"drbd_options":{"protocol":"A","max_buffers":9000}}`)
	assert.Equal(t, "controller.options-changed", r.Events[0].Type)
	changedAt := r.Events[0].Seq
	r = must(t, s, "controller.modify", `{"drbd_options":{"max_buffers":9000}}`)
	assert.Empty(t, r.Events)
	refused(t, s, "controller.modify", `{"drbd_options":{"quorum":"all"},"unset":["quorum"]}`, cairn.CodeInvalidArgument, "both set and unset")

	nc := servertest.Client(t, s)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	for _, rep := range definition(t, s, "r1").Replicas {
		require.Eventually(t, func() bool {
			d, ok := published(t, js, rep.Node, "r1")
			if !ok {
				return false
			}
			return d.Options.MaxBuffers != nil && *d.Options.MaxBuffers == 9000 && *d.Options.Protocol == "C" && d.Revision == changedAt
		}, 10*time.Second, 20*time.Millisecond, "%s: the controller's max-buffers, the definition's protocol", rep.Node)
	}
	must(t, s, "controller.modify", `{"unset":["max_buffers","protocol"]}`)
	v, err := s.DB.Read()
	require.NoError(t, err)
	o, err := v.ControllerOptions()
	require.NoError(t, err)
	v.Close()
	assert.Equal(t, drbd.Options{}, o.Options)
}

// published is the desired state the dispatcher last published for rd on node (ok false
// before any).
func published(t *testing.T, js jetstream.JetStream, node, rd string) (drbd.Desired, bool) {
	t.Helper()
	st, err := js.Stream(context.Background(), "CAIRN_NODES")
	require.NoError(t, err)
	m, err := st.GetLastMsgForSubject(context.Background(), "cairn.node."+node+".drbd."+rd)
	if err != nil {
		return drbd.Desired{}, false
	}
	var d drbd.Desired
	require.NoError(t, json.Unmarshal(m.Data, &d))
	return d, true
}

// vd.delete removes a volume of a definition without replicas; a deployed definition's
// volumes stay (refused naming the nodes).
func TestDeleteVolume(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":1,"size_kib":8192}`)
	r := must(t, s, "vd.delete", `{"resource":"r1","volume":1}`)
	assert.Equal(t, "vd.deleted", r.Events[0].Type)
	vols := definition(t, s, "r1").Volumes
	require.Len(t, vols, 1)
	assert.Equal(t, 0, vols[0].Volume)
	refused(t, s, "vd.delete", `{"resource":"r1","volume":1}`, cairn.CodeNotFound, "no volume 1")
	must(t, s, "replica.add", `{"resource":"r1","node":"n1"}`)
	refused(t, s, "vd.delete", `{"resource":"r1","volume":0}`, cairn.CodePreconditionFailed, "volume 0 is the only volume of r1, which has replicas")
}

// vd.resize grows a deployed volume: the definition, every diskful replica's pool and
// the nodes' desired state follow; a shrink, a missing volume and a pool without room
// are refused and change nothing; the same size is a no-op.
func TestResizeVolume(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<20)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":102400}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n1"}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n2","storage_pool":"thin"}`)
	require.Equal(t, "n1:disk n2:disk n3:tb", layout(definition(t, s, "r1")))
	pool := func(node string) projections.StoragePool {
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		sp, ok, err := v.StoragePool(node, "thin")
		require.NoError(t, err)
		require.True(t, ok)
		return sp
	}
	require.EqualValues(t, 102400, pool("n1").AllocatedKiB)

	r := must(t, s, "vd.resize", `{"resource":"r1","volume":0,"size_kib":204800}`)
	require.Equal(t, []string{"vd.resized", "node.claimed", "node.claimed"}, eventTypes(r), "the growth claims room on each disk's node")
	assert.EqualValues(t, 204800, definition(t, s, "r1").Volumes[0].SizeKiB)
	assert.EqualValues(t, 204800, pool("n1").AllocatedKiB)
	assert.EqualValues(t, 204800, pool("n2").AllocatedKiB)
	assert.EqualValues(t, 0, pool("n3").AllocatedKiB, "a diskless replica takes no space")
	require.Eventually(t, func() bool {
		d, ok := published(t, s.JS, "n3", "r1")
		return ok && d.Volumes[0].SizeKiB == 204800
	}, 5*time.Second, 20*time.Millisecond, "desired state not dispatched with the new size")

	refused(t, s, "vd.resize", `{"resource":"r1","volume":0,"size_kib":102400}`, cairn.CodeInvalidArgument, "size_kib 102400 is smaller than volume 0 of r1 (204800 KiB): volumes only grow")
	refused(t, s, "vd.resize", `{"resource":"r1","volume":1,"size_kib":409600}`, cairn.CodeNotFound, "no volume 1")
	refused(t, s, "vd.resize", `{"resource":"r1","volume":0,"size_kib":2097152}`, cairn.CodePreconditionFailed,
		"storage pool thin on node n1 has 843776 KiB free, the replica of r1 needs 1892352 KiB more")
	r = must(t, s, "vd.resize", `{"resource":"r1","volume":0,"size_kib":204800}`)
	assert.Empty(t, r.Events)
	assert.Contains(t, strings.Join(r.Warnings, " "), "already has 204800 KiB")
	assert.EqualValues(t, 204800, pool("n1").AllocatedKiB)

	// Removing a grown replica gives back what it took at its new size.
	must(t, s, "replica.remove", `{"resource":"r1","node":"n2"}`)
	assert.EqualValues(t, 0, pool("n2").AllocatedKiB)
}

// Snapshot phases through their verbs (what the lease holder sends from the agents'
// reports), refusals, and a restore: the target's disks start from the snapshot with
// one shared current UUID, and a disk added to it later gets a full sync.
func TestSnapshotVerbs(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 4, 1<<30)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n1","storage_pool":"thin"}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n3","storage_pool":"thin"}`)
	r := must(t, s, "rd.snapshot", `{"resource":"r1","name":"s1"}`)
	require.Equal(t, []string{"rd.snapshot-started"}, eventTypes(r))
	r1 := definition(t, s, "r1")
	snap, _ := r1.Snapshot("s1")
	assert.Equal(t, []string{"n1", "n3"}, snap.Nodes)
	assert.Equal(t, []string{"n2"}, snap.Diskless, "the tiebreaker suspends with the disks")
	assert.Equal(t, projections.SnapshotSuspending, snap.Phase)
	require.Eventually(t, func() bool {
		d, ok := published(t, s.JS, "n2", "r1")
		return ok && reflect.DeepEqual([]drbd.SnapshotOrder{{Name: "s1", Seq: snap.StartedSeq, Phase: drbd.SnapSuspend}}, d.Snapshots)
	}, 5*time.Second, 20*time.Millisecond, "the diskless n2 was never told to suspend")
	refused(t, s, "rd.snapshot", `{"resource":"r1","name":"s2"}`, cairn.CodePreconditionFailed, "snapshot s1 of r1 is under way")
	refused(t, s, "rd.restore", `{"resource":"r1","snapshot":"s1","target":"r2"}`, cairn.CodePreconditionFailed, "only a taken snapshot is restored")
	refused(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`, cairn.CodePreconditionFailed, "suspending; taken does not follow")
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"take"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`)
	require.Eventually(t, func() bool {
		d, ok := published(t, s.JS, "n1", "r1")
		return ok && reflect.DeepEqual([]drbd.SnapshotOrder{{Name: "s1", Seq: snap.StartedSeq, Phase: drbd.SnapKeep}}, d.Snapshots)
	}, 5*time.Second, 20*time.Millisecond, "n1's desired state never said keep")

	r = must(t, s, "rd.restore", `{"resource":"r1","snapshot":"s1","target":"r2"}`)
	r2 := definition(t, s, "r2")
	require.NotNil(t, r2.RestoredFrom)
	assert.Equal(t, "n1:disk n2:tb n3:disk", layout(r2))
	var seeds []string
	for _, rep := range r2.Replicas {
		if !rep.Diskless {
			require.NotNil(t, rep.RestoreFrom)
			assert.False(t, rep.FullSync)
			require.Len(t, rep.Seeds, 1)
			seeds = append(seeds, strings.Split(rep.Seeds[0].GI, ":")[0])
		}
	}
	assert.Equal(t, seeds[0], seeds[1], "the restored disks share one current UUID")
	assert.NotEqual(t, r2.Volumes[0].Day0GI, seeds[0])
	must(t, s, "replica.add", `{"resource":"r2","node":"n4","storage_pool":"thin"}`)
	r2 = definition(t, s, "r2")
	rep, _ := r2.Replica("n4")
	assert.True(t, rep.FullSync, "a disk added to a restored definition is fully synced")
	assert.Nil(t, rep.RestoreFrom)

	refused(t, s, "rd.delete", `{"name":"r1"}`, cairn.CodePreconditionFailed, "has snapshots (s1)")

	// Roll back: only deactivated, only to the latest snapshot, only disks that hold it.
	refused(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`, cairn.CodePreconditionFailed, "is active on n1, n2, n3")
	must(t, s, "resource.deactivate", `{"resource":"r1"}`)
	r = must(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`)
	require.Equal(t, []string{"rd.rolled-back"}, eventTypes(r))
	require.Eventually(t, func() bool {
		d, ok := published(t, s.JS, "n3", "r1")
		return ok && d.Local.Rollback != nil && d.Local.Rollback.Snapshot == "s1" && len(d.Local.Rollback.Seeds) == 1
	}, 5*time.Second, 20*time.Millisecond, "n3's desired state never carried the rollback")
	must(t, s, "replica.add", `{"resource":"r1","node":"n4","storage_pool":"thin"}`)
	r1 = definition(t, s, "r1")
	rep, _ = r1.Replica("n4")
	assert.True(t, rep.FullSync, "a disk added after a rollback is fully synced")
	must(t, s, "resource.deactivate", `{"resource":"r1","node":"n4"}`)
	refused(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`, cairn.CodePreconditionFailed, "disks of r1 on n4 were added after snapshot s1")
	must(t, s, "rd.snapshot-delete", `{"resource":"r1","name":"s1"}`)
	refused(t, s, "rd.snapshot-delete", `{"resource":"r1","name":"s1"}`, cairn.CodeNotFound, "has no snapshot s1")
	must(t, s, "sp.create", `{"node":"n2","name":"file","provider":"file","pool":"/f"}`)
	must(t, s, "rd.create", `{"name":"r3"}`)
	must(t, s, "vd.create", `{"resource":"r3","volume":0,"size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r3","node":"n2","storage_pool":"file"}`)
	refused(t, s, "rd.snapshot", `{"resource":"r3","name":"s1"}`, cairn.CodePreconditionFailed, "providers without snapshots: n2 (file)")
}

// A snapshot follows the definition: a disk toggled to diskless leaves its nodes (its
// copies go with the disk), a deleted volume leaves its volumes, and a rollback is
// refused while the definition has a volume the snapshot holds no copy of.
func TestSnapshotFollowsDisksAndVolumes(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 4, 1<<30)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":8192}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":1,"size_kib":8192}`)
	for _, n := range []string{"n1", "n3", "n4"} {
		must(t, s, "replica.add", `{"resource":"r1","node":"`+n+`","storage_pool":"thin"}`)
	}
	must(t, s, "rd.snapshot", `{"resource":"r1","name":"s1"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"take"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`)
	must(t, s, "replica.toggle-disk", `{"resource":"r1","node":"n4","diskless":true}`)
	must(t, s, "resource.deactivate", `{"resource":"r1"}`)
	must(t, s, "vd.delete", `{"resource":"r1","volume":1}`)
	r1 := definition(t, s, "r1")
	snap, _ := r1.Snapshot("s1")
	assert.Equal(t, []string{"n1", "n3"}, snap.Nodes, "n4's copies went with its disk")
	require.Len(t, snap.Volumes, 1)
	assert.Equal(t, 0, snap.Volumes[0].Volume, "volume 1's copies went with it")
	must(t, s, "vd.create", `{"resource":"r1","volume":2,"size_kib":8192}`)
	refused(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`, cairn.CodePreconditionFailed, "volume(s) 2 of r1 were added after snapshot s1")
	must(t, s, "vd.delete", `{"resource":"r1","volume":2}`)
	must(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`)
}

// rd.clone claims its target: an rd.create of the name is refused until the clone's
// restore creates it (on the old code the create won and the clone's restore never
// happened), the clone's own restore creates it, and once done the clone is recorded so
// that nothing restores it again after the target is deleted. A clone whose snapshot
// fails releases the name.
func TestCloneClaimsItsTarget(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n1","storage_pool":"thin"}`)
	r := must(t, s, "rd.clone", `{"resource":"r1","target":"t1"}`)
	assert.Contains(t, eventTypes(r), "rd.target-claimed")
	refused(t, s, "rd.create", `{"name":"t1"}`, cairn.CodeAlreadyExists, "is the target of a clone of r1 under way")
	refused(t, s, "rd.clone", `{"resource":"r1","target":"t1"}`, cairn.CodeAlreadyExists, "")
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"clone-t1","phase":"take"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"clone-t1","phase":"taken"}`)
	r1 := definition(t, s, "r1")
	require.Len(t, resources.ClonesDue(r1, func(string) bool { return false }), 1, "a taken clone not yet restored is due")
	must(t, s, "rd.restore", `{"resource":"r1","snapshot":"clone-t1","target":"t1"}`)
	must(t, s, "rd.delete", `{"name":"t1"}`)
	r1 = definition(t, s, "r1")
	assert.Empty(t, resources.ClonesDue(r1, func(string) bool { return false }), "a clone restored once is due again after its target was deleted")
	must(t, s, "rd.create", `{"name":"t1"}`)

	must(t, s, "rd.snapshot-delete", `{"resource":"r1","name":"clone-t1"}`)
	must(t, s, "rd.clone", `{"resource":"r1","target":"t2"}`)
	refused(t, s, "rd.create", `{"name":"t2"}`, cairn.CodeAlreadyExists, "target of a clone")
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"clone-t2","phase":"failed","reason":"test"}`)
	must(t, s, "rd.create", `{"name":"t2"}`)

	// A target of LINSTOR's 48 characters (a CSI volume name) is taken.
	long := "pvc-0123456789abcdef0123456789abcdef-0000000001"
	must(t, s, "rd.clone", `{"resource":"r1","target":"`+long+`"}`)
	r1 = definition(t, s, "r1")
	_, ok := r1.Snapshot(resources.CloneSnapshot(long))
	assert.True(t, ok, "no snapshot %s", resources.CloneSnapshot(long))
}

// A refusal because a node is offline is confirmed on that node's subject too (the read
// set of the refusal names it), not only on the definition's: decided on views where the
// node's return has not arrived yet, the confirmation sees the node moved and decides
// again instead of refusing on stale state.
func TestOfflineRefusalsReadTheNode(t *testing.T) {
	s := takenSnapshotOfflineNode(t)
	names := events.NewNames("")
	for _, c := range []struct{ verb, body string }{
		{"rd.snapshot", `{"resource":"r1","name":"s2"}`},
		{"rd.clone", `{"resource":"r1","target":"t1"}`},
		{"rd.restore", `{"resource":"r1","snapshot":"s1","target":"t2"}`},
	} {
		v, err := s.DB.Read()
		require.NoError(t, err)
		d, err := handler(t, c.verb).Decide(v, names, []byte(c.body))
		v.Close()
		require.ErrorContains(t, err, "offline", c.verb)
		var read []string
		for _, ch := range d.Expect.Checks {
			read = append(read, ch.Subject)
		}
		assert.Contains(t, read, names.Event("node", "n1"), "%s refused for an offline node without reading it", c.verb)
	}
}

// A policy's command (ForgetRefusals) refused for a transient reason is decided anew
// when sent again with the same deterministic id: the clone sweep's rd.restore refused
// while a node was offline restores once it is back (on the old code the cached refusal
// came back for the reply TTL, 15 minutes). A client's refusal is still remembered.
func TestPolicyRefusalsAreNotRemembered(t *testing.T) {
	s := takenSnapshotOfflineNode(t)
	send := func(forget bool, id string) admission.Reply {
		return s.Admission.Submit(context.Background(), admission.Request{Verb: "rd.restore", Actor: "serve:snapshots", CommandID: id,
			Body: []byte(`{"resource":"r1","snapshot":"s1","target":"t1"}`), ForgetRefusals: forget})
	}
	require.False(t, send(true, "policy-1").OK)
	require.False(t, send(false, "client-1").OK)
	must(t, s, "node.set-state", `{"name":"n1","state":"online"}`)
	assert.True(t, send(true, "policy-1").OK, "the policy's transient refusal came back from the cache")
	assert.False(t, send(false, "client-1").OK, "a client's refusal is remembered under its id")
}

// A tiebreaker asked for as a diskless replica (LINSTOR's make-available on its node)
// becomes one the operator wants, and stays when the tie is gone; replica.remove of a
// needed tiebreaker keeps it unless keep_tiebreaker is false (LINSTOR's
// keep_tiebreaker=false). On the old code the first was refused already_exists and the
// second always kept it.
func TestTiebreakerMadeAvailableAndRemoved(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n1","storage_pool":"thin"}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n3","storage_pool":"thin"}`)
	require.Equal(t, "n1:disk n2:tb n3:disk", layout(definition(t, s, "r1")))
	r := must(t, s, "replica.add", `{"resource":"r1","node":"n2","diskless":true}`)
	assert.Contains(t, eventTypes(r), "replica.tiebreaker-changed")
	assert.Equal(t, "n1:disk n2:diskless n3:disk", layout(definition(t, s, "r1")))

	must(t, s, "rd.create", `{"name":"r2"}`)
	must(t, s, "vd.create", `{"resource":"r2","volume":0,"size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r2","node":"n1","storage_pool":"thin"}`)
	must(t, s, "replica.add", `{"resource":"r2","node":"n3","storage_pool":"thin"}`)
	must(t, s, "replica.remove", `{"resource":"r2","node":"n2"}`)
	assert.Equal(t, "n1:disk n2:tb n3:disk", layout(definition(t, s, "r2")), "a needed tiebreaker is kept by default")
	must(t, s, "replica.remove", `{"resource":"r2","node":"n2","keep_tiebreaker":false}`)
	assert.Equal(t, "n1:disk n3:disk", layout(definition(t, s, "r2")))
}

// LINSTOR's own DrbdOptions/ settings (ExactSize from linstor-proxmox's spawn) are kept as
// free-form properties; a DRBD option among the free-form properties is still refused.
func TestLINSTORLevelOptionsAreProperties(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"r1","properties":{"DrbdOptions/ExactSize":"yes","Aux/x":"1"}}`)
	assert.Equal(t, map[string]string{"DrbdOptions/ExactSize": "yes", "Aux/x": "1"}, definition(t, s, "r1").Properties)
	refused(t, s, "rd.create", `{"name":"r2","properties":{"DrbdOptions/Net/protocol":"C"}}`, cairn.CodeInvalidArgument, "is a DRBD option")
}

// takenSnapshotOfflineNode starts a serve with three nodes and r1 (one disk, on n1) with a
// taken snapshot s1, and n1 offline.
func takenSnapshotOfflineNode(t *testing.T) *server.Server {
	t.Helper()
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rd.create", `{"name":"r1"}`)
	must(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r1","node":"n1","storage_pool":"thin"}`)
	must(t, s, "rd.snapshot", `{"resource":"r1","name":"s1"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"take"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`)
	must(t, s, "node.set-state", `{"name":"n1","state":"offline"}`)
	return s
}

// handler is verb's handler as commands.New registers it.
func handler(t *testing.T, verb string) decide.Handler {
	for _, h := range commands.Handlers(commands.Options{}, nil) {
		if h.Verb == verb {
			return h
		}
	}
	t.Fatalf("no handler for %s", verb)
	return decide.Handler{}
}
