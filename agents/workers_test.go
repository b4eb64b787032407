package agents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

type fakeRec struct {
	mu      sync.Mutex
	calls   map[string][]string
	running atomic.Int32
	peak    atomic.Int32
	block   chan struct{}
	fail    map[string]int
}

func (f *fakeRec) Reconcile(ctx context.Context, subject string, data []byte) error {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[subject] = append(f.calls[subject], string(data))
	if f.fail[subject] > 0 {
		f.fail[subject]--
		return errors.New("boom")
	}
	return nil
}

func (f *fakeRec) get(s string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls[s]...)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWorkersCoalesceAndBound(t *testing.T) {
	rec := &fakeRec{calls: map[string][]string{}, block: make(chan struct{})}
	w := newWorkers(3, rec, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx)
	for i := range 10 {
		w.put(fmt.Sprintf("s%d", i), []byte("v1"))
	}
	waitUntil(t, func() bool { return rec.running.Load() == 3 })
	// while s0..s2 run, s0 gets three newer messages: they coalesce into one more call
	for _, v := range []string{"v2", "v3", "v4"} {
		w.put("s0", []byte(v))
	}
	close(rec.block)
	waitUntil(t, func() bool {
		q, r, _, _ := w.pending()
		return q == 0 && r == 0
	})
	if p := rec.peak.Load(); p > 3 {
		t.Fatalf("%d reconciles at once, bound is 3", p)
	}
	if got := rec.get("s0"); len(got) != 2 || got[1] != "v4" {
		t.Fatalf("s0 reconciled with %v, want [v1 v4] (latest wins)", got)
	}
	for i := 1; i < 10; i++ {
		if got := rec.get(fmt.Sprintf("s%d", i)); len(got) != 1 {
			t.Fatalf("s%d reconciled %d times", i, len(got))
		}
	}
	// a full round reconciles every subject again
	w.all()
	waitUntil(t, func() bool { return len(rec.get("s9")) == 2 })
}

func TestWorkersRetryFailuresAndForgetRemovals(t *testing.T) {
	rec := &fakeRec{calls: map[string][]string{}, fail: map[string]int{"bad": 1}}
	w := newWorkers(2, rec, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.run(ctx)
	w.put("bad", []byte("x"))
	w.put("gone", []byte{})
	waitUntil(t, func() bool { return len(rec.get("bad")) == 2 }) // retried after ~1 s
	// subjects() leaves out empty desired states anyway: look at what the workers keep,
	// which a reconnect's full round reconciles again.
	held := func() map[string]bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		out := map[string]bool{}
		for s := range w.latest {
			out[s] = true
		}
		return out
	}
	waitUntil(t, func() bool { return len(rec.get("gone")) == 1 && !held()["gone"] })
	if h := held(); len(h) != 1 || !h["bad"] {
		t.Fatalf("held %v: a torn-down subject is forgotten", h)
	}
	if s := w.subjects(); len(s) != 1 || s[0] != "bad" {
		t.Fatalf("subjects %v", s)
	}
}
