package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/volume"
	"github.com/rs/zerolog"
)

// CapacityFromReport turns an agent's storage-pool report into the sp.capacity-report
// command that records it, when it is news for the pool's view (commands.CapacityChanged:
// a first report, another total, or free moved by more than 1% of the total). ok is
// false for a report with an error, of a pool the views do not have, or no news. The
// command id derives from node, pool and the report's time, so two serves, or the same
// report folded again after a restart, record it once.
func CapacityFromReport(v *projections.View, rep volume.PoolReport) (commands.Request, bool, error) {
	if rep.Error != "" || rep.At.IsZero() {
		return commands.Request{}, false, nil
	}
	sp, ok, err := v.StoragePool(rep.Node, rep.Name)
	if err != nil || !ok || !commands.CapacityChanged(sp, rep.TotalKiB, rep.FreeKiB) {
		return commands.Request{}, false, err
	}
	body, _ := json.Marshal(events.StoragePoolCapacityReported{Node: rep.Node, Name: rep.Name, TotalKiB: rep.TotalKiB, FreeKiB: rep.FreeKiB, At: rep.At})
	return commands.Request{Verb: "sp.capacity-report", Body: body, Actor: "agent:" + rep.Node,
		CommandID: fmt.Sprintf("sp-capacity-%s-%s-%d", events.Token(rep.Node), rep.Name, rep.At.UnixNano())}, true, nil
}

// recordCapacity returns the status folder's storage-pool hook: while this serve holds
// the lease it records every report that is news (CapacityFromReport). Agents report
// every 30 s, so a serve that takes the lease records the next report of each pool.
func recordCapacity(ctx context.Context, adm *commands.Admission, db *projections.DB, leading func() (uint64, bool), log zerolog.Logger) func(volume.PoolReport) {
	return func(rep volume.PoolReport) {
		if _, lead := leading(); !lead {
			return
		}
		v, err := db.Read()
		if err != nil {
			log.Warn().Err(err).Msg("capacity report not read")
			return
		}
		req, ok, err := CapacityFromReport(v, rep)
		v.Close()
		if err != nil || !ok {
			return
		}
		r := adm.Submit(ctx, req)
		ev := log.Info()
		if !r.OK {
			ev = log.Warn().Str("error", r.Error.Message)
		}
		ev.Str("node", rep.Node).Str("storage_pool", rep.Name).Uint64("total_kib", rep.TotalKiB).Uint64("free_kib", rep.FreeKiB).
			Bool("recorded", r.OK && len(r.Events) > 0).Msg("storage pool capacity reported")
	}
}
