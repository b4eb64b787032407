package events

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var metricGroupSize = promauto.NewHistogram(prometheus.HistogramOpts{
	Name: "cairn_command_group_commands", Help: "Commands appended together in one atomic batch (group commit).",
	Buckets: []float64{1, 2, 4, 8, 16, 32, 64}})

// GroupAppender is a group commit for admission. A command of several events is one
// JetStream atomic batch, and on an R1 file stream every batch is staged in a file
// store of its own (~5-15 ms, whatever its size): commands that arrive while one batch
// is on its way are appended together in the next one, all or nothing, each still
// conditional on exactly its own read set. A command of one event publishes alone (one
// message costs ~55 us). When a grouped append fails, its commands are appended one
// by one, so each gets its own answer (its boundary moved, or it was a duplicate).
type GroupAppender struct {
	store   *Store
	timeout time.Duration

	mu      sync.Mutex
	queue   []*pendingAppend
	leading bool
}

type pendingAppend struct {
	Pending
	done   chan struct{}
	stored []Raw
	err    error
}

// NewGroupAppender groups the appends of store; timeout bounds each batch.
func NewGroupAppender(store *Store, timeout time.Duration) *GroupAppender {
	return &GroupAppender{store: store, timeout: timeout}
}

// Append stores one command's envelopes conditional on exp (see Store.Append: the same
// results and errors), grouped with the commands appending at the same time.
func (g *GroupAppender) Append(ctx context.Context, exp Expect, envs []Envelope) ([]Raw, error) {
	if len(envs) < 2 || exp.Kind != ExpectChecks {
		return g.store.Append(ctx, exp, envs)
	}
	p := &pendingAppend{Pending: Pending{Expect: exp, Envs: envs}, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.leading {
		// The leader appends it with the next group.
		g.mu.Unlock()
		select {
		case <-p.done:
			return p.stored, p.err
		case <-ctx.Done():
			// The group may still append it: the caller resolves that through the
			// command id, as after any transport error.
			return nil, ctx.Err()
		}
	}
	g.leading = true
	for {
		group := g.queue
		g.queue = nil
		g.mu.Unlock()
		g.flush(group)
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.leading = false
			g.mu.Unlock()
			return p.stored, p.err
		}
	}
}

// flush appends a group: in batches of commands that may go together (in order,
// none checking what an earlier one writes, within the batch size), each batch of
// several falling back to one by one when it fails.
func (g *GroupAppender) flush(group []*pendingAppend) {
	for len(group) > 0 {
		n, msgs := 1, len(group[0].Envs)
		written := subjectsOf(group[0].Envs)
		for n < len(group) {
			next := group[n]
			if msgs+len(next.Envs) > MaxGroupMessages || Overlaps(next.Expect, written) {
				break
			}
			msgs += len(next.Envs)
			written = append(written, subjectsOf(next.Envs)...)
			n++
		}
		g.appendBatch(group[:n])
		group = group[n:]
	}
}

func (g *GroupAppender) appendBatch(batch []*pendingAppend) {
	metricGroupSize.Observe(float64(len(batch)))
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if len(batch) > 1 {
		pending := make([]Pending, len(batch))
		for i, p := range batch {
			pending[i] = p.Pending
		}
		if stored, err := g.store.AppendGroup(ctx, pending); err == nil {
			for i, p := range batch {
				p.stored = stored[i]
				close(p.done)
			}
			return
		}
	}
	for _, p := range batch {
		p.stored, p.err = g.store.Append(ctx, p.Expect, p.Envs)
		close(p.done)
	}
}

func subjectsOf(envs []Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.Subject
	}
	return out
}
