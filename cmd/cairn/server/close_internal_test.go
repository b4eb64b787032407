package server

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Close must not close the views store under a part of serve that is still using it
// (the dispatcher, status folding, the watchdog, commands being answered): a read of
// a closed Pebble store panics the process.
func TestCloseWaitsForItsPartsBeforeClosingTheViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{DataDir: t.TempDir(), NATSListen: "127.0.0.1:0", HTTPListen: "-", Log: zerolog.Nop()})
	require.NoError(t, err)

	release := make(chan struct{})
	readErr := make(chan error, 1)
	s.background(func() {
		<-release // a part finishing its last round after shutdown began
		v, err := s.DB.Read()
		if err == nil {
			_, _, err = v.Cluster()
			v.Close()
		}
		readErr <- err
	})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a part was still running")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	assert.NoError(t, <-readErr, "the views were still open for the part's last read")
	select {
	case err := <-closed:
		assert.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return after the part ended")
	}
}
