package projections

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

var (
	metricApplied = promauto.NewCounter(prometheus.CounterOpts{
		Name: "cairn_projector_events_applied_total", Help: "Events applied to the views."})
	metricRejected = promauto.NewCounter(prometheus.CounterOpts{
		Name: "cairn_projector_events_rejected_total", Help: "Stored messages skipped as invalid events (recorded as rejected; their subject's boundary moves past them)."})
	metricStopped = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "cairn_projector_upgrade_needed", Help: "1 when the projector stopped at an event this binary cannot read (a newer cairn wrote it)."})
	metricCheckpoint = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "cairn_projector_checkpoint", Help: "Stream sequence of the last applied event."})
	metricBatch = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "cairn_projector_batch_events", Help: "Events per committed view batch.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 8)})
	metricUnendedBatches = promauto.NewCounter(prometheus.CounterOpts{
		Name: "cairn_projector_unended_batches_total", Help: "Views committed in the middle of an atomic batch whose end did not follow within the wait (its last message deleted from the stream)."})
)

// unendedBatchWait is how long applied events of an atomic batch wait for the batch's
// last message before the views are committed without it. The server stores a batch's
// messages together, so its end follows at once; only a batch whose last message was
// deleted from the stream waits this long (logged, cairn_projector_unended_batches_total).
const unendedBatchWait = time.Second

// Projector applies the events stream, in stream order, to the views.
type Projector struct {
	db *DB
	js jetstream.JetStream
	// events is the events stream's handle for batchTailStored (read once, by Run's
	// goroutine only).
	events jetstream.Stream
	names  events.Names
	log    zerolog.Logger

	applied atomic.Uint64
	mu      sync.Mutex
	notify  chan struct{}
	// queued is the sequence of the last committed batch that queued outbox entries;
	// queuedNotify closes when it moves (guarded by mu).
	queued       atomic.Uint64
	queuedNotify chan struct{}

	// txMu serializes Run and Offer on live, the open transaction of the running Run
	// (nil when none runs or the Run stops at a sequence); broken is an apply error met
	// by Offer, which stops the projector. offered (guarded by offerMu, which may be
	// taken under txMu, never the other way round) holds offered events not applied yet:
	// whoever holds txMu next applies every one that follows the views, so concurrent
	// offers share one commit.
	txMu    sync.Mutex
	live    *tx
	broken  error
	offerMu sync.Mutex
	offered map[uint64]Item
	// stopped is set when Run stopped at an event this binary cannot read.
	stopped atomic.Pointer[UpgradeNeededError]

	retention  time.Duration // see SetCommandRetention
	pruneEvery uint64
}

// SetCommandRetention sets how long accepted command ids stay in the views (0: for
// good) and how often, in events, the older ones are pruned (0: DefaultPruneEvery).
// Every serve of one stream and every offline rebuild must use the same values, or
// their views (and digests) differ. Call it before Run.
func (p *Projector) SetCommandRetention(d time.Duration, every uint64) {
	if every == 0 {
		every = DefaultPruneEvery
	}
	p.retention, p.pruneEvery = d, every
}

// UpgradeNeededError stops the projector at an event of a type or schema version this
// binary does not know (written by a newer cairn during a rolling upgrade). The views
// hold everything before it; they cannot go on without the newer binary, and skipping
// the event would make this serve's views diverge from the others'.
type UpgradeNeededError struct {
	Seq     uint64
	Subject string
	Reason  string
}

func (e *UpgradeNeededError) Error() string {
	return fmt.Sprintf("the views stopped before seq %d on %s: %s; run a cairn that reads it", e.Seq, e.Subject, e.Reason)
}

// Stopped returns the UpgradeNeededError that stopped Run, or nil.
func (p *Projector) Stopped() *UpgradeNeededError { return p.stopped.Load() }

// NewProjector returns a projector that resumes after the store's checkpoint.
func NewProjector(db *DB, js jetstream.JetStream, names events.Names, log zerolog.Logger) (*Projector, error) {
	ckpt, err := db.Checkpoint()
	if err != nil {
		return nil, err
	}
	p := &Projector{db: db, js: js, names: names, log: log, notify: make(chan struct{}),
		queuedNotify: make(chan struct{}), offered: map[uint64]Item{},
		retention: DefaultCommandRetention, pruneEvery: DefaultPruneEvery}
	p.applied.Store(ckpt)
	metricCheckpoint.Set(float64(ckpt))
	return p, nil
}

// Applied returns the stream sequence of the last applied event.
func (p *Projector) Applied() uint64 { return p.applied.Load() }

// WaitFor blocks until the views reflect seq or ctx ends (returning ctx's error).
func (p *Projector) WaitFor(ctx context.Context, seq uint64) error {
	return p.waitUntil(ctx, &p.notify, func() bool { return p.applied.Load() >= seq })
}

// Queued returns the sequence of the last event whose views queued outbox entries
// (0: none since this process started).
func (p *Projector) Queued() uint64 { return p.queued.Load() }

// WaitQueuedBeyond blocks until a batch after seq queued outbox entries (Queued() > seq)
// or ctx ends. The dispatcher sleeps here, so events that queue nothing (most of them)
// do not wake it.
func (p *Projector) WaitQueuedBeyond(ctx context.Context, seq uint64) error {
	return p.waitUntil(ctx, &p.queuedNotify, func() bool { return p.queued.Load() > seq })
}

// waitUntil blocks until done() holds, checking again each time the channel at *ch
// (replaced under mu by commit) closes, or until ctx ends.
func (p *Projector) waitUntil(ctx context.Context, ch *chan struct{}, done func() bool) error {
	for {
		p.mu.Lock()
		wake := *ch
		p.mu.Unlock()
		if done() {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitBeyond blocks until the views move past seq (some event after seq is applied) or
// ctx ends.
func (p *Projector) WaitBeyond(ctx context.Context, seq uint64) error { return p.WaitFor(ctx, seq+1) }

// Run applies events after the checkpoint until ctx ends, or, when stopAt > 0, until
// the event at stopAt is applied (events after stopAt are never applied). Progress
// goes to the log every few seconds while more than a second behind. While a Run without
// stopAt is going, Offer may apply events ahead of the consumer.
func (p *Projector) Run(ctx context.Context, stopAt uint64) error {
	if stopAt > 0 && p.Applied() >= stopAt {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pipe := newDecodePipeline(ctx, p.Applied)
	chunks := pipe.ordered
	srcErr := make(chan error, 1)
	go func() {
		defer pipe.close()
		if err := p.read(ctx, stopAt, pipe.add); err != nil && ctx.Err() == nil {
			srcErr <- err
		}
	}()

	progress := newProgress(p.log, p.Applied(), stopAt)
	defer progress.stop()

	t := newTx(p.db)
	t.retention, t.pruneEvery = p.retention, p.pruneEvery
	if stopAt == 0 {
		p.txMu.Lock()
		p.live = t
		p.txMu.Unlock()
		defer func() {
			p.txMu.Lock()
			p.live = nil
			p.offerMu.Lock()
			clear(p.offered)
			p.offerMu.Unlock()
			p.txMu.Unlock()
		}()
	}
	var unended <-chan time.Time // set while the applied events end in the middle of a batch
	for {
		var chunk *decodedChunk
		var ok bool
		select {
		case chunk, ok = <-chunks:
		case err := <-srcErr:
			return fmt.Errorf("projector: read %s: %w", p.names.EventsStream(), err)
		case <-unended:
			unended = nil
			rearm, err := p.commitUnended(ctx, t)
			if err != nil {
				return err
			}
			if rearm {
				unended = time.After(unendedBatchWait)
			}
			continue
		}
		if !ok {
			// Stopping: what is applied is committed, unless it ends in the middle of a
			// batch; then the next Run applies those events again from the stream.
			p.txMu.Lock()
			err := p.commitAtBatchEnd(t)
			p.txMu.Unlock()
			if err != nil {
				return err
			}
			if ctx.Err() != nil && stopAt == 0 {
				return nil
			}
			select {
			case err := <-srcErr:
				return fmt.Errorf("projector: read %s: %w", p.names.EventsStream(), err)
			default:
			}
			return ctx.Err()
		}
		<-chunk.done
		p.txMu.Lock()
		done, err := p.applyChunk(t, chunk, stopAt)
		waiting := t.midBatch && t.pending > 0
		p.txMu.Unlock()
		if err != nil {
			return err
		}
		progress.set(p.Applied())
		if done {
			return nil
		}
		switch {
		case !waiting:
			unended = nil
		case unended == nil:
			unended = time.After(unendedBatchWait)
		}
	}
}

// commitUnended commits t although the events it holds end in the middle of an atomic
// batch, when the batch's end has not followed within unendedBatchWait and a read of
// the stream proves it is gone (batchTailStored: its last message deleted, which only
// a stream that allows deletes permits). A tail that is stored but late (the ordered
// consumer was reset in the middle of the batch) is waited for: rearm is true.
func (p *Projector) commitUnended(ctx context.Context, t *tx) (rearm bool, err error) {
	p.txMu.Lock()
	waiting, seq := t.midBatch && t.pending > 0, t.seq
	p.txMu.Unlock()
	if !waiting {
		return false, nil // the batch ended meanwhile (an offer) and was committed
	}
	// The read runs without the transaction's lock: offers and applies go on meanwhile.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	stored, err := p.batchTailStored(rctx, seq)
	cancel()
	if err != nil || stored {
		if err != nil {
			p.log.Warn().Err(err).Uint64("seq", seq).Msg("projector: could not read whether the atomic batch's end is stored; waiting for it")
		}
		return true, nil
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	if !t.midBatch || t.pending == 0 || t.seq != seq {
		return t.midBatch && t.pending > 0, nil // moved on meanwhile: look again later
	}
	metricUnendedBatches.Inc()
	p.log.Warn().Uint64("seq", seq).Dur("waited_ms", unendedBatchWait).
		Msg("projector: the atomic batch of this event has no end in the stream (its last message deleted); views committed without it")
	return false, p.commit(t)
}

// batchTailStored is batchTailStored on the events stream, whose handle is read once.
func (p *Projector) batchTailStored(ctx context.Context, seq uint64) (bool, error) {
	if p.events == nil {
		st, err := p.js.Stream(ctx, p.names.EventsStream())
		if err != nil {
			return false, err
		}
		p.events = st
	}
	return batchTailStored(ctx, p.events, seq)
}

// batchTailStored reports whether the message after seq in stream belongs to the same
// atomic batch as seq (the Nats-Batch-Id header): then the batch's end is stored and
// only late. A batch is stored whole, so its next message is missing only when it was
// deleted.
func batchTailStored(ctx context.Context, st jetstream.Stream, seq uint64) (bool, error) {
	cur, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	id := cur.Header.Get(jetstreamext.BatchIDHeader)
	if id == "" {
		return false, nil
	}
	next, err := st.GetMsg(ctx, seq+1)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return next.Header.Get(jetstreamext.BatchIDHeader) == id, nil
}

// commitAtBatchEnd commits t unless the events it holds end in the middle of an atomic
// batch. Callers hold txMu.
func (p *Projector) commitAtBatchEnd(t *tx) error {
	if t.midBatch {
		return nil
	}
	return p.commit(t)
}

// applyChunk applies a chunk's items that the views do not hold yet (and offered events
// that follow them), committing when caught up with the stream, when the batch is big
// (a catch-up or rebuild) or old. done: the event at stopAt is applied. Callers hold txMu.
func (p *Projector) applyChunk(t *tx, chunk *decodedChunk, stopAt uint64) (done bool, err error) {
	if p.broken != nil {
		return false, p.broken
	}
	for _, item := range chunk.items {
		if item.Raw.Seq <= t.seq {
			continue // applied already: offered, or redelivered after a consumer reset
		}
		if stopAt > 0 && item.Raw.Seq > stopAt {
			done = true
			break
		}
		if item.undecoded {
			return false, fmt.Errorf("projector: seq %d was left undecoded as applied, but the views are at %d", item.Raw.Seq, t.seq)
		}
		if de, ok := events.NeedsUpgrade(item.Err); ok {
			// Keep what comes before it (unless that ends in the middle of its batch),
			// then stop: never skip state silently.
			if err := p.commitAtBatchEnd(t); err != nil {
				return false, err
			}
			up := &UpgradeNeededError{Seq: item.Raw.Seq, Subject: item.Raw.Subject, Reason: de.Reason}
			p.stopped.Store(up)
			metricStopped.Set(1)
			p.log.Error().Uint64("seq", up.Seq).Str("subject", up.Subject).Msg(up.Error())
			return false, up
		}
		if err := p.applyItem(t, item); err != nil {
			return false, err
		}
		if stopAt > 0 && item.Raw.Seq == stopAt {
			done = true
			break
		}
		// A commit that came due while the open batch was in the middle of an atomic
		// batch happens where that batch ends, inside the chunk: a delivery that keeps
		// ending in the middle of one batch or another never holds the views back.
		if !t.midBatch && (t.pending >= maxBatch || time.Since(t.batchStart) > maxBatchAge(stopAt)) {
			if err := p.commit(t); err != nil {
				return false, err
			}
		}
	}
	if err := p.applyOffered(t); err != nil {
		return false, err
	}
	if done {
		return done, p.commit(t)
	}
	if chunk.tail || t.pending >= maxBatch || time.Since(t.batchStart) > maxBatchAge(stopAt) {
		return done, p.commitAtBatchEnd(t)
	}
	return done, nil
}

// maxBatch bounds the events of one view batch.
const maxBatch = 16384

// maxBatchAge bounds how long applied events wait for their commit when the stream
// keeps delivering: 20 ms live, where readers wait for the views; a second when
// replaying up to a sequence (rebuild, views at), where nobody reads until the end and
// bigger batches write each often-rewritten view (a node's status, a subject's last
// sequence) once instead of once per 20 ms.
func maxBatchAge(stopAt uint64) time.Duration {
	if stopAt > 0 {
		return time.Second
	}
	return 20 * time.Millisecond
}

// applyItem folds one item into t and counts it towards the open batch.
func (p *Projector) applyItem(t *tx, item Item) error {
	if t.pending == 0 {
		t.batchStart = time.Now()
	}
	if err := applyRecovering(t, p.names, item); err != nil {
		return fmt.Errorf("projector: apply seq %d: %w", item.Raw.Seq, err)
	}
	if item.Err != nil {
		metricRejected.Inc()
		p.log.Warn().Uint64("seq", item.Raw.Seq).Str("subject", item.Raw.Subject).Err(item.Err).Msg("skipped a stored message that is not a valid event")
	}
	t.pending++
	t.midBatch = item.Raw.MidBatch
	return nil
}

// applyRecovering is apply with a panic turned into an error (with the stack): the
// transaction is then half-written, so the projector stops (Run returns it, Offer marks
// the projector broken) instead of the process dying; nothing acknowledged is lost, the
// events are in the stream.
func applyRecovering(t *tx, names events.Names, item Item) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return apply(t, names, item)
}

// read sends the stored messages after the checkpoint to send, in stream order, from an
// ordered consumer (which recreates itself after a gap, a missed heartbeat or a
// reconnect), until ctx ends or the message at stopAt (when > 0) is sent.
// send is called with each message and whether more are already waiting; it returns
// false when the read should stop. It is never called concurrently.
//
// The consumer delivers to a callback (Consume) rather than through an iterator: the
// iterator's select and timer reset per message cost a fifth of a raw replay's CPU
// (BenchmarkRebuildVsOrderedReplay reports both). A callback of a consumer recreated
// after a gap may in principle overlap one still running on the old consumer: sends
// are serialized, and a message older than one already sent (which only such an overlap
// could produce) stops the read with an error rather than being dropped or reordered.
func (p *Projector) read(ctx context.Context, stopAt uint64, send func(r events.Raw, more bool) bool) error {
	stream := p.names.EventsStream()
	next := p.Applied() + 1
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if next > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = next
	}
	cons, err := p.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", stream, err)
	}
	var (
		mu       sync.Mutex
		last     uint64
		finished bool
	)
	stop := make(chan error, 1)
	end := func(err error) {
		finished = true
		select {
		case stop <- err:
		default:
		}
	}
	handle := func(m jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		meta, err := m.Metadata()
		if err != nil {
			end(err)
			return
		}
		seq := meta.Sequence.Stream
		if seq <= last {
			end(fmt.Errorf("message %d delivered after %d", seq, last))
			return
		}
		last = seq
		atEnd := stopAt > 0 && seq >= stopAt
		r := events.Raw{Seq: seq, Subject: m.Subject(), Stored: meta.Timestamp, Data: m.Data(), MidBatch: events.MidBatch(m.Headers())}
		if !send(r, meta.NumPending > 0 && !atEnd) || atEnd {
			end(nil)
		}
	}
	onErr := func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed) {
			mu.Lock()
			end(err)
			mu.Unlock()
			return
		}
		// Everything else (a missed heartbeat, a deleted consumer, a reconnect) the
		// ordered consumer mends by recreating itself after the last message sent.
		p.log.Warn().Err(err).Str("stream", stream).Msg("projector: the consumer recovers")
	}
	cc, err := cons.Consume(handle, jetstream.PullMaxMessages(2048), jetstream.ConsumeErrHandler(onErr))
	if err != nil {
		return err
	}
	defer func() {
		cc.Stop()
		// No send after read returns: the caller closes what send feeds.
		mu.Lock()
		finished = true
		mu.Unlock()
	}()
	select {
	case err := <-stop:
		return err
	case <-ctx.Done():
		return nil
	}
}

// commit commits t's open batch and wakes the waiters. Callers hold txMu.
func (p *Projector) commit(t *tx) error {
	n := t.pending
	if n == 0 {
		return nil
	}
	if err := t.commit(); err != nil {
		return fmt.Errorf("projector: commit views at seq %d: %w", t.seq, err)
	}
	t.pending = 0
	queued := t.queued
	t.queued = false
	if queued {
		p.queued.Store(t.seq)
	}
	p.applied.Store(t.seq)
	metricApplied.Add(float64(n))
	metricCheckpoint.Set(float64(t.seq))
	metricBatch.Observe(float64(n))
	p.mu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	if queued {
		close(p.queuedNotify)
		p.queuedNotify = make(chan struct{})
	}
	p.mu.Unlock()
	return nil
}
