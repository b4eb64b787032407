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
