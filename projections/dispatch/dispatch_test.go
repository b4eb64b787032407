package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/projections/dispatch"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDesiredResolvesOptionsAndQuorum(t *testing.T) {
	no := false
	yes := true
	c := "C"
	rd := projections.ResourceDefinition{Name: "r1", Port: 7000, Seq: 42,
		DRBDOptions: drbd.Options{AutoPromote: &no},
		Volumes:     []projections.VolumeDefinition{{Volume: 0, SizeKiB: 4096, Day0GI: "00000000000000A2"}},
		Replicas: []projections.Replica{
			{Node: "n1", NodeID: 0, Minors: []events.VolumeMinor{{Volume: 0, Minor: 1000}}, Provider: "lvm_thin", Pool: "vg/thin", Incarnation: 10,
				Seeds: []drbd.Seed{{Volume: 0, NodeID: 0, GI: "x"}}},
			{Node: "n2", NodeID: 1, Minors: []events.VolumeMinor{{Volume: 0, Minor: 1001}}, Inactive: true, DRBDOptions: drbd.Options{AutoPromote: &yes}},
		}}
	group := &projections.ResourceGroup{ResourceGroupCreated: events.ResourceGroupCreated{DRBDOptions: drbd.Options{AutoPromote: &yes, Protocol: &c}}}
	nodes := map[string]projections.NodeSpec{"n1": {Host: "h1", Address: "10.0.0.1"}, "n2": {Host: "h2", Address: "10.0.0.2"}}

	d, ok := dispatch.Desired(rd, group, nodes, projections.ControllerOptions{}, "n1")
	require.True(t, ok)
	assert.Equal(t, uint64(42), d.Revision)
	assert.True(t, d.Active)
	assert.Equal(t, false, *d.Options.AutoPromote, "the definition's explicit false overrides the group's true")
	assert.Equal(t, "C", *d.Options.Protocol, "inherited from the group")
	assert.Equal(t, "off", *d.Options.Quorum, "two voters: quorum off")
	require.NotNil(t, d.Local)
	assert.Equal(t, uint64(10), d.Local.Incarnation)
	assert.Len(t, d.Local.Seeds, 1)
	assert.Equal(t, "h2", d.Replicas[1].Host)
	assert.Equal(t, 1001, d.Replicas[1].Minors[0])

	d, _ = dispatch.Desired(rd, group, nodes, projections.ControllerOptions{}, "n2")
	assert.False(t, d.Active)
	assert.Equal(t, true, *d.Options.AutoPromote, "the replica's own setting is the narrowest")

	_, ok = dispatch.Desired(rd, group, nodes, projections.ControllerOptions{}, "n3")
	assert.False(t, ok)
}

// latest reads the latest desired state of rd on node from CAIRN_NODES (nil: removed).
func latest(t *testing.T, s *server.Server, node, rd string) (*drbd.Desired, bool) {
	t.Helper()
	stream, err := s.JS.Stream(context.Background(), "CAIRN_NODES")
	require.NoError(t, err)
	m, err := stream.GetLastMsgForSubject(context.Background(), fmt.Sprintf("cairn.node.%s.drbd.%s", node, rd))
	if err != nil {
		return nil, false
	}
	if len(m.Data) == 0 {
		return nil, true
	}
	var d drbd.Desired
	require.NoError(t, json.Unmarshal(m.Data, &d))
	return &d, true
}

func TestDispatcherPublishesEveryChange(t *testing.T) {
	s := servertest.Start(t)
	submit := func(verb, body string) {
		r := servertest.Submit(s, verb, body)
		require.True(t, r.OK, "%s: %+v", verb, r.Error)
	}
	submit("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 4; i++ {
		submit("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
		submit("sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"file_thin","pool":"/var/lib/cairn","capacity_kib":1048576}`, i))
	}
	submit("rg.create", `{"name":"rg","place_count":2}`)
	submit("rg.spawn", `{"resource_group":"rg","name":"r1","size_kib":4096}`)

	var holders []string
	require.Eventually(t, func() bool {
		holders = holders[:0]
		for i := 1; i <= 4; i++ {
			if d, ok := latest(t, s, fmt.Sprintf("n%d", i), "r1"); ok && d != nil && len(d.Replicas) == 3 {
				holders = append(holders, d.Node)
			}
		}
		return len(holders) == 3
	}, 5*time.Second, 20*time.Millisecond, "two replicas and a tiebreaker get their desired state")

	// a third diskful replica: the tiebreaker's node gets an empty message
	v, err := s.DB.Read()
	require.NoError(t, err)
	rd, _, _ := v.ResourceDefinition("r1")
	v.Close()
	var tb, free string
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("n%d", i)
		if r, ok := rd.Replica(n); !ok {
			free = n
		} else if r.Tiebreaker {
			tb = n
		}
	}
	added := servertest.Submit(s, "replica.add", fmt.Sprintf(`{"resource":"r1","node":%q}`, free))
	require.True(t, added.OK, "%+v", added.Error)
	require.Eventually(t, func() bool {
		d, ok := latest(t, s, tb, "r1")
		return ok && d == nil
	}, 5*time.Second, 20*time.Millisecond, "the removed tiebreaker's node is told to tear down")
	require.Eventually(t, func() bool {
		d, _ := latest(t, s, free, "r1")
		return d != nil && d.Local != nil && !d.Local.Diskless && len(d.Replicas) == 3 && *d.Options.Quorum == "majority"
	}, 5*time.Second, 20*time.Millisecond)

	// Every message, the removal too, carries the views' sequence it was computed from
	// and the event stream's epoch: the removal's revision is one of the replica.add's
	// events (the views may publish between a command's first event, which changed the
	// desired state, and its last, a claim that changes nothing a node is told).
	stream, err := s.JS.Stream(context.Background(), "CAIRN_NODES")
	require.NoError(t, err)
	evs, err := s.JS.Stream(context.Background(), "CAIRN_EVENTS")
	require.NoError(t, err)
	epoch := fmt.Sprint(evs.CachedInfo().Created.UnixNano())
	first, last := added.Events[0].Seq, added.Events[len(added.Events)-1].Seq
	for _, n := range []string{tb, free} {
		m, err := stream.GetLastMsgForSubject(context.Background(), "cairn.node."+n+".drbd.r1")
		require.NoError(t, err)
		rev, err := strconv.ParseUint(m.Header.Get(events.RevisionHeader), 10, 64)
		require.NoError(t, err, n)
		assert.True(t, rev >= first && rev <= last, "%s: revision %d, the replica.add's events %d..%d", n, rev, first, last)
		assert.Equal(t, epoch, m.Header.Get(events.EpochHeader), n)
	}
}

func TestOutboxEmptiesOncePublished(t *testing.T) {
	dir := t.TempDir()
	cfg := func(c *server.Config) { c.DataDir = dir }
	s := servertest.Start(t, cfg)
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	require.True(t, servertest.Submit(s, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`).OK)
	require.True(t, servertest.Submit(s, "sp.create", `{"node":"n1","name":"p","provider":"file_thin","pool":"/var/lib/cairn","capacity_kib":1048576}`).OK)
	require.True(t, servertest.Submit(s, "rd.create", `{"name":"r1"}`).OK)
	require.True(t, servertest.Submit(s, "vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`).OK)
	require.True(t, servertest.Submit(s, "replica.add", `{"resource":"r1","node":"n1"}`).OK)
	require.Eventually(t, func() bool { d, _ := latest(t, s, "n1", "r1"); return d != nil }, 5*time.Second, 20*time.Millisecond)
	// the outbox empties once JetStream acknowledged the publish (just after the message
	// becomes visible)
	require.Eventually(t, func() bool {
		b, err := s.DB.Outbox(10)
		require.NoError(t, err)
		defer b.View.Close()
		return len(b.Entries) == 0
	}, 5*time.Second, 10*time.Millisecond)
}

// A round bigger than one atomic batch (JetStream takes at most 1,000 messages) is
// stored as several, and every message of it lands: 1,500 storage pools queued by one
// fold, published by a single Round.
func TestRoundLargerThanOneBatch(t *testing.T) {
	testRoundLargerThanOneBatch(t, false)
}

// The fence is checked before every batch of a round, not once per round: a lease lost
// after the round's first batch stops the rest (on the old code all 1,500 went out).
func TestFenceIsCheckedPerBatch(t *testing.T) {
	testRoundLargerThanOneBatch(t, true)
}

func testRoundLargerThanOneBatch(t *testing.T, loseAfterFirst bool) {
	f := newFixture(t)
	js, names, db, add, ctx := f.js, f.names, f.db, f.add, context.Background()
	const pools = 1500
	add(names.Event("node", "n1"), &events.NodeAdded{Name: "n1", Host: "h1", Address: "10.0.0.1", Role: events.RoleStorage})
	for i := range pools {
		add(names.Event("node", "n1"), &events.StoragePoolCreated{Node: "n1", Name: fmt.Sprintf("p%04d", i), Provider: "file_thin", Pool: "/var/lib/cairn"})
	}
	f.fold(t)

	d := &dispatch.Dispatcher{DB: db, JS: js, Names: names, BatchSize: 2 * pools}
	if loseAfterFirst {
		var checks atomic.Int32
		d.Fence = func() (uint64, bool) { return 7, checks.Add(1) <= 2 } // the round's check and the first batch's
		_, err := d.Round(ctx)
		require.Error(t, err)
		stream, err := js.Stream(ctx, names.NodesStream())
		require.NoError(t, err)
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(events.MaxGroupMessages), info.State.Msgs, "only the batch sent under the lease landed")
		m, err := stream.GetMsg(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, "7", m.Header.Get(events.LeaseHeader))
		return
	}
	n, err := d.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, pools, n)
	stream, err := js.Stream(ctx, names.NodesStream())
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(pools), info.State.Msgs)
	b, err := db.Outbox(10)
	require.NoError(t, err)
	defer b.View.Close()
	assert.Empty(t, b.Entries, "the outbox is empty once every batch was acknowledged")
}

// A new lease holder publishes every pool's grant before the backlog: with 1,500
// storage pools queued ahead of a pool grant, Run's first message is the grant (on the
// old code it went out after the whole backlog, seconds later at scale), and the
// pool's other node gets an empty message (nothing to import).
func TestPoolGrantsGoFirst(t *testing.T) {
	f := newFixture(t)
	js, names, db, add, ctx := f.js, f.names, f.db, f.add, context.Background()
	const pools = 1500
	for _, n := range []string{"n1", "n2"} {
		add(names.Event("node", n), &events.NodeAdded{Name: n, Host: "h" + n, Address: "10.0.0.1", Role: events.RoleStorage})
	}
	for i := range pools {
		add(names.Event("node", "n1"), &events.StoragePoolCreated{Node: "n1", Name: fmt.Sprintf("p%04d", i), Provider: "file_thin", Pool: "/var/lib/cairn"})
	}
	add(names.Event("pool", "tank"), &events.PoolCreated{Name: "tank", Devices: []string{"/dev/disk/by-id/d1"}, Nodes: []string{"n1", "n2"}})
	add(names.Event("pool", "tank"), &events.PoolImportGranted{Pool: "tank", Node: "n2", Reason: "test"})
	f.fold(t)
	proj, err := projections.NewProjector(db, js, names, zerolog.Nop())
	require.NoError(t, err)
	d := &dispatch.Dispatcher{DB: db, JS: js, Names: names, Projector: proj, Fence: func() (uint64, bool) { return 3, true }}
	sub, err := js.Conn().SubscribeSync("cairn.node.>") // the order in which they are published
	require.NoError(t, err)
	require.NoError(t, js.Conn().Flush())
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	first := map[string]*nats.Msg{}
	for range 2 {
		m, err := sub.NextMsg(10 * time.Second)
		require.NoError(t, err)
		first[m.Subject] = m
	}
	grant, ok := first[names.Node("n2", "zpool", "tank")]
	require.True(t, ok, "the first messages are not the pool's: %v", first)
	assert.Contains(t, string(grant.Data), `"node":"n2"`)
	assert.Equal(t, "3", grant.Header.Get(events.LeaseHeader))
	other, ok := first[names.Node("n1", "zpool", "tank")]
	require.True(t, ok)
	assert.Empty(t, other.Data, "n1 holds no grant")
}

// A deposed leader's desired state that lands after the handover (its nats-server was
// frozen mid-publish) is not left as the stream's latest: the new holder publishes the
// subject again from its views, with its own token (on the old code the stream's latest
// went back until the subject changed again).
func TestDeposedLeadersLateDesiredStateIsOverwritten(t *testing.T) {
	f := newFixture(t)
	js, names, db, ctx := f.js, f.names, f.db, context.Background()
	f.add(names.Event("node", "n1"), &events.NodeAdded{Name: "n1", Host: "h1", Address: "10.0.0.1", Role: events.RoleStorage})
	f.add(names.Event("node", "n1"), &events.StoragePoolCreated{Node: "n1", Name: "thin", Provider: "file_thin", Pool: "/var/lib/cairn"})
	f.fold(t)
	proj, err := projections.NewProjector(db, js, names, zerolog.Nop())
	require.NoError(t, err)
	d := &dispatch.Dispatcher{DB: db, JS: js, Names: names, Projector: proj, Fence: func() (uint64, bool) { return 9, true }}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	subject := names.Node("n1", "sp", "thin")
	stream, err := js.Stream(ctx, names.NodesStream())
	require.NoError(t, err)
	latest := func() *jetstream.RawStreamMsg {
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return nil
		}
		return m
	}
	require.Eventually(t, func() bool { m := latest(); return m != nil && m.Header.Get(events.LeaseHeader) == "9" }, 10*time.Second, 10*time.Millisecond)
	want := string(latest().Data)
	late := &nats.Msg{Subject: subject, Data: []byte(`{"deposed":true}`), Header: nats.Header{}}
	late.Header.Set(events.LeaseHeader, "5")
	late.Header.Set(events.RevisionHeader, "1")
	_, err = js.PublishMsg(ctx, late)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m := latest()
		return m != nil && m.Header.Get(events.LeaseHeader) == "9" && string(m.Data) == want
	}, 5*time.Second, 10*time.Millisecond, "the deposed leader's message stayed the stream's latest")

	// A late message newer than these views (the deposed leader's views were ahead) is
	// not replaced by an older rendering: it waits for the views to catch up.
	ahead := &nats.Msg{Subject: subject, Data: []byte(`{"deposed":"ahead"}`), Header: nats.Header{}}
	ahead.Header.Set(events.LeaseHeader, "5")
	ahead.Header.Set(events.RevisionHeader, "100")
	_, err = js.PublishMsg(ctx, ahead)
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	m := latest()
	require.NotNil(t, m)
	assert.Equal(t, `{"deposed":"ahead"}`, string(m.Data), "replaced by a rendering older than what it replaced")
}

// fixture is a JetStream with Cairn's streams, empty views and a history being built:
// add appends an event on subject (sequence and ids in order), fold folds it into the
// views.
type fixture struct {
	js    jetstream.JetStream
	names events.Names
	db    *projections.DB
	evs   []events.Event
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{js: testtools.JetStream(t), names: events.NewNames("")}
	require.NoError(t, events.EnsureStreams(context.Background(), f.js, f.names, events.StreamOptions{}))
	db, err := projections.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	f.db = db
	return f
}

func (f *fixture) add(subject string, p events.Payload) {
	env := events.Envelope{ID: fmt.Sprint(len(f.evs)), Type: p.EventType(), SchemaVersion: 1, Subject: subject,
		OccurredAt: time.Now(), CommandID: fmt.Sprint("c", len(f.evs)), Actor: "test"}
	f.evs = append(f.evs, events.Event{Seq: uint64(len(f.evs) + 1), Envelope: env, Data: p})
}

func (f *fixture) fold(t *testing.T) {
	t.Helper()
	require.NoError(t, f.db.Fold(f.names, f.evs))
}

// Every publish of desired state is bounded in time (issue 29): a server that takes a
// batch and never acknowledges it (here a subscriber on the nodes' subjects where the
// stream was, as a frozen stream leader does) costs a round PublishTimeout, not forever;
// the round fails and the outbox keeps its entries for the next one.
func TestPublishIsBoundedInTime(t *testing.T) {
	for _, pools := range []int{1, 3} { // a plain publish, and an atomic batch
		t.Run(fmt.Sprintf("%d message(s)", pools), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			f.add(f.names.Event("node", "n1"), &events.NodeAdded{Name: "n1", Host: "h1", Address: "10.0.0.1", Role: events.RoleStorage})
			for i := range pools {
				f.add(f.names.Event("node", "n1"), &events.StoragePoolCreated{Node: "n1", Name: fmt.Sprintf("p%d", i), Provider: "file_thin", Pool: "/var/lib/cairn"})
			}
			f.fold(t)
			require.NoError(t, f.js.DeleteStream(ctx, f.names.NodesStream()))
			sub, err := f.js.Conn().SubscribeSync(f.names.NodeFilter("n1")) // takes every message, answers none
			require.NoError(t, err)
			defer sub.Unsubscribe()

			d := &dispatch.Dispatcher{DB: f.db, JS: f.js, Names: f.names, BatchSize: 100, PublishTimeout: 300 * time.Millisecond}
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				n, err := d.Round(ctx)
				t.Logf("round: %d messages, %v", n, err)
				done <- err
			}()
			select {
			case err := <-done:
				took := time.Since(start)
				require.Error(t, err)
				assert.Less(t, took, 2*time.Second, "the round took %s", took)
				assert.GreaterOrEqual(t, took, 300*time.Millisecond, "the round did not wait for an answer")
			case <-time.After(10 * time.Second):
				t.Fatal("a publish nobody acknowledges held the round for 10 s")
			}
			b, err := f.db.Outbox(10)
			require.NoError(t, err)
			defer b.View.Close()
			assert.Len(t, b.Entries, pools, "the outbox lost entries whose publish was never acknowledged")
		})
	}
}
