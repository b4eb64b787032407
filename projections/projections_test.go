package projections_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// history drives a random but valid mix of commands and returns how many were accepted.
func history(t *testing.T, s *server.Server, rng *rand.Rand, n int) {
	t.Helper()
	servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for range n {
		name := fmt.Sprintf("n%d", rng.IntN(20))
		switch rng.IntN(4) {
		case 0, 1:
			servertest.Submit(s, "node.add", fmt.Sprintf(`{"name":%q,"host":"h-%s","address":"10.0.0.%d"}`, name, name, rng.IntN(250)+1))
		case 2:
			state := []string{"online", "offline"}[rng.IntN(2)]
			servertest.Submit(s, "node.set-state", fmt.Sprintf(`{"name":%q,"state":%q}`, name, state))
		case 3:
			servertest.Submit(s, "node.remove", fmt.Sprintf(`{"name":%q}`, name))
		}
	}
}

func rebuildDigest(t *testing.T, s *server.Server, stopAt uint64) (projections.Digest, *projections.DB) {
	t.Helper()
	db, err := projections.OpenInMem()
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	d, err := server.ProjectInto(context.Background(), db, s.JS, s.Store.Names(), stopAt, 0, zerolog.Nop())
	require.NoError(t, err)
	return d, db
}

func TestRebuildEqualsIncrementalApplication(t *testing.T) {
	s := servertest.Start(t)
	rng := rand.New(rand.NewPCG(1, 2))
	history(t, s, rng, 300)
	// a message published around admission is skipped the same way every time
	before := servertest.LastSeq(t, s)
	nc := servertest.Client(t, s)
	require.NoError(t, nc.Publish("cairn.ev.node.junk", []byte(`{"not":"an event"}`)))
	// a valid envelope stored on another subject than it names would corrupt the boundaries
	envs, err := events.Seal(events.Meta{CommandID: "forged", Actor: "mallory", OccurredAt: time.Now()},
		[]events.Draft{{Subject: "cairn.ev.node.n1", Payload: &events.NodeRemoved{Name: "n1"}}})
	require.NoError(t, err)
	body, _ := events.Encode(envs[0])
	require.NoError(t, nc.Publish("cairn.ev.node.elsewhere", body))
	require.NoError(t, nc.Flush())
	// A core publish is stored by JetStream after the flush may have returned: wait
	// until both are in the stream (a last sequence read too early made this test
	// compare the live views at N-1 with a rebuild at N).
	last := before + 2
	require.Eventually(t, func() bool { return servertest.LastSeq(t, s) == last }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Projector.WaitFor(context.Background(), last))

	live, err := s.DB.Digest()
	require.NoError(t, err)
	rebuilt, db := rebuildDigest(t, s, 0)
	assert.Equal(t, live, rebuilt)
	assert.Equal(t, last, rebuilt.Seq)

	v, err := db.Read()
	require.NoError(t, err)
	defer v.Close()
	rejected, err := v.Rejected()
	require.NoError(t, err)
	require.Len(t, rejected, 2)
	assert.Equal(t, "cairn.ev.node.junk", rejected[0].Subject)
	assert.Equal(t, "cairn.ev.node.elsewhere", rejected[1].Subject)
	assert.Contains(t, rejected[1].Reason, "names subject cairn.ev.node.n1")
	assert.Equal(t, last, rejected[1].Seq)
}

func TestViewsAtASequenceShowThePast(t *testing.T) {
	s := servertest.Start(t)
	servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	servertest.Submit(s, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	mid := servertest.LastSeq(t, s)
	midDigest, err := s.DB.Digest()
	require.NoError(t, err)
	servertest.Submit(s, "node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`)
	servertest.Submit(s, "node.remove", `{"name":"n1"}`)

	d, db := rebuildDigest(t, s, mid)
	assert.Equal(t, midDigest, d)
	v, err := db.Read()
	require.NoError(t, err)
	defer v.Close()
	nodes, err := v.Nodes()
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, "n1", nodes[0].Spec.Name)
}

func TestRestartResumesAfterTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := func(c *server.Config) { c.DataDir = dir }
	s := servertest.Start(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	history(t, s, rng, 100)
	require.NoError(t, s.Close())

	s = servertest.Start(t, cfg)
	before := s.Projector.Applied()
	assert.Equal(t, servertest.LastSeq(t, s), before, "views caught up at start")
	history(t, s, rng, 100)
	require.NoError(t, s.Projector.WaitFor(context.Background(), servertest.LastSeq(t, s)))
	live, err := s.DB.Digest()
	require.NoError(t, err)
	rebuilt, _ := rebuildDigest(t, s, 0)
	assert.Equal(t, live, rebuilt)
}

// The projector's ordered consumer mends itself when the server loses it: deleted under
// a running projector, it is recreated after the last message the projector read, and
// the messages stored meanwhile (core publishes, which only the consumer brings to the
// views) are each applied once.
func TestProjectorRecoversItsDeletedConsumer(t *testing.T) {
	s := servertest.Start(t)
	rng := rand.New(rand.NewPCG(5, 6))
	history(t, s, rng, 40)
	nc := servertest.Client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publishJunk := func(from, n int) uint64 {
		before := servertest.LastSeq(t, s)
		for i := range n {
			require.NoError(t, nc.Publish(fmt.Sprintf("cairn.ev.node.junk%d", from+i), []byte(`{"not":"an event"}`)))
		}
		require.NoError(t, nc.Flush())
		last := before + uint64(n)
		require.Eventually(t, func() bool { return servertest.LastSeq(t, s) == last }, 10*time.Second, 5*time.Millisecond)
		return last
	}
	require.NoError(t, s.Projector.WaitFor(ctx, publishJunk(0, 5)))

	stream, err := s.JS.Stream(ctx, s.Store.Names().EventsStream())
	require.NoError(t, err)
	deleted := 0
	for name := range stream.ConsumerNames(ctx).Name() {
		require.NoError(t, stream.DeleteConsumer(ctx, name))
		deleted++
	}
	require.Positive(t, deleted, "the running projector has a consumer on the events stream")

	last := publishJunk(5, 20)
	require.NoError(t, s.Projector.WaitFor(ctx, last))
	live, err := s.DB.Digest()
	require.NoError(t, err)
	rebuilt, db := rebuildDigest(t, s, 0)
	assert.Equal(t, rebuilt, live)
	v, err := db.Read()
	require.NoError(t, err)
	defer v.Close()
	rejected, err := v.Rejected()
	require.NoError(t, err)
	assert.Len(t, rejected, 25, "every junk message recorded once")
}

// appendNodes appends node.added for each name as one command (one atomic batch when
// there are several) and returns the sequences stored.
func appendNodes(t *testing.T, s *server.Server, cmd string, names ...string) []uint64 {
	t.Helper()
	var drafts []events.Draft
	for _, name := range names {
		drafts = append(drafts, events.Draft{Subject: s.Store.Names().Event("node", name),
			Payload: &events.NodeAdded{Name: name, Host: "h-" + name, Address: "10.0.0.1", Role: "storage"}})
	}
	envs, err := events.Seal(events.Meta{CommandID: cmd, Actor: "test", OccurredAt: time.Now()}, drafts)
	require.NoError(t, err)
	raws, err := s.Store.Append(context.Background(), events.Expect{Kind: events.ExpectChecks}, envs)
	require.NoError(t, err)
	seqs := make([]uint64, len(raws))
	for i, r := range raws {
		seqs[i] = r.Seq
	}
	return seqs
}

// The projector's consumer tells where an atomic batch ends from the headers the server
// keeps on a batch's messages, so that the views are committed only there.
func TestConsumerMarksTheMessagesInsideAnAtomicBatch(t *testing.T) {
	s := servertest.Start(t)
	servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	batch := appendNodes(t, s, "three", "a", "b", "c")
	single := appendNodes(t, s, "one", "d")

	db, err := projections.OpenInMem()
	require.NoError(t, err)
	defer db.Close()
	p, err := projections.NewProjector(db, s.JS, s.Store.Names(), zerolog.Nop())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raws, err := p.ReadStored(ctx, single[0])
	require.NoError(t, err)
	mid := map[uint64]bool{}
	for _, r := range raws {
		mid[r.Seq] = r.MidBatch
	}
	assert.Equal(t, map[uint64]bool{1: false, batch[0]: true, batch[1]: true, batch[2]: false, single[0]: false}, mid)
}

// A batch whose last message is missing from the stream never ends. The events stream
// denies deletes (for good), so this takes a stream made without that, as a foreign
// tool or an older release might have: the views wait a moment for the batch's end,
// then commit without it rather than stall.
func TestViewsCommitABatchWhoseEndIsMissing(t *testing.T) {
	s := servertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := events.NewNames("loose")
	cfg := names.StreamConfigs(events.StreamOptions{})[0]
	require.Equal(t, names.EventsStream(), cfg.Name)
	cfg.DenyDelete = false
	stream, err := s.JS.CreateStream(ctx, cfg)
	require.NoError(t, err)
	var drafts []events.Draft
	for _, name := range []string{"a", "b", "c"} {
		drafts = append(drafts, events.Draft{Subject: names.Event("node", name),
			Payload: &events.NodeAdded{Name: name, Host: "h-" + name, Address: "10.0.0.1", Role: "storage"}})
	}
	envs, err := events.Seal(events.Meta{CommandID: "three", Actor: "test", OccurredAt: time.Now()}, drafts)
	require.NoError(t, err)
	raws, err := events.NewStore(s.JS, names).Append(ctx, events.Expect{Kind: events.ExpectChecks}, envs)
	require.NoError(t, err)
	require.NoError(t, stream.DeleteMsg(ctx, raws[2].Seq))

	db, err := projections.OpenInMem()
	require.NoError(t, err)
	defer db.Close()
	p, err := projections.NewProjector(db, s.JS, names, zerolog.Nop())
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx, 0) }()
	began := time.Now()
	require.NoError(t, p.WaitFor(ctx, raws[1].Seq))
	assert.GreaterOrEqual(t, time.Since(began), 900*time.Millisecond, "it waited for the batch's end first")
	v, err := db.Read()
	require.NoError(t, err)
	_, ok, err := v.Node("b")
	require.NoError(t, err)
	assert.True(t, ok)
	v.Close()
	stop()
	require.NoError(t, <-done)
}
