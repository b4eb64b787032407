package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var (
	published = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_dispatch_published_total",
		Help: "Desired-state messages published to nodes, by kind (desired, removal)."}, []string{"kind"})
	dispatchErrors = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_dispatch_errors_total",
		Help: "Dispatch rounds that failed and will be retried."})
	metricRepublished = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_dispatch_deposed_republished_total",
		Help: "Desired-state subjects published again because a deposed leader's message (an older lease token) landed on them after this serve took the lease."})
)

// Dispatcher publishes queued desired state. It is crash-safe: outbox entries are
// deleted only after JetStream acknowledged every message of their batch, so a crash
// republishes (latest per subject, harmless) and never loses a change. Every message
// carries the views' sequence it was computed from (events.RevisionHeader), so that
// agents drop a desired state older than one they have seen.
type Dispatcher struct {
	DB         *projections.DB
	Projector  *projections.Projector
	JS         jetstream.JetStream
	Names      events.Names
	Controller drbd.Options // DRBD options below the deployment's own (controller.modify)
	Log        zerolog.Logger
	BatchSize  int           // outbox entries per round (events.MaxGroupMessages)
	Idle       time.Duration // poll interval when nothing moves (1 s)
	// Fence returns the side-effect lease's fencing token and whether this serve may act
	// now (cmd/cairn/server/lease); nil: always (a single serve, tests). It is checked
	// right before each atomic batch is sent: a round publishes nothing more once the
	// lease is gone (or its token changed), and every message carries the token
	// (events.LeaseHeader).
	Fence func() (uint64, bool)
	// PublishTimeout bounds each batch's publish (DefaultPublishTimeout): a side effect
	// is never left pending on a stalled server for longer.
	PublishTimeout time.Duration

	epoch string // the events stream's creation time (events.EpochHeader), read by Round
}

// DefaultPublishTimeout is Dispatcher.PublishTimeout's default.
const DefaultPublishTimeout = 2 * time.Second

// errNotLeading stops a round when this serve no longer holds the side-effect lease.
var errNotLeading = errors.New("dispatch: this serve does not hold the lease")

// Run dispatches until ctx ends (or, with a Fence, until a round finds the lease gone).
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.BatchSize <= 0 {
		d.BatchSize = events.MaxGroupMessages
	}
	if d.Idle <= 0 {
		d.Idle = time.Second
	}
	backoff := 100 * time.Millisecond
	// Safety-relevant orders first: a new lease holder publishes every pool's grant
	// before the backlog (which may be 300,000 desired states long).
	for ctx.Err() == nil {
		_, err := d.PublishPools(ctx)
		if err == nil || errors.Is(err, errNotLeading) {
			break
		}
		d.Log.Warn().Err(err).Msg("publishing the pools' grants first failed; retrying")
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	if token, ok := d.fence(); ok && token != 0 {
		// The watch starts before the first publish (and looks a little back): a late
		// message stored right after the lease changed hands is not missed.
		if cons, err := d.deposedConsumer(ctx); err != nil {
			d.Log.Warn().Err(err).Msg("watching for a deposed leader's desired state: no consumer")
		} else {
			wctx, stopWatch := context.WithCancel(ctx)
			defer stopWatch()
			go d.watchDeposed(wctx, token, cons)
		}
	}
	for ctx.Err() == nil {
		seen := d.Projector.Queued()
		n, err := d.Round(ctx)
		if err != nil && (ctx.Err() != nil || errors.Is(err, errNotLeading)) {
			return nil // the lease is gone (the caller stops this Run) or ctx ended
		}
		if err != nil {
			dispatchErrors.Inc()
			d.Log.Warn().Err(err).Dur("retry_in_ms", backoff).Msg("dispatch failed")
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if n > 0 {
			continue // more may be queued
		}
		wctx, cancel := context.WithTimeout(ctx, d.Idle)
		_ = d.Projector.WaitQueuedBeyond(wctx, seen)
		cancel()
	}
	return nil
}

// Round publishes one batch of the outbox and returns how many messages it sent.
func (d *Dispatcher) Round(ctx context.Context) (int, error) {
	b, err := d.DB.Outbox(d.BatchSize)
	if err != nil {
		return 0, err
	}
	defer b.View.Close()
	if len(b.Entries) == 0 {
		return 0, nil
	}
	if err := d.readEpoch(ctx); err != nil {
		return 0, err
	}
	r, err := newRound(b.View)
	if err != nil {
		return 0, err
	}
	token, ok := d.fence()
	if !ok {
		return 0, errNotLeading
	}
	msgs, removals, err := d.messages(r, b.Entries, token)
	if err != nil {
		return 0, err
	}
	if err := d.publish(ctx, msgs, token); err != nil {
		return 0, err
	}
	if err := d.DB.Ack(b); err != nil {
		return 0, err
	}
	published.WithLabelValues("desired").Add(float64(len(msgs) - removals))
	published.WithLabelValues("removal").Add(float64(removals))
	d.Log.Debug().Int("messages", len(msgs)).Int("removals", removals).Uint64("seq", b.View.Seq()).Msg("dispatched")
	return len(msgs), nil
}

// newRound reads what a round renders from on v.
func newRound(v *projections.View) (*round, error) {
	all, err := v.Nodes()
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]projections.NodeSpec, len(all))
	for _, n := range all {
		nodes[n.Spec.Name] = n.Spec
	}
	return &round{view: v, nodes: nodes}, nil
}

// watchDeposed keeps the stream's latest desired state from going back while this serve
// leads with token: every desired-state message stored with an older lease token (a
// deposed leader's publish that landed late, after this serve took over) gets its
// subject published again from the current views, with token, once the views are at
// least at the message's revision (Cairn-Revision: never older than what it replaces).
// It reads the headers of the nodes stream (cons: from shortly before Run started, right
// after the lease was taken) until ctx ends (the lease is lost). Agents drop such a message anyway (they
// fence by token); this makes the stream agree, so an agent that starts without its
// revision marks takes the right one.
func (d *Dispatcher) watchDeposed(ctx context.Context, token uint64, cons jetstream.Consumer) {
	var mu sync.Mutex
	stale := map[projections.OutboxEntry]uint64{} // the late message's revision
	cc, err := cons.Consume(func(m jetstream.Msg) {
		t, err := strconv.ParseUint(m.Headers().Get(events.LeaseHeader), 10, 64)
		if err != nil || t == 0 || t >= token {
			return
		}
		node, kind, id, ok := d.Names.ParseNode(m.Subject())
		if !ok {
			return
		}
		rev, _ := strconv.ParseUint(m.Headers().Get(events.RevisionHeader), 10, 64)
		e := projections.OutboxEntry{Node: node, Kind: kind, ID: id}
		mu.Lock()
		stale[e] = max(stale[e], rev)
		mu.Unlock()
	})
	if err != nil {
		d.Log.Warn().Err(err).Msg("watching for a deposed leader's desired state: consume")
		return
	}
	defer cc.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		seq := d.Projector.Applied() // the views' sequence, at least (republish reads them after)
		mu.Lock()
		var entries []projections.OutboxEntry
		for e, rev := range stale {
			if rev <= seq { // the views are at least as new as the late message
				entries = append(entries, e)
				delete(stale, e)
			}
		}
		mu.Unlock()
		if len(entries) == 0 {
			continue
		}
		if err := d.republish(ctx, entries); err != nil {
			d.Log.Warn().Err(err).Int("subjects", len(entries)).Msg("republishing what a deposed leader overwrote failed")
			mu.Lock()
			for _, e := range entries {
				stale[e] = max(stale[e], 0)
			}
			mu.Unlock()
			continue
		}
		metricRepublished.Add(float64(len(entries)))
		d.Log.Warn().Int("subjects", len(entries)).Msg("a deposed leader's desired state landed after the handover: published again from the views")
	}
}

// deposedLookback is how far before Run started watchDeposed reads the nodes stream:
// a deposed leader's message stored between the handover and Run's start is seen too
// (a message of the old leader from before the handover it republishes from views at
// least as new: harmless).
const deposedLookback = 2 * time.Second

// deposedConsumer is watchDeposed's consumer: the nodes stream's headers from
// deposedLookback ago on.
func (d *Dispatcher) deposedConsumer(ctx context.Context) (jetstream.Consumer, error) {
	st, err := d.JS.Stream(ctx, d.Names.NodesStream())
	if err != nil {
		return nil, err
	}
	start := time.Now().Add(-deposedLookback)
	return st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true,
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
}

// republish publishes entries from the current views (under the fence).
func (d *Dispatcher) republish(ctx context.Context, entries []projections.OutboxEntry) error {
	v, err := d.DB.Read()
	if err != nil {
		return err
	}
	defer v.Close()
	if err := d.readEpoch(ctx); err != nil {
		return err
	}
	r, err := newRound(v)
	if err != nil {
		return err
	}
	token, ok := d.fence()
	if !ok {
		return errNotLeading
	}
	msgs, _, err := d.messages(r, entries, token)
	if err != nil {
		return err
	}
	return d.publish(ctx, msgs, token)
}

// fence is Fence's answer (token 0 and true without a Fence).
func (d *Dispatcher) fence() (uint64, bool) {
	if d.Fence == nil {
		return 0, true
	}
	return d.Fence()
}

// messages renders entries on r's view: each node's desired state (nil body: a
// removal), with the view's sequence, the epoch and the lease token as headers.
func (d *Dispatcher) messages(r *round, entries []projections.OutboxEntry, token uint64) (msgs []*nats.Msg, removals int, err error) {
	msgs = make([]*nats.Msg, 0, len(entries))
	revision := strconv.FormatUint(r.view.Seq(), 10)
	for _, e := range entries {
		body, err := d.body(r, e)
		if err != nil {
			return nil, 0, err
		}
		if body == nil {
			removals++
		}
		// The revision rides along with removals too (an empty body with the header):
		// a tombstone an agent remembers, so an older desired state published after it
		// (by a serve whose views lag) is dropped.
		msg := &nats.Msg{Subject: d.Names.Node(e.Node, e.Kind, e.ID), Data: body, Header: nats.Header{}}
		msg.Header.Set(events.RevisionHeader, revision)
		msg.Header.Set(events.EpochHeader, d.epoch)
		if token != 0 {
			msg.Header.Set(events.LeaseHeader, strconv.FormatUint(token, 10))
		}
		msgs = append(msgs, msg)
	}
	return msgs, removals, nil
}

// PublishPools publishes the desired pool state of every pool's nodes (the grant to its
// owner, nothing to the others) from the current views, ahead of the outbox: Run does
// it first whenever it starts (a new lease holder), so a pool's grant never waits
// behind a long backlog. The outbox still publishes the same later (the latest per
// subject wins). Returns how many messages it sent.
func (d *Dispatcher) PublishPools(ctx context.Context) (int, error) {
	v, err := d.DB.Read()
	if err != nil {
		return 0, err
	}
	defer v.Close()
	if err := d.readEpoch(ctx); err != nil {
		return 0, err
	}
	pools, err := v.Pools()
	if err != nil || len(pools) == 0 {
		return 0, err
	}
	var entries []projections.OutboxEntry
	for _, p := range pools {
		for _, n := range p.Nodes {
			entries = append(entries, projections.OutboxEntry{Node: n, Kind: projections.KindZpool, ID: p.Name})
		}
	}
	token, ok := d.fence()
	if !ok {
		return 0, errNotLeading
	}
	msgs, _, err := d.messages(&round{view: v}, entries, token)
	if err != nil {
		return 0, err
	}
	if err := d.publish(ctx, msgs, token); err != nil {
		return 0, err
	}
	published.WithLabelValues("desired").Add(float64(len(msgs)))
	return len(msgs), nil
}

// readEpoch reads the events stream's creation time once (events.EpochHeader).
func (d *Dispatcher) readEpoch(ctx context.Context) error {
	if d.epoch != "" {
		return nil
	}
	st, err := d.JS.Stream(ctx, d.Names.EventsStream())
	if err != nil {
		return fmt.Errorf("read %s: %w", d.Names.EventsStream(), err)
	}
	d.epoch = strconv.FormatInt(st.CachedInfo().Created.UnixNano(), 10)
	return nil
}

// publish stores a round's messages as atomic batches of at most
// events.MaxGroupMessages: one file store and one acknowledgement per batch instead of
// one fsynced write per message (a cold start of 300,000 replicas published about
// 2,200 messages a second one by one). A batch is stored whole or not at all; a round
// that fails is published again whole (the latest per subject wins, so that is
// harmless). The fence is checked again before each batch (token: the one the round's
// messages carry), and each batch's publish is bounded by PublishTimeout.
func (d *Dispatcher) publish(ctx context.Context, msgs []*nats.Msg, token uint64) error {
	timeout := d.PublishTimeout
	if timeout <= 0 {
		timeout = DefaultPublishTimeout
	}
	for len(msgs) > 0 {
		n := min(len(msgs), events.MaxGroupMessages)
		batch := msgs[:n]
		msgs = msgs[n:]
		if d.Fence != nil {
			if now, ok := d.Fence(); !ok || now != token {
				return errNotLeading
			}
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		var err error
		if n == 1 {
			_, err = d.JS.PublishMsg(pctx, batch[0])
		} else {
			_, err = events.PublishBatch(pctx, d.JS, batch)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("publish %d desired-state messages (first %s): %w", n, batch[0].Subject, err)
		}
	}
	return nil
}

// round is what one round renders from: its view, the nodes' specs, and the
// deployment's DRBD options once read.
type round struct {
	view       *projections.View
	nodes      map[string]projections.NodeSpec
	controller *projections.ControllerOptions
}

// body is the message for one entry: the node's desired state, or nil (empty) when the
// node no longer holds the resource or the pool's grant.
func (d *Dispatcher) body(r *round, e projections.OutboxEntry) ([]byte, error) {
	v := r.view
	switch e.Kind {
	case projections.KindDRBD:
		return d.drbdBody(r, e)
	case projections.KindSP:
		sp, ok, err := v.StoragePool(e.Node, e.ID)
		if err != nil || !ok {
			return nil, err // gone: an empty message, the agent stops reporting it
		}
		return json.Marshal(PoolSpec(sp))
	case projections.KindZpool:
		p, ok, err := v.Pool(e.ID)
		if err != nil || !ok {
			return nil, err
		}
		desired, ok := PoolDesired(p, e.Node)
		if !ok {
			return nil, nil
		}
		return json.Marshal(desired)
	}
	return nil, fmt.Errorf("outbox: unknown kind %q", e.Kind)
}

func (d *Dispatcher) drbdBody(r *round, e projections.OutboxEntry) ([]byte, error) {
	v := r.view
	rd, ok, err := v.ResourceDefinition(e.ID)
	if err != nil || !ok {
		return nil, err
	}
	var group *projections.ResourceGroup
	if rd.ResourceGroup != "" {
		g, ok, err := v.ResourceGroup(rd.ResourceGroup)
		if err != nil {
			return nil, err
		}
		if ok {
			group = &g
		}
	}
	if r.controller == nil {
		controller, err := v.ControllerOptions()
		if err != nil {
			return nil, err
		}
		controller.Options = drbd.Resolve(d.Controller, controller.Options)
		r.controller = &controller
	}
	desired, ok := Desired(rd, group, r.nodes, *r.controller, e.Node)
	if !ok {
		return nil, nil
	}
	for _, p := range rd.Files {
		f, ok, err := v.ExternalFile(p)
		if err != nil {
			return nil, err
		}
		if ok {
			desired.Files = append(desired.Files, drbd.File{Path: f.Path, Content: f.Content, SHA256: f.SHA256})
		}
	}
	return json.Marshal(desired)
}
