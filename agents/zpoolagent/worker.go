package zpoolagent

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/rs/zerolog"
)

// worker carries out the desired state of one pool. offer may be called from any
// goroutine; everything else runs on the worker's goroutine.
type worker struct {
	r    *Reconciler
	pool string
	log  zerolog.Logger
	kick chan struct{}

	mu          sync.Mutex
	want        Want
	haveWant    bool
	checking    uint64 // grant of the running check, 0 when none
	cancelCheck context.CancelFunc

	local      Local
	devs       []zfs.Device
	closers    []func() error
	hostid     uint32 // the hostid the pool was imported or adopted with
	watcher    *mmp.Watcher
	watchEvery time.Duration
	nextPoll   time.Time
	failures   int
	blind      bool
	lastObs    *mmp.Observation
	lastForgn  [2]string // hostid, host of the last contest
	nextHealth time.Time // when zpool's health is read next
	suspended  string    // CodeMMPSuspended or CodeIOSuspended while the kernel suspends the pool
}

func (r *Reconciler) newWorker(pool string) *worker {
	return &worker{r: r, pool: pool, kick: make(chan struct{}, 1),
		log: r.opts.Log.With().Str("pool", pool).Logger()}
}

// offer replaces the desired state and wakes the worker; it cancels a running check
// that the new state makes pointless.
func (w *worker) offer(want Want) {
	w.mu.Lock()
	w.want, w.haveWant = want, true
	if w.checking != 0 && (!want.Present || want.Desired.GrantSeq != w.checking) && w.cancelCheck != nil {
		w.log.Info().Uint64("grant", w.checking).Msg("desired state changed during the activity check: canceling it")
		w.cancelCheck()
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *worker) current() (Want, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.want, w.haveWant
}

// superseded reports whether the desired state no longer grants grant to this node.
func (w *worker) superseded(grant uint64) bool {
	want, _ := w.current()
	return !want.Present || want.Desired.GrantSeq != grant
}

func (w *worker) now() time.Time { return w.r.opts.Now() }

func (w *worker) run(ctx context.Context) {
	defer w.closeDevices()
	w.local.Contested, w.lastForgn, w.local.LatchBroken = w.readLatch()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if w.watcher != nil || w.local.Imported && w.local.Grant != 0 {
			if !w.now().Before(w.nextPoll) {
				w.poll(ctx)
			}
		}
		if want, ok := w.current(); ok {
			w.step(ctx, want)
		}
		if ctx.Err() != nil {
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wake := w.nextWake(); !wake.IsZero() {
			timer.Reset(max(wake.Sub(w.now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
	}
}

// nextWake is when the worker must run without a new desired state: the next watcher
// poll, the end of a hold, a retry; zero when nothing is pending. Holds and retries
// already past are not pending (they were acted on).
func (w *worker) nextWake() time.Time {
	var t time.Time
	now := w.now()
	earlier := func(c time.Time, pastOK bool) {
		if !c.IsZero() && (pastOK || c.After(now)) && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	if w.local.Imported && w.local.Grant != 0 && w.local.Contested != w.local.Grant {
		earlier(w.nextPoll, true)
	}
	earlier(w.local.HoldUntil, false)
	if want, ok := w.current(); ok && want.Present && want.Desired.GrantSeq == w.local.Failed {
		earlier(w.local.RetryAt, false)
	}
	return t
}

// step runs Decide and its action until there is nothing to do (bounded, so a
// misbehaving zpool cannot spin the worker).
func (w *worker) step(ctx context.Context, want Want) {
	for range 8 {
		if ctx.Err() != nil {
			return
		}
		d := Decide(w.r.opts.Node, w.pool, want, w.local, w.now())
		metricDecisions.WithLabelValues(string(d.Action)).Inc()
		if d.Action != ActNothing && d.Action != ActWait {
			w.log.Debug().Str("action", string(d.Action)).Str("reason", d.Reason).Msg("zpool decision")
		}
		switch d.Action {
		case ActNothing, ActWait:
			return
		case ActObserve:
			w.observe(ctx)
		case ActImport:
			w.importPool(ctx, want.Desired)
		case ActAdopt:
			w.adopt(ctx, want.Desired)
		case ActExport:
			w.export(ctx)
		case ActFence:
			w.fence(ctx)
		case ActReportExported:
			st := zpool.Status{Phase: zpool.PhaseExported}
			if w.local.Contested != 0 {
				st.Code, st.ForeignHostID, st.ForeignHost = CodeFenced, w.lastForgn[0], w.lastForgn[1]
			}
			w.publish(ctx, st)
		case ActReportHeld:
			w.publish(ctx, zpool.Status{GrantSeq: want.Desired.GrantSeq, Phase: zpool.PhaseContested, Code: CodeContestedGrant,
				Error: d.Reason, ForeignHostID: w.lastForgn[0], ForeignHost: w.lastForgn[1], Fenced: true})
		case ActLatchBroken:
			w.log.Error().Str("file", w.latchPath()).Msg(d.Reason)
			w.publish(ctx, zpool.Status{GrantSeq: want.Desired.GrantSeq, Phase: zpool.PhaseFailed, Code: CodeLatchUnreadable, Error: d.Reason})
		case ActInvalid:
			w.log.Error().Str("reason", d.Reason).Msg("invalid desired state")
			w.publish(ctx, zpool.Status{GrantSeq: want.Desired.GrantSeq, Phase: zpool.PhaseFailed, Code: CodeInvalidDesired, Error: d.Reason})
		}
		want, _ = w.current()
	}
}

func (w *worker) hold() { w.local.HoldUntil = w.now().Add(w.r.opts.RetryAfter) }

// publish sends a status (Pool, Node, At filled in), retrying a few times.
func (w *worker) publish(ctx context.Context, st zpool.Status) {
	st.Pool, st.Node, st.At = w.pool, w.r.opts.Node, w.now().UTC()
	body, err := json.Marshal(st)
	if err != nil {
		w.log.Error().Err(err).Msg("status not encodable")
		return
	}
	subject := w.r.opts.Names.Status(w.r.opts.Node, Kind, w.pool)
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = w.r.opts.Publisher.Publish(pctx, subject, body)
		cancel()
		if err == nil || attempt == 3 {
			break
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
	if err != nil {
		w.log.Error().Err(err).Str("phase", st.Phase).Msg("status not published")
	}
	w.local.Reported, w.local.ReportedGrant, w.local.ReportedCode = st.Phase, st.GrantSeq, st.Code
}
