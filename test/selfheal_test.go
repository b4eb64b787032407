package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/commands/gateway"
	"github.com/cairn-io/cairn/test/testtools"
)

// simCluster is a serve with sim agents (cairn agent --kernel sim: real drbdadm and
// drbdmeta on file_thin disks) on nodes n1..nN, each with a thin storage pool.
type simCluster struct {
	t      *testing.T
	s      *serve
	base   string
	agents map[string]*exec.Cmd
	// token, when set, goes with the helpers' HTTP requests (a serve with --http-auth).
	token string
	// agentFlags are added to every agent's flags.
	agentFlags []string
}

func startSimCluster(t *testing.T, nodes int, serveFlags ...string) *simCluster {
	return startSimClusterWith(t, nodes, nil, serveFlags...)
}

// startSimClusterWith is startSimCluster with more agent flags.
func startSimClusterWith(t *testing.T, nodes int, agentFlags []string, serveFlags ...string) *simCluster {
	testtools.Need(t, "drbdadm", "drbdmeta")
	c := &simCluster{t: t, s: startServe(t, t.TempDir(), serveFlags...), base: t.TempDir(), agents: map[string]*exec.Cmd{}, agentFlags: agentFlags}
	c.cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= nodes; i++ {
		n := fmt.Sprintf("n%d", i)
		c.cmd("node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, n, i, i))
		c.cmd("sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`, n))
		c.startAgent(n)
	}
	return c
}

func (c *simCluster) root(node string) string { return filepath.Join(c.base, node) }

// startAgent starts node's sim agent (again, after kill).
func (c *simCluster) startAgent(node string) {
	require.NoError(c.t, os.MkdirAll(filepath.Join(c.root(node), "var/lib/cairn/thin"), 0o755))
	c.agents[node] = startAgent(c.t, c.s, agentOpts{node: node, root: c.root(node), kernel: "sim", extra: append([]string{"--heartbeat-interval", "300ms"}, c.agentFlags...)})
}

// kill ends node's agent with SIGKILL: in the sim, its host is gone.
func (c *simCluster) kill(node string) {
	a := c.agents[node]
	require.NoError(c.t, a.Process.Kill())
	_, _ = a.Process.Wait()
}

func (c *simCluster) cmd(verb, body string) string {
	c.t.Helper()
	out, code := run(c.t, "cmd", verb, body, "--nats", c.s.natsURL())
	require.Equal(c.t, 0, code, "%s %s: %s", verb, body, out)
	return out
}

func (c *simCluster) resource(name string) gateway.ResourceView {
	c.t.Helper()
	status, body := httpJSON(c.t, "GET", c.s.url("/cairn/v1/resources/"+name), "", c.auth()...)
	require.Equal(c.t, 200, status, body)
	return decode[gateway.ResourceView](c.t, body)
}

// auth is the header of c.token, if any.
func (c *simCluster) auth() []string {
	if c.token == "" {
		return nil
	}
	return []string{"Authorization", "Bearer " + c.token}
}

// upToDate lists the nodes whose own latest report has every volume of rd UpToDate on
// a disk of the replica's current incarnation.
func upToDate(rv gateway.ResourceView) []string {
	var out []string
	for _, r := range rv.Replicas {
		st := r.Observed
		if r.Diskless || st == nil || st.Incarnation != r.Incarnation || len(st.Volumes) < len(rv.Volumes) {
			continue
		}
		ok := true
		for _, v := range st.Volumes {
			ok = ok && v.DiskState == "UpToDate"
		}
		if ok {
			out = append(out, r.Node)
		}
	}
	return out
}

func diskfulNodes(rv gateway.ResourceView) []string {
	var out []string
	for _, r := range rv.Replicas {
		if !r.Diskless {
			out = append(out, r.Node)
		}
	}
	return out
}

// sameData compares the data area (size_kib, the internal metadata after it left out)
// of rd's volume 0 disk files on nodes, byte for byte: the oracle reads the files, not
// GIs or the sim's bookkeeping.
func (c *simCluster) sameData(rd string, sizeKiB uint64, nodes []string) {
	c.t.Helper()
	require.GreaterOrEqual(c.t, len(nodes), 2)
	var first []byte
	for i, n := range nodes {
		f, err := os.Open(filepath.Join(c.root(n), "var/lib/cairn/thin", rd+"_00000.img"))
		require.NoError(c.t, err)
		buf := make([]byte, sizeKiB*1024)
		_, err = f.ReadAt(buf, 0)
		f.Close()
		require.NoError(c.t, err)
		if i == 0 {
			first = buf
			require.NotEqual(c.t, make([]byte, len(buf)), buf, "%s on %s holds the data written", rd, n)
			continue
		}
		if !bytes.Equal(first, buf) {
			at := 0
			for at < len(buf) && first[at] == buf[at] {
				at++
			}
			c.t.Fatalf("%s: the data on %s and %s differ at byte %d", rd, nodes[0], n, at)
		}
	}
}

// write writes blocks to rd from node's root.
func (c *simCluster) write(rd, node string, blocks int) error {
	out, code := run(c.t, "sim", "write", "--root", c.root(node), rd, fmt.Sprint(blocks))
	if code != 0 {
		return fmt.Errorf("sim write %s on %s: %s", rd, node, out)
	}
	return nil
}

func (c *simCluster) waitUpToDate(rd string, n int, timeout time.Duration) gateway.ResourceView {
	c.t.Helper()
	var rv gateway.ResourceView
	require.Eventually(c.t, func() bool {
		rv = c.resource(rd)
		return len(upToDate(rv)) == n && len(diskfulNodes(rv)) == n
	}, timeout, 200*time.Millisecond, "%s: %d UpToDate disks wanted: %+v", rd, n, rv)
	return rv
}

// Evacuating a node while an application writes: every replica moves off it, the
// definitions never have fewer UpToDate disks than before (sampled the whole time),
// the data is byte-identical on the disks afterwards, the node is then removed, and the
// node shows as cordoned to autoplace meanwhile.
func TestEvacuateANodeWhileWritesGoOn(t *testing.T) {
	c := startSimCluster(t, 4)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	for _, rd := range []string{"r1", "r2", "r3"} {
		c.cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":%q,"size_kib":4096}`, rd))
	}
	// Make n1 hold a disk of each: move the replicas placed elsewhere there first.
	for _, rd := range []string{"r1", "r2", "r3"} {
		rv := c.waitUpToDate(rd, 2, 60*time.Second)
		switch {
		case contains(diskfulNodes(rv), "n1"):
		case len(rv.Replicas) > 2: // n1 holds its tiebreaker
			c.cmd("replica.toggle-disk", fmt.Sprintf(`{"resource":%q,"node":"n1","diskless":false,"storage_pool":"thin"}`, rd))
			c.waitUpToDate(rd, 3, 60*time.Second)
		default:
			c.cmd("replica.add", fmt.Sprintf(`{"resource":%q,"node":"n1"}`, rd))
			c.waitUpToDate(rd, 3, 60*time.Second)
		}
	}
	before := map[string]int{}
	for _, rd := range []string{"r1", "r2", "r3"} {
		before[rd] = len(upToDate(c.resource(rd)))
		writer := otherThan(diskfulNodes(c.resource(rd)), "n1")
		require.NoError(t, c.write(rd, writer, 64))
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var below []string
	written := 0
	wg.Add(2)
	go func() { // the application: keeps writing to r1 from a node that stays
		defer wg.Done()
		writer := otherThan(diskfulNodes(c.resource("r1")), "n1")
		for ctx.Err() == nil {
			if err := c.write("r1", writer, 8); err == nil {
				mu.Lock()
				written++
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	go func() { // the sampler: UpToDate disks per definition, never below the start
		defer wg.Done()
		for ctx.Err() == nil {
			for _, rd := range []string{"r1", "r2", "r3"} {
				if n := len(upToDate(c.resource(rd))); n < before[rd] {
					mu.Lock()
					below = append(below, fmt.Sprintf("%s: %d UpToDate < %d", rd, n, before[rd]))
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	out := c.cmd("node.evacuate", `{"name":"n1"}`)
	require.Contains(t, out, "node.maintenance-changed")
	// Cordoned: autoplace says why it passes n1 over.
	c.cmd("rg.create", `{"name":"rg4","place_count":4,"storage_pool":"thin"}`)
	out, code := run(t, "cmd", "rg.spawn", `{"resource_group":"rg4","name":"big","size_kib":4096}`, "--nats", c.s.natsURL())
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "n1: cordoned: evacuating")

	require.Eventually(t, func() bool {
		for _, rd := range []string{"r1", "r2", "r3"} {
			rv := c.resource(rd)
			for _, r := range rv.Replicas {
				if r.Node == "n1" {
					return false
				}
			}
		}
		return true
	}, 120*time.Second, 250*time.Millisecond, "every replica leaves n1")
	for _, rd := range []string{"r1", "r2", "r3"} {
		c.waitUpToDate(rd, before[rd], 60*time.Second)
	}
	cancel()
	wg.Wait()
	assert.Empty(t, below, "UpToDate disks dropped below the start during the evacuation")
	assert.Greater(t, written, 3, "the application wrote during the evacuation")

	for _, rd := range []string{"r1", "r2", "r3"} {
		rv := c.resource(rd)
		c.sameData(rd, 4096, diskfulNodes(rv))
	}
	out, code = run(t, "sim", "check", "--root", c.root("n2"))
	require.Equal(t, 0, code, out)

	status, body := httpJSON(t, "GET", c.s.url("/cairn/v1/policies"), "")
	require.Equal(t, 200, status)
	assert.Contains(t, body, `"outcome":"ok"`)
	assert.Contains(t, body, `"verb":"replica.replace"`)
	c.cmd("node.remove", `{"name":"n1"}`)
}

// An agent killed (its host gone, in the sim): its peers report the connection lost;
// with a third of the nodes down at once the brake holds and nothing is evicted (the
// reason is shown); once only one is down past DrbdOptions/AutoEvictAfterTime, it is
// evicted, its replicas re-placed, every definition back at its replica count with the
// data written before the kill byte-identical on every UpToDate disk.
func TestAutoEvictReplacesADeadNodesReplicas(t *testing.T) {
	c := startSimCluster(t, 5, "--heartbeat-timeout", "2s")
	c.cmd("controller.modify", `{"properties":{"DrbdOptions/AutoEvictAfterTime":"0.05"}}`) // 3 s
	c.cmd("rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 3, 60*time.Second)
	holders := diskfulNodes(rv)
	require.NoError(t, c.write("r1", holders[0], 100))
	var spare []string
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if !contains(holders, n) {
			spare = append(spare, n)
		}
	}
	victim := holders[2]

	// Two of five down (40 % > 34 %): the brake.
	c.kill(victim)
	c.kill(spare[0])
	require.Eventually(t, func() bool {
		for _, r := range c.resource("r1").Replicas {
			if r.Node == holders[0] && r.Observed != nil {
				for _, p := range r.Observed.Peers {
					if p.Node == victim {
						return p.Connection == "Connecting"
					}
				}
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the peers see %s's connection lost", victim)
	require.Eventually(t, func() bool {
		_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/policies"), "")
		return strings.Contains(body, `"action":"braked"`) && strings.Contains(body, "2 of 5 nodes are offline")
	}, 30*time.Second, 200*time.Millisecond)
	// Honest status: the dead node's replica is not UpToDate, the definition is degraded,
	// and LINSTOR shows no state for it (its CLI prints Unknown), not its last report.
	rv = c.resource("r1")
	assert.True(t, rv.Degraded, "%+v", rv)
	assert.Equal(t, 2, rv.UpToDate)
	for _, r := range rv.Replicas {
		if r.Node == victim {
			assert.Equal(t, "offline", r.NodeState)
			assert.False(t, r.UpToDate)
		}
	}
	_, body := httpJSON(t, "GET", c.s.url("/v1/resource-definitions/r1/resources"), "")
	lr := decode[[]map[string]any](t, body)
	require.Len(t, lr, 3)
	for _, r := range lr {
		_, hasState := r["state"]
		assert.Equal(t, r["node_name"] != victim, hasState, "state of %v", r["node_name"])
	}
	time.Sleep(4 * time.Second) // past AutoEvictAfterTime: still nobody evicted
	_, body = httpJSON(t, "GET", c.s.url("/cairn/v1/nodes/"+victim), "")
	require.NotContains(t, body, `"maintenance":"evicted"`)
	require.Contains(t, diskfulNodes(c.resource("r1")), victim)

	// The spare comes back: one of five down, the victim is evicted and replaced.
	c.startAgent(spare[0])
	require.Eventually(t, func() bool {
		_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/nodes/"+victim), "")
		return strings.Contains(body, `"maintenance":"evicted"`)
	}, 60*time.Second, 200*time.Millisecond, "the dead node is evicted")
	require.Eventually(t, func() bool {
		rv = c.resource("r1")
		return !contains(diskfulNodes(rv), victim) && len(upToDate(rv)) == 3
	}, 120*time.Second, 250*time.Millisecond, "r1 is back at three UpToDate disks without %s: %+v", victim, rv)
	assert.False(t, rv.Degraded)
	c.sameData("r1", 4096, diskfulNodes(rv))
	// The dead node cannot tear its replica down: `cairn wait` does not wait for it once
	// its agent is gone (before, it never settled).
	out, code := run(t, "wait", "resource", "r1", "--timeout", "60s", "--node-gone-after", "3s", "--nats", c.s.natsURL())
	require.Equal(t, 0, code, out)
	out, code = run(t, "sim", "check", "--root", c.root(holders[0]))
	require.Equal(t, 0, code, out)
	_, body = httpJSON(t, "GET", c.s.url("/cairn/v1/events?type=node.maintenance-changed"), "")
	require.Contains(t, body, "policy:auto-evict")
}

// otherThan is the first of nodes that is not node.
func otherThan(nodes []string, node string) string {
	for _, n := range nodes {
		if n != node {
			return n
		}
	}
	return ""
}

// The LINSTOR CLI's maintenance commands against Cairn: `node set-property …
// AutoplaceTarget false` cordons, `node evacuate` moves every replica off (the node
// listed EVACUATE meanwhile) after which `node delete` succeeds, `node restore` cancels,
// and `controller set-property DrbdOptions/AutoEvictAfterTime` reaches the auto-evict
// policy's settings.
func TestLinstorCLIEvacuateAndRestore(t *testing.T) {
	c := startSimCluster(t, 4)
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	ok := linstorOK(t, linstor)
	ok("controller", "set-property", "DrbdOptions/AutoEvictAfterTime", "1")
	require.Eventually(t, func() bool {
		_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/policies"), "")
		return strings.Contains(body, `"after_seconds":60`)
	}, 10*time.Second, 200*time.Millisecond, "the policy reads the controller's setting")

	ok("node", "set-property", "n4", "AutoplaceTarget", "false")
	assert.Contains(t, ok("node", "list-properties", "n4"), "AutoplaceTarget")
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	for _, r := range rv.Replicas {
		assert.NotEqual(t, "n4", r.Node, "a cordoned node gets no replica, not even a tiebreaker")
	}
	ok("resource-definition", "set-property", "r1", "DrbdOptions/auto-diskful", "1")
	leaving := diskfulNodes(rv)[0]
	ok("node", "set-property", "n4", "AutoplaceTarget")
	require.NoError(t, c.write("r1", diskfulNodes(rv)[1], 32))

	assert.Contains(t, ok("node", "evacuate", leaving), "is being evacuated")
	assert.Contains(t, ok("node", "list"), "EVACUATE")
	require.Eventually(t, func() bool {
		for _, r := range c.resource("r1").Replicas {
			if r.Node == leaving {
				return false
			}
		}
		return true
	}, 90*time.Second, 250*time.Millisecond, "r1 leaves %s", leaving)
	rv = c.waitUpToDate("r1", 2, 60*time.Second)
	c.sameData("r1", 4096, diskfulNodes(rv))
	ok("node", "restore", leaving)
	assert.NotContains(t, ok("node", "list"), "EVACUATE")
	assert.Contains(t, ok("node", "delete", leaving), "SUCCESS")

	// toggle-disk --migrate-from: the disk moves to a node holding no replica; the old
	// one is removed once the new one is UpToDate.
	rv = c.resource("r1")
	from := diskfulNodes(rv)[0]
	var to string
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if n != leaving && !contains(diskfulNodes(rv), n) {
			to = n
		}
	}
	for _, r := range rv.Replicas {
		if r.Node == to {
			require.True(t, r.Diskless) // its tiebreaker: it gets the disk
		}
	}
	ok("resource", "toggle-disk", "--storage-pool", "thin", "--migrate-from", from, to, "r1")
	require.Eventually(t, func() bool {
		rv = c.resource("r1")
		return !contains(diskfulNodes(rv), from) && contains(diskfulNodes(rv), to) && len(upToDate(rv)) == 2
	}, 90*time.Second, 250*time.Millisecond, "r1's disk moves from %s to %s: %+v", from, to, rv)
	c.sameData("r1", 4096, diskfulNodes(rv))
}

// Keeping the replica count: a disk removed by hand comes back elsewhere, and a group
// whose place count went up beyond the nodes there are gets the missing replica as soon
// as a node joins (LINSTOR #255), not at the next sweep.
func TestKeepReplicaCount(t *testing.T) {
	c := startSimCluster(t, 3, "--keep-count-interval", "1s")
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", diskfulNodes(rv)[0], 40))
	gone := diskfulNodes(rv)[1]
	c.cmd("replica.remove", fmt.Sprintf(`{"resource":"r1","node":%q}`, gone))
	require.Eventually(t, func() bool {
		rv = c.resource("r1")
		return len(upToDate(rv)) == 2 && len(diskfulNodes(rv)) == 2
	}, 60*time.Second, 200*time.Millisecond, "r1 is back at two disks: %+v", rv)
	c.sameData("r1", 4096, diskfulNodes(rv))

	c.cmd("rg.modify", `{"name":"rg2","place_count":4}`)
	require.Eventually(t, func() bool {
		_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/policies"), "")
		return strings.Contains(body, `"verb":"replica.add"`) && strings.Contains(body, "autoplace needs")
	}, 30*time.Second, 200*time.Millisecond, "the refusal (no fourth node) is shown")
	require.Eventually(t, func() bool { return len(upToDate(c.resource("r1"))) == 3 }, 60*time.Second, 200*time.Millisecond)
	c.cmd("node.add", `{"name":"n4","host":"h4","address":"10.0.0.4"}`)
	c.cmd("sp.create", `{"node":"n4","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`)
	c.startAgent("n4")
	rv = c.waitUpToDate("r1", 4, 60*time.Second)
	c.sameData("r1", 4096, diskfulNodes(rv))
	_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/events?type=replica.added"), "")
	assert.Contains(t, body, "policy:keep-count")
}

// An evacuation resumes from the events: the serve holding the lease is killed (-9)
// after the first replacement was placed, and the agent of a replacement's node is
// killed mid-sync and restarted; the other serve takes the lease and finishes, every
// step sent once (deterministic command ids), the data byte-identical afterwards.
func TestEvacuationSurvivesALeaseMoveAndAKilledAgent(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	ns := singleNATS(t)
	serveOn := func(name string) *serve {
		s := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t)}
		s.args = []string{"serve", "--data", s.data, "--nats", ns.url, "--http", s.httpAddr, "--name", name,
			"--lease-ttl", "2s", "--heartbeat-timeout", "5s", "--max-syncing-replacements", "1"}
		s.run(name)
		s.natsAddr = strings.TrimPrefix(ns.url, "nats://")
		return s
	}
	a := serveOn("a")
	require.Eventually(t, func() bool { l, ok := getLeader(a); return ok && l.This }, 20*time.Second, 50*time.Millisecond)
	b := serveOn("b")
	c := &simCluster{t: t, s: a, base: t.TempDir(), agents: map[string]*exec.Cmd{}}
	c.cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("n%d", i)
		c.cmd("node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, n, i, i))
		c.cmd("sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`, n))
		c.startAgent(n)
	}
	c.cmd("rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	rds := []string{"r1", "r2", "r3", "r4"}
	for _, rd := range rds {
		c.cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg3","name":%q,"size_kib":4096}`, rd))
	}
	for _, rd := range rds {
		rv := c.waitUpToDate(rd, 3, 60*time.Second)
		require.NoError(t, c.write(rd, diskfulNodes(rv)[0], 32))
	}
	leaving := ""
	for _, n := range []string{"n1", "n2", "n3", "n4"} { // the node holding the most disks
		if leaving == "" || countOn(c, rds, n) > countOn(c, rds, leaving) {
			leaving = n
		}
	}
	before := countOn(c, rds, leaving)
	c.cmd("node.evacuate", fmt.Sprintf(`{"name":%q}`, leaving))

	// The first replacement is placed: kill the lease holder, and the replacement's
	// agent while it syncs.
	var target string
	require.Eventually(t, func() bool {
		for _, rd := range rds {
			for _, r := range c.resource(rd).Replicas {
				if r.Replaces == leaving {
					target = r.Node
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	a.kill9()
	c.s = b
	c.kill(target)
	require.Eventually(t, func() bool { l, ok := getLeader(b); return ok && l.This }, 30*time.Second, 50*time.Millisecond, "b takes the lease")
	time.Sleep(time.Second) // the agent stays dead a moment: its sync starts again when it is back
	c.startAgent(target)

	require.Eventually(t, func() bool { return countOn(c, rds, leaving) == 0 }, 3*time.Minute, 250*time.Millisecond,
		"every replica leaves %s", leaving)
	for _, rd := range rds {
		rv := c.waitUpToDate(rd, 3, 60*time.Second)
		c.sameData(rd, 4096, diskfulNodes(rv))
	}
	out, code := run(t, "sim", "check", "--root", c.root(target))
	require.Equal(t, 0, code, out)
	// Every step once: one replacement added per disk that was on the node.
	_, body := httpJSON(t, "GET", b.url("/cairn/v1/events?type=replica.added&actor=policy:evacuate&limit=1000"), "")
	var audit struct {
		Events []struct {
			Payload struct {
				Resource string `json:"resource"`
				Replaces string `json:"replaces"`
			} `json:"payload"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &audit))
	added := map[string]int{}
	for _, e := range audit.Events {
		require.Equal(t, leaving, e.Payload.Replaces)
		added[e.Payload.Resource]++
	}
	assert.Len(t, added, before, "a replacement for every disk on %s", leaving)
	for rd, n := range added {
		assert.Equal(t, 1, n, "%s: replaced once", rd)
	}
	c.cmd("node.remove", fmt.Sprintf(`{"name":%q}`, leaving))
}

// countOn counts the definitions of rds with a replica on node.
func countOn(c *simCluster, rds []string, node string) int {
	n := 0
	for _, rd := range rds {
		for _, r := range c.resource(rd).Replicas {
			if r.Node == node {
				n++
			}
		}
	}
	return n
}

// A storage pool its agent cannot use (a directory that does not exist) is reported
// with the agent's error: LINSTOR lists it with an error report (its CLI shows the
// pool's state as Error), autoplace passes it over saying why, and placing on it by name
// is refused; before, it was listed Ok with free space and a replica placed there failed.
func TestAnUnusablePoolIsSkipped(t *testing.T) {
	c := startSimCluster(t, 2)
	c.cmd("sp.create", `{"node":"n1","name":"bad","provider":"file_thin","pool":"/var/lib/cairn/nowhere","capacity_kib":10485760}`)
	c.cmd("sp.create", `{"node":"n2","name":"bad","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`)
	var pools []struct {
		Reports []struct {
			RetCode int64  `json:"ret_code"`
			Message string `json:"message"`
		} `json:"reports"`
	}
	require.Eventually(t, func() bool {
		_, body := httpJSON(t, "GET", c.s.url("/v1/nodes/n1/storage-pools?storage_pools=bad"), "")
		pools = decode[[]struct {
			Reports []struct {
				RetCode int64  `json:"ret_code"`
				Message string `json:"message"`
			} `json:"reports"`
		}](t, body)
		return len(pools) == 1 && len(pools[0].Reports) == 1
	}, 60*time.Second, 200*time.Millisecond, "n1's agent reports the pool it cannot use")
	assert.Contains(t, pools[0].Reports[0].Message, "cannot use storage pool bad")
	assert.Less(t, pools[0].Reports[0].RetCode, int64(0), "an error report")

	c.cmd("rg.create", `{"name":"rgbad","place_count":2,"storage_pool":"bad"}`)
	out, code := run(t, "cmd", "rg.spawn", `{"resource_group":"rgbad","name":"r1","size_kib":4096}`, "--nats", c.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.Contains(t, out, "n1: its agent cannot use storage pool bad")
	c.cmd("rd.create", `{"name":"r2"}`)
	c.cmd("vd.create", `{"resource":"r2","volume":0,"size_kib":4096}`)
	out, code = run(t, "cmd", "replica.add", `{"resource":"r2","node":"n1","storage_pool":"bad"}`, "--nats", c.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.Contains(t, out, "the agent of node n1 cannot use storage pool bad")
	c.cmd("replica.add", `{"resource":"r2","node":"n2","storage_pool":"bad"}`) // n2's is fine

	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	out, errb, code := linstor("storage-pool", "list", "--storage-pools", "bad")
	require.Equal(t, 0, code, out+errb)
	assert.Contains(t, out, "Error")
}

// Auto-diskful, set with the LINSTOR CLI on the definition: a diskless replica Primary
// longer than DrbdOptions/auto-diskful (here 0.05 min) gets a disk on its node; with
// DrbdOptions/auto-diskful-allow-cleanup a disk above the place count goes once the
// new one is UpToDate; the data is the same on the disks left, the Primary stays.
func TestAutoDiskful(t *testing.T) {
	c := startSimCluster(t, 3, "--keep-count-interval", "1s")
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	var app string
	for _, n := range []string{"n1", "n2", "n3"} {
		if !contains(diskfulNodes(rv), n) {
			app = n
		}
	}
	c.cmd("replica.add", fmt.Sprintf(`{"resource":"r1","node":%q,"diskless":true}`, app)) // the tiebreaker becomes the application's
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	for _, kv := range [][2]string{{"DrbdOptions/auto-diskful", "0.05"}, {"DrbdOptions/auto-diskful-allow-cleanup", "true"}} {
		out, errb, code := linstor("resource-definition", "set-property", "r1", kv[0], kv[1])
		require.Equal(t, 0, code, out+errb)
	}
	require.Eventually(t, func() bool {
		out, code := run(t, "sim", "promote", "--root", c.root(app), "r1")
		return code == 0 && strings.Contains(out, "promoted")
	}, 30*time.Second, 200*time.Millisecond, "the application opens r1 on %s", app)
	require.NoError(t, c.write("r1", app, 64)) // a diskless Primary writes through its peers

	require.Eventually(t, func() bool {
		rv = c.resource("r1")
		return contains(upToDate(rv), app) && len(diskfulNodes(rv)) == 2
	}, 90*time.Second, 250*time.Millisecond, "%s gets a disk, a surplus one goes: %+v", app, rv)
	for _, r := range rv.Replicas {
		if r.Node == app {
			require.NotNil(t, r.Observed)
			assert.Equal(t, "Primary", r.Observed.Role, "still Primary")
		}
	}
	c.sameData("r1", 4096, diskfulNodes(rv))
	out, code := run(t, "sim", "check", "--root", c.root(app))
	require.Equal(t, 0, code, out)
	_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/events?actor=policy:auto-diskful"), "")
	assert.Contains(t, body, "replica.disk-toggled")
	assert.Contains(t, body, "replica.removed")
}

// A disk that fails (an I/O error in the sim: DRBD detaches it) is replaced: a new disk
// elsewhere syncs from the one left, then the failed replica goes diskless (its node
// stays, and an application there keeps its device); the definition is back at its
// place count with the data byte-identical.
func TestAFailedDiskIsReplaced(t *testing.T) {
	c := startSimCluster(t, 4)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	bad := diskfulNodes(rv)[0]
	require.NoError(t, c.write("r1", diskfulNodes(rv)[1], 48))
	out, code := run(t, "sim", "fail-disk", "--root", c.root(bad), "r1")
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool {
		rv = c.resource("r1")
		return len(upToDate(rv)) == 2 && !contains(diskfulNodes(rv), bad)
	}, 90*time.Second, 250*time.Millisecond, "the failed disk on %s is replaced: %+v", bad, rv)
	found := false
	for _, r := range rv.Replicas {
		if r.Node == bad {
			found = true
			assert.True(t, r.Diskless, "the replica on %s stays, diskless", bad)
		}
	}
	assert.True(t, found, "the replica on %s stays", bad)
	c.sameData("r1", 4096, diskfulNodes(rv))
	_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/events?actor=policy:evacuate"), "")
	assert.Contains(t, body, "replica.disk-toggled")
}

// A dead host in the sim, as DRBD shows it: writes while n3's agent is gone do not reach
// its disk (the connection is lost), and when it is back the two resync what changed, so
// every disk holds the same bytes again (the oracle reads the files).
func TestADeadHostResyncsWhenItIsBack(t *testing.T) {
	c := startSimCluster(t, 3)
	c.cmd("rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 3, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 16))
	c.kill("n3")
	require.Eventually(t, func() bool {
		for _, r := range c.resource("r1").Replicas {
			if r.Node == "n1" && r.Observed != nil {
				for _, p := range r.Observed.Peers {
					if p.Node == "n3" {
						return p.Connection == "Connecting"
					}
				}
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "n1 sees n3's connection lost")
	require.NoError(t, c.write("r1", "n1", 64)) // n3 misses these
	n3 := filepath.Join(c.root("n3"), "var/lib/cairn/thin/r1_00000.img")
	n1 := filepath.Join(c.root("n1"), "var/lib/cairn/thin/r1_00000.img")
	a, err := os.ReadFile(n1)
	require.NoError(t, err)
	b, err := os.ReadFile(n3)
	require.NoError(t, err)
	require.NotEqual(t, a[:4096*1024], b[:4096*1024], "the writes while n3 was gone did not reach it")

	c.startAgent("n3")
	out, code := run(t, "wait", "resource", "r1", "--timeout", "60s", "--nats", c.s.natsURL())
	require.Equal(t, 0, code, out)
	c.sameData("r1", 4096, []string{"n1", "n2", "n3"})
	out, code = run(t, "sim", "check", "--root", c.root("n1"))
	require.Equal(t, 0, code, out)
}
