package policy

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/pools"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/rs/zerolog"
)

// ContestFromStatus turns an agent's pool status into the pool.contest command it calls
// for: a report with phase contested (the agent saw another host write the pool it
// imported, and fenced it). ok is false for every other report. node is the node the
// subject names (only its agent may publish there); a report naming another is ignored.
// The command id derives from pool, node and grant, so two serves, or a repeated
// report, record the contest once.
func ContestFromStatus(node string, st zpool.Status) (admission.Request, bool) {
	if st.Phase != zpool.PhaseContested || st.Node != node || st.Pool == "" {
		return admission.Request{}, false
	}
	reason := st.Error
	if reason == "" {
		reason = "another host wrote the pool's MMP uberblocks after import"
	}
	body, _ := json.Marshal(pools.PoolContest{Pool: st.Pool, Node: node, ForeignHostID: st.ForeignHostID,
		ForeignHost: st.ForeignHost, Reason: reason})
	return admission.Request{Verb: "pool.contest", Body: body, Actor: "agent:" + node,
		CommandID: commandID("pool-contest", st.Pool, node, strconv.FormatUint(st.GrantSeq, 10))}, true
}

// ContestPools returns the status folder's pool hook: it submits pool.contest for
// every contested report while this serve holds the lease (leading; statusfold.Run replays
// the latest report of each subject after a restart, RecontestPools those folded while
// another serve led, and the command id makes a repeated report a duplicate).
func ContestPools(ctx context.Context, adm *admission.Admission, leading func() (uint64, bool), log zerolog.Logger) func(node string, st zpool.Status) {
	return func(node string, st zpool.Status) {
		req, ok := ContestFromStatus(node, st)
		if !ok {
			return
		}
		if _, lead := leading(); !lead {
			return
		}
		r := adm.Submit(ctx, req)
		ev := log.Warn().Str("pool", st.Pool).Str("node", node).Str("foreign_hostid", st.ForeignHostID)
		if !r.OK {
			ev = ev.Str("error", r.Error.Message)
		}
		ev.Bool("recorded", r.OK && len(r.Events) > 0).Msg("pool contested")
	}
}

// RecontestPools hands every pool status in the views to onPool once (a serve that just
// took the lease acts on contested reports folded before), then waits for ctx.
func RecontestPools(ctx context.Context, db *projections.DB, onPool func(node string, st zpool.Status), log zerolog.Logger) {
	v, err := db.Read()
	if err != nil {
		log.Error().Err(err).Msg("pool statuses unreadable")
		return
	}
	pools, err := v.Pools()
	if err == nil {
		for _, p := range pools {
			sts, serr := v.PoolStatus(p.Name)
			if serr != nil {
				err = serr
				break
			}
			for node, st := range sts {
				onPool(node, st)
			}
		}
	}
	v.Close()
	if err != nil {
		log.Error().Err(err).Msg("pool statuses unreadable")
	}
	<-ctx.Done()
}
