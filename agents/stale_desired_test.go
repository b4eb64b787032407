package agents_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type bodyRec struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (b *bodyRec) Reconcile(_ context.Context, subject string, body []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[subject] = append(b.seen[subject], string(body))
	return nil
}

func (b *bodyRec) last(s string) (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen[s]) == 0 {
		return "", 0
	}
	return b.seen[s][len(b.seen[s])-1], len(b.seen[s])
}

// TestAgentNeverGoesBackToAnOlderDesiredState (issue 11): a serve whose views lag
// publishes an older desired state after a newer one; the agent drops it, also after a
// restart, when the stream's latest message on the subject is the older one.
func TestAgentNeverGoesBackToAnOlderDesiredState(t *testing.T) {
	js, start := agentOnEmbedded(t)
	ctx := context.Background()
	names := events.NewNames("")
	subj := names.Node("n1", "zpool", "tank")
	pub := func(rev uint64, body string) {
		t.Helper()
		m := &nats.Msg{Subject: subj, Data: []byte(body), Header: nats.Header{}}
		m.Header.Set(events.RevisionHeader, strconv.FormatUint(rev, 10))
		m.Header.Set(events.EpochHeader, "1")
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	rec, stop := start()
	pub(20, `{"grant_seq":20}`)
	require.Eventually(t, func() bool { b, _ := rec.last(subj); return b == `{"grant_seq":20}` }, 10*time.Second, 10*time.Millisecond)
	pub(10, `{"grant_seq":10}`) // the lagging serve
	pub(21, `{"grant_seq":21}`) // a marker that the older one was consumed
	require.Eventually(t, func() bool { b, _ := rec.last(subj); return b == `{"grant_seq":21}` }, 10*time.Second, 10*time.Millisecond)
	rec.mu.Lock()
	for _, b := range rec.seen[subj] {
		assert.NotEqual(t, `{"grant_seq":10}`, b, "the older desired state reached the reconciler")
	}
	rec.mu.Unlock()
	dropped := staleDropped(t)
	pub(15, `{"grant_seq":15}`) // older again, and now the stream's latest
	// The agent has seen it (and dropped it) before it stops: the restart below must
	// meet it as the stream's latest, not as a message never delivered.
	require.Eventually(t, func() bool { return staleDropped(t) > dropped }, 10*time.Second, 10*time.Millisecond)
	stop()

	// Restarted: the stream hands over grant 15 as the latest; the agent uses 21.
	rec, stop = start()
	defer stop()
	require.Eventually(t, func() bool { _, n := rec.last(subj); return n > 0 }, 10*time.Second, 10*time.Millisecond)
	b, n := rec.last(subj)
	assert.Equal(t, `{"grant_seq":21}`, b)
	assert.Equal(t, 1, n)
}

// staleDropped is cairn_agent_stale_desired_total: desired states dropped as older than
// one already carried out.
func staleDropped(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "cairn_agent_stale_desired_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// A deposed leader's desired state that lands after the new leader's (its publish was
// frozen with its nats-server) carries the older lease token: the agent drops it even
// on another subject and with a newer revision (on the old code it took it: nothing read
// Cairn-Lease). The fence survives a restart.
func TestAgentDropsADeposedLeadersDesiredState(t *testing.T) {
	js, start := agentOnEmbedded(t)
	ctx := context.Background()
	names := events.NewNames("")
	pool, drbd := names.Node("n1", "zpool", "tank"), names.Node("n1", "drbd", "r1")
	pub := func(subj string, token, rev uint64, body string) {
		t.Helper()
		m := &nats.Msg{Subject: subj, Data: []byte(body), Header: nats.Header{}}
		m.Header.Set(events.RevisionHeader, strconv.FormatUint(rev, 10))
		m.Header.Set(events.LeaseHeader, strconv.FormatUint(token, 10))
		m.Header.Set(events.EpochHeader, "1")
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	rec, stop := start()
	pub(pool, 4, 10, `{"grant":"old leader"}`)
	pub(drbd, 9, 11, `{"r1":"new leader"}`)
	require.Eventually(t, func() bool { b, _ := rec.last(drbd); return b == `{"r1":"new leader"}` }, 10*time.Second, 10*time.Millisecond)
	pub(pool, 4, 12, `{"grant":"deposed, late"}`) // newer revision, older token
	pub(drbd, 9, 13, `{"r1":"marker"}`)
	require.Eventually(t, func() bool { b, _ := rec.last(drbd); return b == `{"r1":"marker"}` }, 10*time.Second, 10*time.Millisecond)
	b, n := rec.last(pool)
	assert.Equal(t, `{"grant":"old leader"}`, b, "the deposed leader's late desired state reached the reconciler")
	assert.Equal(t, 1, n)
	stop()

	rec, stop = start()
	defer stop()
	require.Eventually(t, func() bool { _, n := rec.last(pool); return n > 0 }, 10*time.Second, 10*time.Millisecond)
	b, _ = rec.last(pool)
	assert.Equal(t, `{"grant":"old leader"}`, b, "after a restart the stream's latest (the deposed leader's) must not be taken")
}

// agentOnEmbedded starts an embedded NATS server with Cairn's streams and returns its
// JetStream and start, which runs agent n1 (recording what it carries out, its revision
// marks in one directory for the whole test) until the returned stop.
func agentOnEmbedded(t *testing.T) (jetstream.JetStream, func() (*bodyRec, context.CancelFunc)) {
	t.Helper()
	srv, err := server.StartEmbedded(server.EmbeddedOptions{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	names := events.NewNames("")
	for _, cfg := range names.StreamConfigs(events.StreamOptions{}) {
		_, err := js.CreateStream(context.Background(), cfg)
		require.NoError(t, err)
	}
	revDir := t.TempDir()
	return js, func() (*bodyRec, context.CancelFunc) {
		rec := &bodyRec{seen: map[string][]string{}}
		a, err := agents.New(nc, agents.Options{Node: "n1", Names: names, Reconciler: rec, RevisionDir: revDir, HeartbeatInterval: time.Hour, Log: zerolog.Nop()})
		require.NoError(t, err)
		actx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(actx) }()
		return rec, func() { cancel(); <-done }
	}
}
