package zpoolagent

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/agents/fsx"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zpool"
)

// Observing, importing and adopting a pool: the MMP activity check before an import.

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
		Dur("retry_in_ms", wait).Msg(st.Error)
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
