package zpoolagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-io/cairn/internal/fsx"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/prometheus/client_golang/prometheus"
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

func (w *worker) observe(ctx context.Context) {
	imported, err := w.r.opts.Zpool.Imported(ctx, w.pool)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.log.Error().Err(err).Msg("cannot read whether the pool is imported (zpool list)")
		w.hold()
		if w.local.ReportedCode != CodeObserveFailed {
			w.publish(ctx, zpool.Status{Phase: zpool.PhaseFailed, Code: CodeObserveFailed, Error: err.Error()})
		}
		return
	}
	w.local.Observed, w.local.Imported, w.local.Grant = true, imported, 0
	w.log.Info().Bool("imported", imported).Msg("import state observed")
}

// refuse records a refused or failed attempt under grant (backing off) and reports it.
func (w *worker) refuse(ctx context.Context, grant uint64, st zpool.Status) {
	if w.local.Failed != grant {
		w.local.Failed, w.local.Attempts = grant, 0
	}
	w.local.Attempts++
	wait := Backoff(w.local.Attempts, w.r.opts.RetryAfter, w.r.opts.RetryMax)
	w.local.RetryAt = w.now().Add(wait)
	st.GrantSeq = grant
	w.log.Warn().Str("phase", st.Phase).Str("code", st.Code).Uint64("grant", grant).Int("attempt", w.local.Attempts).
		Dur("retry_in", wait).Msg(st.Error)
	outcome := st.Phase
	metricImports.WithLabelValues(outcome, st.Code).Inc()
	w.publish(ctx, st)
}

func (w *worker) openDevices(paths []string) error {
	w.closeDevices()
	for _, p := range paths {
		d, closer, err := w.r.opts.OpenDevice(p)
		if err != nil {
			w.closeDevices()
			return fmt.Errorf("cannot open leaf vdev %s: %w", p, err)
		}
		w.devs, w.closers = append(w.devs, d), append(w.closers, closer)
	}
	return nil
}

func (w *worker) closeDevices() {
	for _, c := range w.closers {
		if c != nil {
			_ = c()
		}
	}
	w.devs, w.closers, w.watcher = nil, nil, nil
}

// importPool is the grant flow: hostid, checking, the activity check, the re-read, the
// import, the watcher.
func (w *worker) importPool(ctx context.Context, d zpool.Desired) {
	grant := d.GrantSeq
	log := w.log.With().Uint64("grant", grant).Logger()
	hostid := w.r.opts.HostID()
	if hostid == 0 {
		metricChecks.WithLabelValues(mmp.CodeNoHostID).Inc()
		w.refuse(ctx, grant, zpool.Status{Phase: zpool.PhaseRefused, Code: CodeNoHostID,
			Error: fmt.Sprintf("no hostid: this host's hostid is 0, so no activity check can tell it from another host and zpool would refuse too (ZFS-8000-EY); "+
				"set one (zgenhostid, /etc/hostid) or pass --hostid; pool %s was not touched", w.pool)})
		return
	}
	started := w.now().UTC()
	log.Info().Strs("devices", d.Devices).Str("hostid", mmp.HostID(hostid).String()).Msg("grant received: activity check starts")
	w.publish(ctx, zpool.Status{GrantSeq: grant, Phase: zpool.PhaseChecking, CheckStartedAt: started})
	if err := w.openDevices(d.Devices); err != nil {
		metricChecks.WithLabelValues(mmp.CodeUnreadableVdev).Inc()
		w.refuse(ctx, grant, zpool.Status{Phase: zpool.PhaseFailed, Code: mmp.CodeUnreadableVdev, Error: err.Error(), CheckStartedAt: started})
		return
	}

	checkCtx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.checking, w.cancelCheck = grant, cancel
	w.mu.Unlock()
	if w.superseded(grant) { // a newer desired state came between Decide and here
		cancel()
	}
	checker := w.r.opts.Checker
	checker.Log = log.With().Str("component", "mmp").Logger()
	// A host that fenced this pool (the latch is kept until an import under a new grant)
	// never skips the check: its export may have happened while another host wrote it.
	checker.AlwaysCheck = checker.AlwaysCheck || w.local.Contested != 0
	t0 := time.Now()
	v := checker.Check(checkCtx, w.devs, hostid, w.r.opts.Clock)
	metricCheckSeconds.Observe(time.Since(t0).Seconds())
	metricChecks.WithLabelValues(v.Code).Inc()
	w.mu.Lock()
	w.checking, w.cancelCheck = 0, nil
	w.mu.Unlock()
	cancel()

	if ctx.Err() != nil || (v.Code == mmp.CodeCanceled && w.superseded(grant)) {
		log.Info().Msg("activity check canceled: the grant changed or the agent stops; nothing imported")
		w.closeDevices()
		return
	}
	plan := PlanImport(v, hostid)
	base := zpool.Status{Verdict: v, CheckStartedAt: started, ForeignHostID: plan.ForeignHostID, ForeignHost: plan.ForeignHost}
	if !plan.Import {
		w.closeDevices()
		base.Phase, base.Code, base.Error = plan.Phase, plan.Code, plan.Reason
		w.refuse(ctx, grant, base)
		return
	}
	if w.superseded(grant) {
		log.Info().Msg("grant changed after the check: not importing")
		w.closeDevices()
		return
	}
	// The window between the check and the import: read the best uberblock once more.
	if now, err := w.bestNow(); err != nil || UberblockChanged(v.Uberblock, now) {
		w.closeDevices()
		base.Phase, base.Code = zpool.PhaseRefused, CodeChangedAfter
		base.Error = fmt.Sprintf("pool %s changed on disk between the activity check and the import: another host is writing it", w.pool)
		if err != nil {
			base.Phase, base.Code, base.Error = zpool.PhaseFailed, mmp.CodeUnreadableVdev, fmt.Sprintf("re-read before the import: %v", err)
		}
		base.Verdict = map[string]any{"verdict": v, "now": now}
		w.refuse(ctx, grant, base)
		return
	}
	log.Info().Bool("force", plan.Force).Str("verdict", v.Code).Msg("importing")
	// Not canceled by the agent stopping (bounded by the import timeout): a zpool killed
	// in the middle would leave the import state unknown.
	if err := w.r.opts.Zpool.Import(context.WithoutCancel(ctx), w.pool, d.Devices, plan.Force); err != nil {
		w.closeDevices()
		rf := ClassifyImport(err)
		base.Phase, base.Code, base.Error = rf.Phase, rf.Code, rf.Message
		if rf.ForeignHostID != "" {
			base.ForeignHostID, base.ForeignHost = rf.ForeignHostID, rf.ForeignHost
		}
		w.refuse(ctx, grant, base)
		return
	}
	outcome := "imported"
	if plan.Force {
		outcome = "forced"
	}
	metricImports.WithLabelValues(outcome, v.Code).Inc()
	metricImported.WithLabelValues(w.pool).Set(1)
	w.local.Imported, w.local.Grant, w.local.Failed, w.local.Attempts = true, grant, 0, 0
	w.hostid = hostid
	if w.local.Contested != 0 { // a new grant after a contest: the operator resolved it
		w.local.Contested, w.lastObs, w.lastForgn = 0, nil, [2]string{}
		if p := w.latchPath(); p != "" {
			_ = fsx.RemoveDurably(p)
		}
	}
	w.startWatch(v)
	log.Info().Bool("forced", plan.Force).Dur("watch_every_ms", w.watchEvery).Msg("pool imported; watching for foreign writes")
	w.publish(ctx, zpool.Status{GrantSeq: grant, Phase: zpool.PhaseImported, Verdict: v, CheckStartedAt: started, Forced: plan.Force})
}

// bestNow re-reads the pool's best uberblock the way the activity check read it.
func (w *worker) bestNow() (*mmp.Seen, error) {
	f, err := w.r.opts.Checker.ReadBest(w.devs)
	if err != nil {
		return nil, err
	}
	return mmp.SeenFrom(f.LeafName, f.Slot), nil
}

// startWatch sets the poll period and takes the watcher's baseline (retried by poll
// when the leaves cannot be read now).
func (w *worker) startWatch(v mmp.Verdict) {
	w.watchEvery = w.r.opts.WatchEvery
	if w.watchEvery <= 0 {
		w.watchEvery = mmp.PollPeriod(v.Uberblock)
	}
	w.failures, w.blind, w.suspended, w.nextHealth = 0, false, "", time.Time{}
	w.watcher = nil
	w.newWatcher()
	w.nextPoll = w.now().Add(w.watchEvery)
}

func (w *worker) newWatcher() error {
	wt, err := mmp.NewWatcher(w.devs, w.hostid, mmp.WatchOptions{SelfWriting: true, Log: w.log.With().Str("component", "watch").Logger()})
	if err != nil {
		return err
	}
	w.watcher = wt
	return nil
}

// poll runs one watcher poll of an imported pool and acts on it.
func (w *worker) poll(ctx context.Context) {
	w.nextPoll = w.now().Add(w.watchEvery)
	if !w.local.Imported || w.local.Contested == w.local.Grant && w.local.Grant != 0 {
		return
	}
	var obs mmp.Observation
	var err error
	if w.watcher == nil {
		err = w.newWatcher()
	}
	if err == nil {
		obs, err = w.watcher.Poll()
	}
	code := obs.Code
	if err != nil {
		code = "error"
	}
	metricPolls.WithLabelValues(code).Inc()
	st := OnPoll(obs, err, w.failures, w.r.opts.MaxBlind)
	w.failures = st.Failures
	switch {
	case st.Fence:
		w.contest(ctx, obs)
	case st.Blind:
		w.blind = true
		w.log.Error().Err(err).Int("polls", st.Failures).Msg("cannot read the pool's leaves: the pool is not watched")
		w.publish(ctx, zpool.Status{GrantSeq: w.local.Grant, Phase: zpool.PhaseImported, Code: CodeWatchBlind,
			Error: fmt.Sprintf("the watcher cannot read the leaves (%d polls in a row): %v", st.Failures, err)})
	case err == nil && w.blind:
		w.blind = false
		w.log.Info().Msg("the watcher reads the leaves again")
		w.publish(ctx, zpool.Status{GrantSeq: w.local.Grant, Phase: zpool.PhaseImported})
	}
	if !st.Fence {
		w.checkHealth(ctx)
	}
}

// checkHealth reads zpool's health of the imported pool at most every HealthEvery and
// reports a suspension (and its end) when it changes. It never runs zpool clear: a pool
// the kernel suspended because MMP writes did not land may be imported elsewhere by now;
// whether to clear it is the operator's decision.
func (w *worker) checkHealth(ctx context.Context) {
	now := w.now()
	if now.Before(w.nextHealth) {
		return
	}
	w.nextHealth = now.Add(w.r.opts.HealthEvery)
	h, err := w.r.opts.Zpool.Health(ctx, w.pool)
	if err != nil {
		if ctx.Err() == nil && !IsNoSuchPool(err) {
			w.log.Warn().Err(err).Msg("cannot read the pool's health (zpool list -o health)")
		}
		return
	}
	if h.Suspended == w.suspended {
		return
	}
	w.suspended = h.Suspended
	if h.Suspended != "" {
		metricSuspensions.WithLabelValues(h.Suspended).Inc()
		msg := fmt.Sprintf("the kernel suspended pool %s (%s); the agent does not clear it: zpool status says:\n%s", w.pool, h.Suspended, h.Status)
		w.log.Error().Str("code", h.Suspended).Msg(msg)
		w.publish(ctx, zpool.Status{GrantSeq: w.local.Grant, Phase: zpool.PhaseSuspended, Code: h.Suspended, Error: msg})
		return
	}
	w.log.Info().Str("health", h.State).Msg("the pool is no longer suspended")
	w.publish(ctx, zpool.Status{GrantSeq: w.local.Grant, Phase: zpool.PhaseImported})
}

// contest handles a foreign write: latch, report, fence.
func (w *worker) contest(ctx context.Context, obs mmp.Observation) {
	grant := w.local.Grant
	metricAlarms.WithLabelValues(obs.Code).Inc()
	w.lastObs = &obs
	w.lastForgn = [2]string{}
	if obs.Writer != nil {
		w.lastForgn = [2]string{obs.Writer.HostID.String(), obs.Writer.Hostname}
	}
	w.local.Contested = grant
	if err := w.writeLatch(grant); err != nil {
		w.log.Error().Err(err).Msg("cannot persist the contested latch")
	}
	w.log.Error().Uint64("grant", grant).Str("code", obs.Code).Str("foreign_hostid", w.lastForgn[0]).
		Str("foreign_host", w.lastForgn[1]).Msg("ANOTHER HOST WRITES THE POOL: fencing (zpool export -F): " + obs.Message)
	w.watcher = nil
	w.publish(ctx, w.contestedStatus(grant, false, ""))
	w.fence(ctx)
}

func (w *worker) contestedStatus(grant uint64, fenced bool, errText string) zpool.Status {
	st := zpool.Status{GrantSeq: grant, Phase: zpool.PhaseContested, ForeignHostID: w.lastForgn[0], ForeignHost: w.lastForgn[1], Fenced: fenced}
	if w.lastObs != nil {
		st.Code, st.Observation, st.Error = w.lastObs.Code, *w.lastObs, w.lastObs.Message
	}
	if errText != "" {
		st.Code, st.Error = CodeFenceFailed, errText
	}
	return st
}

// fence exports the pool with -F (no label rewrite, see FenceArgv); a failure is reported and retried after RetryAfter.
// Either way the status is contested under the imported grant (the contested one when
// none), and a fenced pool keeps Local.Grant.
func (w *worker) fence(ctx context.Context) {
	grant := w.local.Grant
	if grant == 0 {
		grant = w.local.Contested
	}
	if err := w.release(ctx, true, metricFences, "fence failed: the pool is still imported here"); err != nil {
		w.publish(ctx, w.contestedStatus(grant, false, fmt.Sprintf("zpool export -F failed, retrying: %v", err)))
		return
	}
	w.log.Warn().Uint64("grant", grant).Msg("pool fenced: exported here; no import under this grant again")
	w.publish(ctx, w.contestedStatus(grant, true, ""))
}

// export releases the pool when the grant moved or ended: reported exported with the
// grant dropped, or failed (CodeExportFailed) and retried after RetryAfter, never with -f.
func (w *worker) export(ctx context.Context) {
	err := w.release(ctx, false, metricExports,
		"export failed; retrying (never forced: a pool kept imported here keeps writing MMP, so no other host's check passes)")
	if err != nil {
		w.publish(ctx, zpool.Status{GrantSeq: w.local.Grant, Phase: zpool.PhaseFailed, Code: CodeExportFailed, Error: err.Error()})
		return
	}
	w.local.Grant = 0
	w.log.Info().Msg("pool exported")
	w.publish(ctx, zpool.Status{Phase: zpool.PhaseExported})
}

// release is the part fence and export share: zpool export of the pool (the fence,
// zpool export -F, when force), run to its end even if ctx ends (the agent stopping does not cut it short).
// A pool that is not there (IsNoSuchPool) counts as exported. The attempt is counted
// in counter by outcome, "ok" or "failed".
//
// On a failure release logs failMsg at error level, holds the worker for RetryAfter
// and returns the error: the pool is still imported here and its devices stay open.
// On success it returns nil after dropping the pool: cairn_zpool_imported set to 0,
// devices closed (and the watcher with them), Local.Imported false. Reporting either
// is the caller's.
func (w *worker) release(ctx context.Context, force bool, counter *prometheus.CounterVec, failMsg string) error {
	var err error
	if force {
		err = w.r.opts.Zpool.Fence(context.WithoutCancel(ctx), w.pool)
	} else {
		err = w.r.opts.Zpool.Export(context.WithoutCancel(ctx), w.pool)
	}
	if err != nil && !IsNoSuchPool(err) {
		counter.WithLabelValues("failed").Inc()
		w.log.Error().Err(err).Msg(failMsg)
		w.hold()
		return err
	}
	counter.WithLabelValues("ok").Inc()
	metricImported.WithLabelValues(w.pool).Set(0)
	w.closeDevices()
	w.local.Imported = false
	return nil
}

// adopt takes over a pool found imported (at start, or under an older grant): the
// watcher must see labels naming this host before the pool counts as imported.
func (w *worker) adopt(ctx context.Context, d zpool.Desired) {
	grant := d.GrantSeq
	hostid := w.r.opts.HostID()
	if hostid == 0 {
		w.local.Grant = grant
		w.publish(ctx, zpool.Status{GrantSeq: grant, Phase: zpool.PhaseFailed, Code: CodeNoHostID,
			Error: "the pool is imported here but this host has no hostid: it cannot be watched for foreign writes"})
		return
	}
	if w.watcher == nil || w.hostid != hostid {
		if err := w.openDevices(d.Devices); err != nil {
			w.local.Grant = grant
			w.hostid = hostid
			w.publish(ctx, zpool.Status{GrantSeq: grant, Phase: zpool.PhaseImported, Code: CodeWatchBlind, Error: err.Error()})
			return
		}
	}
	w.hostid = hostid
	w.local.Grant = grant
	w.startWatch(mmp.Verdict{})
	if w.watcher != nil {
		obs, err := w.watcher.Poll()
		if err == nil && obs.Foreign {
			w.contest(ctx, obs)
			return
		}
	}
	metricImported.WithLabelValues(w.pool).Set(1)
	w.log.Info().Uint64("grant", grant).Msg("pool already imported here: adopted, watching")
	w.publish(ctx, zpool.Status{GrantSeq: grant, Phase: zpool.PhaseImported, Code: CodeAdopted})
}

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

// The contested latch: <StateDir>/<pool>.contested holds the grant and the other host.
type latch struct {
	GrantSeq      uint64    `json:"grant_seq"`
	ForeignHostID string    `json:"foreign_hostid,omitempty"`
	ForeignHost   string    `json:"foreign_host,omitempty"`
	At            time.Time `json:"at"`
}

func (w *worker) latchPath() string {
	if w.r.opts.StateDir == "" {
		return ""
	}
	return filepath.Join(w.r.opts.StateDir, w.pool+".contested")
}

// readLatch reads the contested latch: the grant and the other host, or why the file
// exists but cannot be used (the agent then imports under no grant: fail closed).
func (w *worker) readLatch() (uint64, [2]string, string) {
	p := w.latchPath()
	if p == "" {
		return 0, [2]string{}, ""
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, [2]string{}, ""
	}
	if err != nil {
		w.log.Error().Err(err).Str("file", p).Msg("contested latch unreadable: no import under any grant")
		return 0, [2]string{}, err.Error()
	}
	var l latch
	if err := json.Unmarshal(b, &l); err != nil || l.GrantSeq == 0 {
		why := fmt.Sprintf("%s is not a latch (%v)", p, err)
		w.log.Error().Str("file", p).Msg("contested latch damaged: no import under any grant")
		return 0, [2]string{}, why
	}
	w.log.Warn().Uint64("grant", l.GrantSeq).Msg("contested latch found: no import under grant " + strconv.FormatUint(l.GrantSeq, 10))
	return l.GrantSeq, [2]string{l.ForeignHostID, l.ForeignHost}, ""
}

func (w *worker) writeLatch(grant uint64) error {
	p := w.latchPath()
	if p == "" {
		return nil
	}
	b, _ := json.Marshal(latch{GrantSeq: grant, ForeignHostID: w.lastForgn[0], ForeignHost: w.lastForgn[1], At: w.now().UTC()})
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return fsx.WriteAtomic(p, b, 0o644)
}
