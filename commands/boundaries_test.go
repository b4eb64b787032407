package commands_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/projections"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Consistency boundaries (docs/commands.md): every command is conditional on exactly
// the subjects it read. These tests run commands concurrently on two serves of one
// stream, so that nothing but the conditional appends keeps them apart (a serve steers
// its own concurrent commands to different ports and nodes; two serves do not share
// that), and check the invariants on the views afterwards.

// twoServes starts a serve with its embedded NATS server and a second serve on the
// same stream, with views of its own.
func twoServes(t *testing.T) (a, b *server.Server) {
	t.Helper()
	a = servertest.Start(t)
	b = servertest.Start(t, func(c *server.Config) { c.NATSURL, c.NATSListen = a.NATSAddr, "" })
	return a, b
}

// conflicts is the number of appends refused so far because their boundary moved.
func conflicts(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "cairn_command_append_conflicts_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// concurrently runs every command at once, each on serve a or b at random, and
// returns the replies in order.
func concurrently(t *testing.T, serves []*server.Server, cmds [][2]string) []admission.Reply {
	t.Helper()
	replies := make([]admission.Reply, len(cmds))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range cmds {
		s := serves[rand.IntN(len(serves))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = servertest.SubmitAnswered(t, s, c[0], c[1])
		}()
	}
	close(start)
	wg.Wait()
	return replies
}

// refusedOnlyFor asserts that every refusal among replies (to cmds) has one of codes:
// a refusal about state, never a conflict that retries could not get past.
func refusedOnlyFor(t *testing.T, cmds [][2]string, replies []admission.Reply, codes ...string) {
	t.Helper()
	for i, r := range replies {
		if !r.OK {
			assert.Contains(t, codes, r.Error.Code, "%s %s: %+v", cmds[i][0], cmds[i][1], r.Error)
		}
	}
}

// caughtUp reads s's views once they hold the whole stream.
func caughtUp(t *testing.T, s *server.Server) *projections.View {
	t.Helper()
	last := servertest.LastSeq(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Projector.WaitFor(ctx, last))
	v, err := s.DB.Read()
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// Commands on different definitions and nodes never conflict: 32 rd.create and 32
// replica.add on distinct definitions, while node.add runs on other nodes. Before
// narrow boundaries every one of them was conditional on the whole stream, and n-1 of
// n concurrent commands lost their first attempt.
func TestCommandsOnDifferentResourcesDoNotConflict(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 8, 1<<30)
	for i := range 32 {
		must(t, s, "rd.create", fmt.Sprintf(`{"name":"placed%d"}`, i))
		must(t, s, "vd.create", fmt.Sprintf(`{"resource":"placed%d","volume":0,"size_kib":4096}`, i))
	}
	var cmds [][2]string
	for i := range 32 {
		cmds = append(cmds,
			[2]string{"rd.create", fmt.Sprintf(`{"name":"fresh%d"}`, i)},
			[2]string{"replica.add", fmt.Sprintf(`{"resource":"placed%d","node":"n%d"}`, i, i%8+1)},
			[2]string{"node.add", fmt.Sprintf(`{"name":"x%d","host":"hx%d","address":"10.1.0.%d","failure_domain":"RACK%d"}`, i, i, i, i%3+1)})
	}
	before := conflicts(t)
	for i, r := range concurrently(t, []*server.Server{s}, cmds) {
		require.True(t, r.OK, "%s %s: %+v", cmds[i][0], cmds[i][1], r.Error)
	}
	// replica.add on one node takes turns (a node's minors and pool room are one
	// thing); a serve orders its own commands on one node without a conflict.
	assert.Zero(t, conflicts(t)-before, "conflicting appends among commands on different resources")
}

// Unique ports, node ids per definition, minors per node, the place count and pool
// capacity hold under concurrent rg.spawn, replica.add and replica.remove from two
// serves, with pools small enough that some placements must be refused.
func TestConcurrentPlacementsKeepAllocationInvariants(t *testing.T) {
	a, b := twoServes(t)
	const capacity = 64 << 10 // room for 16 disks of 4 MiB per node
	drbdCluster(t, a, 6, capacity)
	must(t, a, "rg.create", `{"name":"g","place_count":2,"storage_pool":"thin"}`)
	for round := range 3 {
		var cmds [][2]string
		for i := range 24 {
			cmds = append(cmds, [2]string{"rg.spawn", fmt.Sprintf(`{"resource_group":"g","name":"s%d-%d","size_kib":4096}`, round, i)})
		}
		for i := range 8 {
			cmds = append(cmds, [2]string{"replica.add", fmt.Sprintf(`{"resource":"s%d-%d","node":"n%d"}`, max(round-1, 0), i, i%6+1)})
			cmds = append(cmds, [2]string{"replica.remove", fmt.Sprintf(`{"resource":"s%d-%d","node":"n%d"}`, max(round-1, 0), i+8, (i+3)%6+1)})
		}
		// Out of room, a replica already there or not there: refusals about state.
		refusedOnlyFor(t, cmds, concurrently(t, []*server.Server{a, b}, cmds),
			cairn.CodePreconditionFailed, cairn.CodeAlreadyExists, cairn.CodeNotFound)
	}

	v := caughtUp(t, a)
	rds, err := v.ResourceDefinitions()
	require.NoError(t, err)
	ports := map[int]string{}
	minors := map[string]string{} // node/minor -> definition
	used := map[string]uint64{}   // node -> KiB on its thin pool
	for _, rd := range rds {
		other, dup := ports[rd.Port]
		require.False(t, dup, "port %d of %s and %s", rd.Port, rd.Name, other)
		ports[rd.Port] = rd.Name
		ids := map[int]bool{}
		diskful := 0
		for _, r := range rd.Replicas {
			require.False(t, ids[r.NodeID], "node id %d twice in %s", r.NodeID, rd.Name)
			ids[r.NodeID] = true
			for _, m := range r.Minors {
				key := fmt.Sprintf("%s/%d", r.Node, m.Minor)
				other, dup := minors[key]
				require.False(t, dup, "minor %s of %s and %s", key, rd.Name, other)
				minors[key] = rd.Name
			}
			if !r.Diskless {
				diskful++
				used[r.Node] += rd.SizeKiB()
			}
		}
		assert.GreaterOrEqual(t, diskful, 1, "%s lost its disks: %s", rd.Name, layout(rd))
	}
	for node, kib := range used {
		assert.LessOrEqual(t, kib, uint64(capacity), "pool thin on %s overcommitted", node)
		sp, ok, err := v.StoragePool(node, "thin")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, capacity-kib, sp.FreeKiB(), "the view's free space on %s matches its replicas", node)
	}
	assert.NotEmpty(t, rds)
}

// rg.delete never leaves a definition in a deleted group, however it races rd.create.
func TestGroupDeleteRacesDefinitionCreate(t *testing.T) {
	a, b := twoServes(t)
	drbdCluster(t, a, 3, 1<<30)
	for round := range 30 {
		g := fmt.Sprintf("g%d", round)
		must(t, a, "rg.create", fmt.Sprintf(`{"name":%q,"place_count":2}`, g))
		var cmds [][2]string
		for i := range 6 {
			cmds = append(cmds, [2]string{"rd.create", fmt.Sprintf(`{"name":"%s-r%d","resource_group":%q}`, g, i, g)})
			if i == 2 {
				cmds = append(cmds, [2]string{"rg.delete", fmt.Sprintf(`{"name":%q}`, g)})
			}
		}
		// Half the rounds on one serve: there the commands are appended in groups
		// (group commit), and an rg.delete must never share an append with an rd.create
		// joining its group (its check on every definition would miss it).
		serves := []*server.Server{a, b}
		if round%2 == 0 {
			serves = serves[:1]
		}
		refusedOnlyFor(t, cmds, concurrently(t, serves, cmds), cairn.CodePreconditionFailed, cairn.CodeNotFound)
	}
	v := caughtUp(t, a)
	rds, err := v.ResourceDefinitions()
	require.NoError(t, err)
	for _, rd := range rds {
		_, ok, err := v.ResourceGroup(rd.ResourceGroup)
		require.NoError(t, err)
		assert.True(t, ok, "%s is in group %s, which was deleted", rd.Name, rd.ResourceGroup)
	}
}

// node.remove and sp.delete never leave a replica on a node or pool that is gone,
// however they race placements on it; lvol.create neither.
func TestRemovalsRacePlacements(t *testing.T) {
	a, b := twoServes(t)
	drbdCluster(t, a, 3, 1<<30)
	for i := range 8 {
		must(t, a, "rd.create", fmt.Sprintf(`{"name":"r%d"}`, i))
		must(t, a, "vd.create", fmt.Sprintf(`{"resource":"r%d","volume":0,"size_kib":4096}`, i))
		must(t, a, "replica.add", fmt.Sprintf(`{"resource":"r%d","node":"n1"}`, i))
	}
	for round := range 8 {
		node := fmt.Sprintf("y%d", round)
		must(t, a, "node.add", fmt.Sprintf(`{"name":%q,"host":"hy%d","address":"10.2.0.%d","failure_domain":"RACK1"}`, node, round, round))
		must(t, a, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":1048576}`, node))
		cmds := [][2]string{
			{"replica.add", fmt.Sprintf(`{"resource":"r%d","node":%q}`, round, node)},
			{"lvol.create", fmt.Sprintf(`{"name":"lv%d","node":%q,"size_kib":4096}`, round, node)},
		}
		if round%2 == 0 {
			cmds = append(cmds, [2]string{"node.remove", fmt.Sprintf(`{"name":%q}`, node)})
		} else {
			cmds = append(cmds, [2]string{"sp.delete", fmt.Sprintf(`{"node":%q,"name":"thin"}`, node)})
		}
		refusedOnlyFor(t, cmds, concurrently(t, []*server.Server{a, b}, cmds), cairn.CodePreconditionFailed, cairn.CodeNotFound)
	}
	v := caughtUp(t, a)
	rds, err := v.ResourceDefinitions()
	require.NoError(t, err)
	for _, rd := range rds {
		for _, r := range rd.Replicas {
			_, ok, err := v.Node(r.Node)
			require.NoError(t, err)
			require.True(t, ok, "replica of %s on removed node %s", rd.Name, r.Node)
			if !r.Diskless {
				_, ok, err := v.StoragePool(r.Node, r.StoragePool)
				require.NoError(t, err)
				assert.True(t, ok, "replica of %s on deleted pool %s of %s", rd.Name, r.StoragePool, r.Node)
			}
		}
	}
	for round := range 8 {
		l, ok, err := v.Lvol(fmt.Sprintf("lv%d", round))
		require.NoError(t, err)
		if ok {
			_, there, err := v.Node(l.Node)
			require.NoError(t, err)
			assert.True(t, there, "logical volume %s on removed node %s", l.Name, l.Node)
		}
	}
}

// A host keeps one failure domain, however node.add of two nodes on it race.
func TestHostKeepsOneDomainUnderConcurrentAdds(t *testing.T) {
	a, b := twoServes(t)
	must(t, a, "cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for round := range 10 {
		cmds := [][2]string{
			{"node.add", fmt.Sprintf(`{"name":"p%d","host":"shared%d","address":"10.3.0.%d","failure_domain":"RACK1"}`, round, round, round)},
			{"node.add", fmt.Sprintf(`{"name":"q%d","host":"shared%d","address":"10.4.0.%d","failure_domain":"RACK2"}`, round, round, round)},
		}
		ok := 0
		for _, r := range concurrently(t, []*server.Server{a, b}, cmds) {
			if r.OK {
				ok++
			} else {
				assert.Equal(t, cairn.CodePreconditionFailed, r.Error.Code, r.Error.Message)
			}
		}
		assert.Equal(t, 1, ok, "round %d: exactly one of two domains for host shared%d", round, round)
	}
	v := caughtUp(t, a)
	nodes, err := v.Nodes()
	require.NoError(t, err)
	domainOf := map[string]string{}
	for _, n := range nodes {
		if d, ok := domainOf[n.Spec.Host]; ok {
			assert.Equal(t, d, n.Spec.FailureDomain, "host %s in two domains", n.Spec.Host)
		}
		domainOf[n.Spec.Host] = n.Spec.FailureDomain
	}
}
