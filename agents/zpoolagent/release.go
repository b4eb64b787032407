package zpoolagent

import (
	"context"
	"fmt"

	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Giving a pool up: export when the grant moved, fence (export -F) when it was contested.

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
