package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/rs/zerolog"
)

// ContestFromStatus turns an agent's pool status into the pool.contest command it calls
// for: a report with phase contested (the agent saw another host write the pool it
// imported, and fenced it). ok is false for every other report. node is the node the
// subject names (only its agent may publish there); a report naming another is ignored.
// The command id derives from pool, node and grant, so two serves, or a repeated
// report, record the contest once.
func ContestFromStatus(node string, st zpool.Status) (commands.Request, bool) {
	if st.Phase != zpool.PhaseContested || st.Node != node || st.Pool == "" {
		return commands.Request{}, false
	}
	reason := st.Error
	if reason == "" {
		reason = "another host wrote the pool's MMP uberblocks after import"
	}
	body, _ := json.Marshal(commands.PoolContest{Pool: st.Pool, Node: node, ForeignHostID: st.ForeignHostID,
		ForeignHost: st.ForeignHost, Reason: reason})
	return commands.Request{Verb: "pool.contest", Body: body, Actor: "agent:" + node,
		CommandID: fmt.Sprintf("pool-contest-%s-%s-%d", st.Pool, node, st.GrantSeq)}, true
}

// contestPools returns the status folder's pool hook: it submits pool.contest for
// every contested report (FoldStatus replays the latest report of each subject after a
// restart, and the command id makes a repeated report a duplicate).
func contestPools(ctx context.Context, adm *commands.Admission, log zerolog.Logger) func(node string, st zpool.Status) {
	return func(node string, st zpool.Status) {
		req, ok := ContestFromStatus(node, st)
		if !ok {
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
