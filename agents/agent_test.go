package agents_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

type countRec struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countRec) Reconcile(_ context.Context, subject string, _ []byte) error {
	c.mu.Lock()
	c.n[subject]++
	c.mu.Unlock()
	return nil
}

func (c *countRec) count(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[s]
}

// Level-triggered: on start every subject's latest desired state is reconciled, and
// after the connection to NATS is lost and comes back, every subject again.
func TestAgentReconcilesEverythingAgainAfterReconnect(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv, err := server.StartEmbedded(server.EmbeddedOptions{StoreDir: dir, Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	names := events.NewNames("")
	nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	for _, cfg := range names.StreamConfigs(events.StreamOptions{}) {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	r1, r2 := names.Node("n1", "drbd", "r1"), names.Node("n1", "drbd", "r2")
	for _, s := range []string{r1, r2, r1} {
		if _, err := js.Publish(ctx, s, []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	rec := &countRec{n: map[string]int{}}
	a, err := agents.New(nc, agents.Options{Node: "n1", Names: names, Reconciler: rec, HeartbeatInterval: 100 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = a.Run(actx) }()
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: r1 %d, r2 %d reconciles", what, rec.count(r1), rec.count(r2))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("start", func() bool { return rec.count(r1) == 1 && rec.count(r2) == 1 })
	srv.Shutdown()
	srv.WaitForShutdown()
	srv, err = server.StartEmbedded(server.EmbeddedOptions{StoreDir: dir, Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	wait("after the reconnect", func() bool { return rec.count(r1) >= 2 && rec.count(r2) >= 2 })
	if got := a.Desired(); len(got) != 2 {
		t.Fatalf("desired subjects %v", got)
	}
}
