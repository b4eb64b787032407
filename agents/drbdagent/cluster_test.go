package drbdagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/natsauth"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// clusterNode is an in-process agent (agents.Agent + Reconciler + Sim) connected to
// the server with its own node credentials (serve --auth).
type clusterNode struct {
	*simNode
	agent *agents.Agent
	// stop ends the agent and its reconciler (the host's simulated kernel stays).
	stop context.CancelFunc
}

// natsPub publishes on the node's own connection and keeps a copy.
type natsPub struct {
	nc  *nats.Conn
	cap *capture
}

func (p natsPub) Publish(subject string, data []byte) error {
	_ = p.cap.Publish(subject, data)
	return p.nc.Publish(subject, data)
}

func startClusterNode(t *testing.T, s *server.Server, base, name, host string, tune ...func(*Config)) *clusterNode {
	t.Helper()
	names := events.NewNames("")
	credsBytes, err := s.Auth.NodeCreds(name)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := natsauth.ParseCreds(credsBytes)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := creds.Options()
	if err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 16)
	opts = append(opts, nats.CustomInboxPrefix(names.NodeInbox(name)), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case violations <- err:
		default:
		}
	}))
	nc, err := nats.Connect(s.NATSAddr, opts...)
	if err != nil {
		t.Fatalf("connect as node %s: %v", name, err)
	}
	t.Cleanup(nc.Close)
	t.Cleanup(func() {
		select {
		case err := <-violations:
			t.Errorf("node %s: NATS error (a publish outside its own subjects?): %v", name, err)
		default:
		}
	})
	n := newSimNodePub(t, base, name, host, nil, func(c *capture) Publisher { return natsPub{nc: nc, cap: c} }, tune...)
	a, err := agents.New(nc, agents.Options{Node: name, Names: names, HeartbeatInterval: time.Second, Reconciler: n.rec, Workers: 4,
		Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = a.Run(ctx) }()
	return &clusterNode{simNode: n, agent: a, stop: func() { cancel(); n.cancel(); nc.Close() }}
}

func submit(t *testing.T, s *server.Server, verb, body string) {
	t.Helper()
	if r := servertest.Submit(s, verb, body); !r.OK {
		t.Fatalf("%s %s: %+v", verb, body, r.Error)
	}
}

// lastStatus reads the latest status of rd on node from CAIRN_STATUS (what the
// control plane sees).
func lastStatus(t *testing.T, s *server.Server, node, rd string) (drbd.Status, bool) {
	t.Helper()
	stream, err := s.JS.Stream(context.Background(), "CAIRN_STATUS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(context.Background(), events.NewNames("").Status(node, "drbd", rd))
	if err != nil {
		return drbd.Status{}, false
	}
	var st drbd.Status
	if err := json.Unmarshal(m.Data, &st); err != nil {
		t.Fatal(err)
	}
	return st, true
}

func desiredOf(t *testing.T, s *server.Server, node, rd string) *drbd.Desired {
	t.Helper()
	stream, err := s.JS.Stream(context.Background(), "CAIRN_NODES")
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(context.Background(), events.NewNames("").Node(node, "drbd", rd))
	if err != nil || len(m.Data) == 0 {
		return nil
	}
	var d drbd.Desired
	if err := json.Unmarshal(m.Data, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// connectedTo reports whether st shows every peer in nodes Established on every volume.
func connectedTo(st drbd.Status, nodes ...string) bool {
	for _, n := range nodes {
		ok := false
		for _, p := range st.Peers {
			if p.Node == n && p.Connection == "Connected" && len(p.Volumes) > 0 {
				ok = true
				for _, v := range p.Volumes {
					ok = ok && v.Replication == "Established"
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func syncKinds(st drbd.Status) map[string]string {
	out := map[string]string{}
	for _, p := range st.Peers {
		for _, v := range p.Volumes {
			k := v.SyncKind
			if v.LastSyncKiB != nil {
				k += fmt.Sprintf("/%dKiB", *v.LastSyncKiB)
			}
			out[p.Node] = k
		}
	}
	return out
}

func waitApplied(t *testing.T, s *server.Server, rd string, peers map[string][]string) map[string]drbd.Status {
	t.Helper()
	out := map[string]drbd.Status{}
	for node, want := range peers {
		eventually(t, fmt.Sprintf("%s applied on %s, connected to %v", rd, node, want), 60*time.Second, func() (bool, string) {
			st, ok := lastStatus(t, s, node, rd)
			out[node] = st
			return ok && st.Phase == drbd.PhaseApplied && connectedTo(st, want...), js(st)
		})
	}
	return out
}

func diskOf(t *testing.T, n *clusterNode, rd string) (string, int) {
	t.Helper()
	st, err := LoadState(NewPaths(n.root).StateFile(rd))
	if err != nil || st == nil || st.Disks[0] == "" {
		t.Fatalf("%s on %s: state %+v %v", rd, n.name, st, err)
	}
	return st.Disks[0], st.Minors[0]
}

// Three in-process agents against a real embedded server with serve --auth: a
// two-replica file_thin resource, data written, a third replica added. get-gi (real
// drbdmeta) on every metadata file shows the day-0 scheme, the new replica resyncs
// exactly the blocks written since day 0 (a bitmap resync, never none), and a full sync
// happens where seeding does not apply (thick provider file; a tiebreaker promoted to
// diskful).
func TestThreeAgentsDay0Seeding(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	s := servertest.Start(t, func(c *server.Config) { c.Auth = true })
	base := t.TempDir()
	submit(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	nodes := map[string]*clusterNode{}
	addNode := func(i int) {
		name := fmt.Sprintf("n%d", i)
		submit(t, s, "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, name, i, i))
		submit(t, s, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`, name))
		submit(t, s, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thick","provider":"file","pool":"/var/lib/cairn/thick","capacity_kib":10485760}`, name))
		n := startClusterNode(t, s, base, name, fmt.Sprintf("h%d", i))
		n.pool(t, "var/lib/cairn/thin")
		n.pool(t, "var/lib/cairn/thick")
		nodes[name] = n
	}
	addNode(1)
	addNode(2)
	submit(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	submit(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	st := waitApplied(t, s, "r1", map[string][]string{"n1": {"n2"}, "n2": {"n1"}})
	t.Logf("r1 on two nodes: syncs n1 %v, n2 %v", syncKinds(st["n1"]), syncKinds(st["n2"]))

	d1 := desiredOf(t, s, "n1", "r1")
	// 100 blocks written since day 0, on both disks (they are connected)
	if n, err := SimWrite(t.Context(), nodes["n1"].exec, DefaultSimDir(nodes["n1"].root), nodes["n1"].root, "r1", 100); err != nil || n != 100 {
		t.Fatalf("sim write: %d blocks, %v", n, err)
	}

	addNode(3)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n3"}`)
	st = waitApplied(t, s, "r1", map[string][]string{"n3": {"n1", "n2"}, "n1": {"n2", "n3"}, "n2": {"n1", "n3"}})
	kinds := syncKinds(st["n3"])
	t.Logf("third replica's syncs: %v", kinds)
	bitmaps := 0
	for peer, k := range kinds {
		switch k {
		case "bitmap/400KiB":
			bitmaps++
		case "none":
		default:
			t.Errorf("the new replica's sync with %s is %q; want one bitmap resync of the 400 KiB written since day 0 (the other none)", peer, k)
		}
	}
	if bitmaps != 1 {
		t.Errorf("the new replica did %d bitmap resyncs of the written blocks, want 1: %v", bitmaps, kinds)
	}

	// The day-0 scheme in the real metadata: every replica holds the same current UUID
	// (the first replica's), and for every node id no replica has used yet the day-0
	// bitmap UUID, so any later replica resyncs from day 0.
	day0, _ := drbd.ParseUUID(d1.Volumes[0].Day0GI)
	var current drbd.UUID
	for _, name := range []string{"n1", "n2", "n3"} {
		disk, minor := diskOf(t, nodes[name], "r1")
		gis := getGI(t, minor, disk)
		me := desiredOf(t, s, name, "r1").Local.NodeID
		if current == 0 {
			current = gis[me].Current()
		}
		if gis[me].Current() != current || current == day0 || current == drbd.UUIDJustCreated {
			t.Errorf("%s: current UUID %s, want the first replica's %s (not day 0 %s)", name, gis[me].Current(), current, day0)
		}
		for id := 3; id <= drbd.MaxNodeID; id++ {
			if gis[id].Bitmap() != day0 {
				t.Errorf("%s: bitmap UUID for unused node id %d is %s, want day 0 %s", name, id, gis[id].Bitmap(), day0)
				break
			}
		}
		if rs, _ := lastStatus(t, s, name, "r1"); len(rs.Volumes) != 1 || rs.Volumes[0].CurrentGI != current.String() {
			t.Errorf("%s: status volumes %s, want current GI %s", name, js(rs.Volumes), current)
		}
	}

	// Removing the third replica leaves two disks: n3 stays as the tiebreaker, a new
	// (diskless) incarnation, so its old disk is retired: wiped and removed.
	submit(t, s, "replica.remove", `{"resource":"r1","node":"n3"}`)
	eventually(t, "n3 is the diskless tiebreaker", 30*time.Second, func() (bool, string) {
		st, _ := lastStatus(t, s, "n3", "r1")
		return st.Phase == drbd.PhaseApplied && len(st.Volumes) == 1 && st.Volumes[0].DiskState == "Diskless" && connectedTo(st, "n1", "n2"), js(st)
	})
	if _, err := os.Stat(filepath.Join(nodes["n3"].root, "var/lib/cairn/thin/r1_00000.img")); err == nil {
		t.Error("n3's old backing file is still there after it became the tiebreaker")
	}
	if nodes["n3"].exec.count("drbdmeta wipe-md") != 1 {
		t.Errorf("n3 ran wipe-md %d times, want 1", nodes["n3"].exec.count("drbdmeta wipe-md"))
	}

	// Thick provider: the second disk gets fresh metadata and a full sync.
	submit(t, s, "rg.create", `{"name":"thick","place_count":2,"storage_pool":"thick"}`)
	submit(t, s, "rg.spawn", `{"resource_group":"thick","name":"r2","size_kib":4096}`)
	var holders []string
	eventually(t, "r2's two disks dispatched", 10*time.Second, func() (bool, string) {
		holders = holders[:0]
		for _, n := range []string{"n1", "n2", "n3"} {
			if d := desiredOf(t, s, n, "r2"); d != nil && !d.Local.Diskless {
				holders = append(holders, n)
			}
		}
		return len(holders) == 2, fmt.Sprint(holders)
	})
	st = waitApplied(t, s, "r2", map[string][]string{holders[0]: {holders[1]}, holders[1]: {holders[0]}})
	full := 0
	for _, n := range holders {
		for _, k := range syncKinds(st[n]) {
			if k == "full/4096KiB" {
				full++
			}
		}
	}
	if full != 2 { // source and target both report it
		t.Errorf("thick r2: syncs %v and %v, want a full sync of 4096 KiB", syncKinds(st[holders[0]]), syncKinds(st[holders[1]]))
	}

	// A tiebreaker promoted to diskful: new incarnation, fresh metadata, full sync.
	submit(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r3","size_kib":4096}`)
	tb := ""
	eventually(t, "r3 has a tiebreaker", 10*time.Second, func() (bool, string) {
		for _, n := range []string{"n1", "n2", "n3"} {
			if d := desiredOf(t, s, n, "r3"); d != nil && d.Local.Diskless {
				tb = n
			}
		}
		return tb != "", ""
	})
	var disks []string
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != tb {
			disks = append(disks, n)
		}
	}
	waitApplied(t, s, "r3", map[string][]string{tb: disks})
	submit(t, s, "replica.toggle-disk", fmt.Sprintf(`{"resource":"r3","node":%q,"diskless":false,"storage_pool":"thin"}`, tb))
	eventually(t, "the promoted tiebreaker syncs fully", 60*time.Second, func() (bool, string) {
		st, _ := lastStatus(t, s, tb, "r3")
		fulls := 0
		for _, k := range syncKinds(st) {
			if k == "full/4096KiB" {
				fulls++
			}
		}
		return st.Phase == drbd.PhaseApplied && connectedTo(st, disks...) && fulls >= 1 && len(st.Volumes) == 1 && st.Volumes[0].DiskState == "UpToDate", js(st)
	})
}

// threeNodes starts a server (serve --auth) with a cluster of n1..n3, each with a
// file_thin pool "thin" and an in-process agent on the simulated kernel; base is the
// directory of the nodes' roots.
func threeNodes(t *testing.T) (s *server.Server, base string, nodes map[string]*clusterNode) {
	t.Helper()
	return threeNodesWith(t, nil)
}

// threeNodesWith is threeNodes whose agents' configurations are tuned by node name.
func threeNodesWith(t *testing.T, tune map[string][]func(*Config)) (s *server.Server, base string, nodes map[string]*clusterNode) {
	t.Helper()
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	s = servertest.Start(t, func(c *server.Config) { c.Auth = true })
	base = t.TempDir()
	// Every cluster test ends with the data oracle: no two disks declared in sync held
	// different data, whatever the test did.
	t.Cleanup(func() { noDivergence(t, DefaultSimDir(filepath.Join(base, "n1"))) })
	submit(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	nodes = map[string]*clusterNode{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		submit(t, s, "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, name, i, i))
		submit(t, s, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`, name))
		nodes[name] = startClusterNode(t, s, base, name, fmt.Sprintf("h%d", i), tune[name]...)
		nodes[name].pool(t, "var/lib/cairn/thin")
	}
	return s, base, nodes
}
