package agents

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var (
	metricReconciles = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_reconciles_total",
		Help: "Desired-state subjects reconciled, by outcome (ok, error)."}, []string{"outcome"})
	metricQueued = promauto.NewGauge(prometheus.GaugeOpts{Name: "cairn_agent_reconcile_queue",
		Help: "Desired-state subjects waiting for a worker."})
)

// workers reconciles subjects concurrently, at most n at a time, one call per subject
// at a time. The latest desired state wins: messages arriving while a subject is
// being reconciled coalesce into one more call with the newest data. A failed call is
// retried with a per-subject backoff (1 s doubling to 30 s) until it succeeds or new
// data arrives.
type workers struct {
	n   int
	rec Reconciler
	log zerolog.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	latest  map[string][]byte
	queued  map[string]bool
	running map[string]bool
	again   map[string]bool
	backoff map[string]time.Duration
	queue   []string
	// progress of the current full reconcile
	roundTotal, roundDone int
}

func newWorkers(n int, rec Reconciler, log zerolog.Logger) *workers {
	w := &workers{n: n, rec: rec, log: log, latest: map[string][]byte{}, queued: map[string]bool{},
		running: map[string]bool{}, again: map[string]bool{}, backoff: map[string]time.Duration{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// put records the latest desired state of subject and schedules it.
func (w *workers) put(subject string, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest[subject] = data
	delete(w.backoff, subject)
	w.scheduleLocked(subject)
}

// holds reports whether the workers hold a desired state (even an empty one) for
// subject.
func (w *workers) holds(subject string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.latest[subject]
	return ok
}

// all schedules every known subject again (level-triggered: after a reconnect).
func (w *workers) all() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roundTotal, w.roundDone = 0, 0
	for s := range w.latest {
		w.scheduleLocked(s)
		w.roundTotal++
	}
}

func (w *workers) scheduleLocked(s string) {
	if w.running[s] {
		w.again[s] = true
		return
	}
	if !w.queued[s] {
		w.queued[s] = true
		w.queue = append(w.queue, s)
		metricQueued.Set(float64(len(w.queue)))
		w.cond.Signal()
	}
}

// subjects returns the subjects holding a non-empty desired state.
func (w *workers) subjects() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.latest))
	for s, d := range w.latest {
		if len(d) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func (w *workers) pending() (queued, running, done, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue), len(w.running), w.roundDone, w.roundTotal
}

// run starts the workers and the progress log; they stop when ctx ends.
func (w *workers) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	}()
	for range w.n {
		go w.loop(ctx)
	}
	go w.progress(ctx)
}

func (w *workers) loop(ctx context.Context) {
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && ctx.Err() == nil {
			w.cond.Wait()
		}
		if ctx.Err() != nil {
			w.mu.Unlock()
			return
		}
		s := w.queue[0]
		w.queue = w.queue[1:]
		metricQueued.Set(float64(len(w.queue)))
		delete(w.queued, s)
		w.running[s] = true
		data := w.latest[s]
		w.mu.Unlock()

		err := w.rec.Reconcile(ctx, s, data)

		w.mu.Lock()
		delete(w.running, s)
		w.roundDone++
		if err == nil {
			metricReconciles.WithLabelValues("ok").Inc()
			delete(w.backoff, s)
			if len(data) == 0 && !w.again[s] {
				if cur, ok := w.latest[s]; ok && len(cur) == 0 {
					delete(w.latest, s) // torn down
				}
			}
		} else if ctx.Err() == nil {
			metricReconciles.WithLabelValues("error").Inc()
			b := w.backoff[s]
			b = min(max(2*b, time.Second), 30*time.Second)
			w.backoff[s] = b
			w.log.Warn().Err(err).Str("subject", s).Dur("retry_in_ms", b).Msg("reconcile failed")
			time.AfterFunc(b, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.backoff[s] == b {
					w.scheduleLocked(s)
				}
			})
		}
		if w.again[s] {
			delete(w.again, s)
			w.scheduleLocked(s)
		}
		w.mu.Unlock()
	}
}

// progress logs every 2 s while subjects wait: how many of the current round are
// done, queued and running.
func (w *workers) progress(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	start := time.Now()
	lastDone := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		q, r, done, total := w.pending()
		if q == 0 && r == 0 {
			if lastDone >= 0 {
				w.log.Info().Int("reconciled", done).Dur("elapsed_ms", time.Since(start)).Msg("reconcile caught up")
				lastDone = -1
			}
			start = time.Now()
			continue
		}
		lastDone = done
		w.log.Info().Int("done", done).Int("round", total).Int("queued", q).Int("running", r).
			Dur("elapsed_ms", time.Since(start)).Msg("reconciling")
	}
}
