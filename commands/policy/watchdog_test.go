package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecideLiveness(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timeout := 10 * time.Second
	node := func(state string, since time.Time) projections.Node {
		return projections.Node{Spec: projections.NodeSpec{Name: "n1"}, Status: projections.NodeStatus{State: state, Since: since, Seq: 5}}
	}
	cases := []struct {
		name     string
		node     projections.Node
		lastSeen *time.Time
		started  time.Time
		now      time.Time
		want     string // new state, "" for none
	}{
		{"online and heard recently", node("online", t0), ptr(t0.Add(5 * time.Second)), t0, t0.Add(12 * time.Second), ""},
		{"online, heartbeat too old", node("online", t0), ptr(t0.Add(1 * time.Second)), t0, t0.Add(12 * time.Second), "offline"},
		{"online, never heard, within grace after start", node("online", t0), nil, t0.Add(5 * time.Second), t0.Add(12 * time.Second), ""},
		{"online, never heard, grace over", node("online", t0), nil, t0, t0.Add(11 * time.Second), "offline"},
		{"just added, never heard", node("online", t0.Add(8*time.Second)), nil, t0, t0.Add(12 * time.Second), ""},
		{"offline, heartbeat after going offline", node("offline", t0), ptr(t0.Add(3 * time.Second)), t0, t0.Add(4 * time.Second), "online"},
		{"offline, heartbeat from before", node("offline", t0.Add(5*time.Second)), ptr(t0.Add(3 * time.Second)), t0, t0.Add(6 * time.Second), ""},
		{"offline, never heard", node("offline", t0), nil, t0, t0.Add(60 * time.Second), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := map[string]time.Time{}
			if c.lastSeen != nil {
				seen["n1"] = *c.lastSeen
			}
			got := policy.DecideLiveness([]projections.Node{c.node}, seen, c.started, c.now, timeout)
			if c.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, c.want, got[0].State)
			assert.Equal(t, uint64(5), got[0].StatusSeq)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func waitState(t *testing.T, s *server.Server, node, state string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		v, err := s.DB.Read()
		require.NoError(t, err)
		n, _, err := v.Node(node)
		v.Close()
		require.NoError(t, err)
		if n.Status.State == state {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %s not %s within %s", node, state, within)
}

func TestWatchdogFollowsAgentHeartbeats(t *testing.T) {
	s := servertest.Start(t, func(c *server.Config) { c.HeartbeatTimeout = 600 * time.Millisecond })
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	require.True(t, servertest.Submit(s, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`).OK)
	require.True(t, servertest.Submit(s, "node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`).OK)

	startAgent := func(node string) context.CancelFunc {
		nc := servertest.Client(t, s)
		a, err := agents.New(nc, agents.Options{Node: node, Names: events.NewNames(""), HeartbeatInterval: 100 * time.Millisecond, Log: zerolog.Nop()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = a.Run(ctx) }()
		return cancel
	}
	stop1 := startAgent("n1")
	defer stop1()
	// n2 has no agent: offline after the timeout; n1 stays online
	waitState(t, s, "n2", "offline", 3*time.Second)
	waitState(t, s, "n1", "online", time.Second)

	stop1()
	waitState(t, s, "n1", "offline", 3*time.Second)
	stop2 := startAgent("n2")
	defer stop2()
	waitState(t, s, "n2", "online", 3*time.Second)

	var actors []string
	require.NoError(t, s.Store.Audit(context.Background(), events.Range{}, events.Match{Type: "node.state-changed"}, 0, func(r events.Record) bool {
		actors = append(actors, r.Actor)
		return true
	}))
	assert.Len(t, actors, 3)
	for _, a := range actors {
		assert.Equal(t, "watchdog", a)
	}
}

func TestAgentReceivesLatestDesiredStatePerSubject(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	ctx := context.Background()
	names := events.NewNames("")
	for i, subj := range []string{names.Node("n1", "drbd", "r1"), names.Node("n1", "drbd", "r1"), names.Node("n1", "zpool", "tank"), names.Node("n2", "drbd", "r9")} {
		_, err := s.JS.Publish(ctx, subj, []byte{byte('a' + i)})
		require.NoError(t, err)
	}
	a, err := agents.New(nc, agents.Options{Node: "n1", Names: names, HeartbeatInterval: time.Hour, Log: zerolog.Nop()})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = a.Run(rctx) }()
	require.Eventually(t, func() bool { return len(a.Desired()) == 2 }, 3*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"cairn.node.n1.drbd.r1", "cairn.node.n1.zpool.tank"}, a.Desired())
}
