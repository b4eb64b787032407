package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// TestBackgroundRunsAPanickingPartAgain (issue 11): a serve part that panics is logged
// and run again instead of killing the process or staying stopped; Close ends it.
func TestBackgroundRunsAPanickingPartAgain(t *testing.T) {
	s := &Server{cfg: Config{Log: zerolog.Nop()}}
	var runs atomic.Int32
	s.background(func() {
		if runs.Add(1) < 3 {
			panic("a bug")
		}
		<-s.stopping()
	})
	require.Eventually(t, func() bool { return runs.Load() == 3 }, 5*time.Second, 10*time.Millisecond)
	s.stopping()
	close(s.stopCh)
	done := make(chan struct{})
	go func() { s.parts.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the part did not end after stopping")
	}
}
