package zpoolagent

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zpool"
)

// Watching an imported pool: the MMP slots polled for a foreign writer, health, the
// contest a foreign write makes.

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
