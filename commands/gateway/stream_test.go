package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stalledWriter is a client that stops reading: every write blocks until released.
type stalledWriter struct {
	mu       sync.Mutex
	header   http.Header
	body     strings.Builder
	released chan struct{}
	writes   int
}

func (s *stalledWriter) Header() http.Header { return s.header }
func (s *stalledWriter) WriteHeader(int)     {}
func (s *stalledWriter) Flush()              {}
func (s *stalledWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.writes++
	first := s.writes <= 2 // the opening comment and the first event go out
	s.mu.Unlock()
	if !first {
		<-s.released
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.WriteString(string(p))
}

// A subscriber that stops reading is cut off once it is StreamBuffer events behind: the
// stream's reader stops (its memory is bounded by the buffer, whatever comes after), and
// the subscriber is told where to resume once it reads again.
func TestASlowSubscriberIsCutOff(t *testing.T) {
	js := testtools.JetStream(t)
	names := events.NewNames("")
	ctx := context.Background()
	require.NoError(t, events.EnsureStreams(ctx, js, names, events.StreamOptions{}))
	store := events.NewStore(js, names)
	for i := range 20 {
		envs, err := events.Seal(events.Meta{CommandID: fmt.Sprint("c", i), Actor: "test", OccurredAt: time.Now()},
			[]events.Draft{{Subject: names.Event("node", fmt.Sprint("n", i)), Payload: &events.NodeAdded{Name: fmt.Sprint("n", i), Host: "h", Address: "10.0.0.1", Role: "storage"}}})
		require.NoError(t, err)
		_, err = store.Append(ctx, events.Expect{Kind: events.ExpectSubject}, envs)
		require.NoError(t, err)
	}
	g := &Gateway{Store: store, StreamBuffer: 4}
	w := &stalledWriter{header: http.Header{}, released: make(chan struct{})}
	r := httptest.NewRequest(http.MethodGet, "/cairn/v1/events/stream?from_seq=1", nil)
	done := make(chan struct{})
	go func() { defer close(done); g.streamEvents(w, r) }()
	time.Sleep(500 * time.Millisecond) // the reader fills the buffer and stops
	close(w.released)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a slow subscriber was never cut off")
	}
	out := w.body.String()
	assert.Contains(t, out, "event: error")
	assert.Contains(t, out, "fell 4 messages behind and was cut off; reconnect with Last-Event-ID:")
	assert.Less(t, strings.Count(out, "event: node.added"), 20, "every event went out: nothing was cut")
	assert.GreaterOrEqual(t, strings.Count(out, "event: node.added"), 2)
}

// An idle stream sends a keepalive comment (proxies close silent connections).
func TestAnIdleStreamSendsKeepalives(t *testing.T) {
	js := testtools.JetStream(t)
	names := events.NewNames("")
	require.NoError(t, events.EnsureStreams(context.Background(), js, names, events.StreamOptions{}))
	defer func(d time.Duration) { streamKeepalive = d }(streamKeepalive)
	streamKeepalive = 50 * time.Millisecond
	g := &Gateway{Store: events.NewStore(js, names)}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	w := httptest.NewRecorder()
	g.streamEvents(w, httptest.NewRequest(http.MethodGet, "/cairn/v1/events/stream", nil).WithContext(ctx))
	assert.GreaterOrEqual(t, strings.Count(w.Body.String(), ": keepalive\n\n"), 3, w.Body.String())
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
}

// The views of past sequences are built once and the last two kept (atViewsKept, as
// docs/operations.md says): asking again for a kept one builds nothing, a third one
// evicts the oldest.
func TestPastViewsAreBuiltOnceAndTwoKept(t *testing.T) {
	builds := map[uint64]int{}
	g := &Gateway{At: func(ctx context.Context, seq uint64) (*projections.DB, error) {
		builds[seq]++
		return projections.OpenInMem()
	}}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, seq := range []uint64{1, 2, 1, 2, 3, 1} {
		_, err := g.viewsAt(r, seq)
		require.NoError(t, err)
	}
	assert.Equal(t, map[uint64]int{1: 2, 2: 1, 3: 1}, builds, "1 was evicted by 3 and built again; 2 was kept")
	for _, v := range g.atViews {
		_ = v.db.Close()
	}
}
