package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// TestBackgroundRunsAPanickingPartAgain (issue 11): a serve part that panics is logged
// and run again instead of killing the process or staying stopped; Close ends it.
func TestBackgroundRunsAPanickingPartAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: Config{Log: zerolog.Nop()}, runCtx: ctx}
	var runs atomic.Int32
	s.background(func() {
		if runs.Add(1) < 3 {
			panic("a bug")
		}
		<-ctx.Done()
	})
	require.Eventually(t, func() bool { return runs.Load() == 3 }, 5*time.Second, 10*time.Millisecond)
	cancel()
	done := make(chan struct{})
	go func() { s.parts.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the part did not end after stopping")
	}
}

// TestRecoveringDropsAPanickingMessage: a NATS message handler that panics (heartbeats,
// attach requests) drops that message and the process goes on.
func TestRecoveringDropsAPanickingMessage(t *testing.T) {
	calls := 0
	h := recovering(zerolog.Nop(), "test", func(m *nats.Msg) {
		calls++
		if string(m.Data) == "bad" {
			panic("a bug")
		}
	})
	require.NotPanics(t, func() { h(&nats.Msg{Subject: "s", Data: []byte("bad")}) })
	h(&nats.Msg{Subject: "s", Data: []byte("good")})
	require.Equal(t, 2, calls)
}
