// Package statusfold folds what agents observe into the views: it consumes the status
// stream's DRBD, shared-pool and storage-pool reports, checks each against the subject
// it came on (only that node's agent may publish there), keeps the latest per object and
// node (projections.DB.PutStatus) and hands them to the policies' hooks.
package statusfold

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var statusFolded = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_status_folded_total",
	Help: "Observed-state reports folded into the views, by outcome (ok, invalid)."}, []string{"outcome"})

// Hooks are called by Run with reports once they are folded (after a
// restart with the latest of each subject again, so a reaction is not lost while serve
// is down). Nil hooks are skipped.
type Hooks struct {
	DRBD     func(st drbd.Status)
	Pool     func(node string, st zpool.Status)
	Capacity func(rep backing.PoolReport)
}

// Run consumes the agents' DRBD, shared-pool and storage-pool status reports
// (<prefix>.status.*.drbd.*, .zpool.* and .sp.*, the latest of each subject first, then
// every new one) and keeps the latest per object and node in the views until ctx ends.
// The node and object come from the subject, which only that node's agent may publish
// to; a report naming another is refused. hooks see the pool and storage-pool reports.
func Run(ctx context.Context, db *projections.DB, js jetstream.JetStream, names events.Names, log zerolog.Logger, hooks Hooks) error {
	filter := names.Prefix + ".status.*.drbd.*"
	cons, err := js.OrderedConsumer(ctx, names.StatusStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter, names.Prefix + ".status.*.zpool.*", names.Prefix + ".status.*.sp.*"}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return fmt.Errorf("status: consume %s: %w", filter, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		pool, capacity, replica, err := foldStatus(db, names, m.Subject(), m.Data())
		if err != nil {
			statusFolded.WithLabelValues("invalid").Inc()
			log.Warn().Err(err).Str("subject", m.Subject()).Msg("status report skipped")
			return
		}
		statusFolded.WithLabelValues("ok").Inc()
		if pool != nil && hooks.Pool != nil {
			hooks.Pool(pool.Node, *pool)
		}
		if capacity != nil && hooks.Capacity != nil {
			hooks.Capacity(*capacity)
		}
		if replica != nil && hooks.DRBD != nil {
			hooks.DRBD(*replica)
		}
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	return nil
}

// foldStatus checks one report against its subject and stores it; a pool or storage
// pool report is returned (nil for an empty one and for DRBD reports).
func foldStatus(db *projections.DB, names events.Names, subject string, data []byte) (*zpool.Status, *backing.PoolReport, *drbd.Status, error) {
	node, kind, id, ok := names.ParseStatus(subject)
	if !ok || (kind != projections.KindDRBD && kind != projections.KindZpool && kind != projections.KindSP) {
		return nil, nil, nil, fmt.Errorf("not a DRBD, pool or storage pool status subject")
	}
	switch kind {
	case projections.KindZpool:
		st, err := foldOne(db, projections.KindZpool, node, id, data, func(st zpool.Status) (bool, error) {
			if st.Node != node || st.Pool != id {
				return false, fmt.Errorf("status names pool %s on %s but was published for %s on %s", st.Pool, st.Node, id, node)
			}
			return true, nil
		})
		return st, nil, nil, err
	case projections.KindSP:
		rep, err := foldOne(db, projections.KindSP, node, id, data, func(rep backing.PoolReport) (bool, error) {
			if rep.Node != node || rep.Name != id {
				return false, fmt.Errorf("report names storage pool %s on %s but was published for %s on %s", rep.Name, rep.Node, id, node)
			}
			return true, nil
		})
		return nil, rep, nil, err
	}
	st, err := foldOne(db, projections.KindDRBD, node, id, data, func(st drbd.Status) (bool, error) {
		if st.Node != node || st.Resource != id {
			return false, fmt.Errorf("status names %s on %s but was published for %s on %s", st.Resource, st.Node, id, node)
		}
		return st.Phase != drbd.PhaseRemoved, nil
	})
	return nil, nil, st, err
}

// foldOne stores (keep true) or deletes a status report of kind for id on node after check accepted
// it; an empty report deletes. It returns the report (nil when empty).
func foldOne[T any](db *projections.DB, kind, node, id string, data []byte, check func(T) (keep bool, err error)) (*T, error) {
	var st *T
	keep := false
	if len(data) > 0 {
		st = new(T)
		if err := json.Unmarshal(data, st); err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		var err error
		if keep, err = check(*st); err != nil {
			return nil, err
		}
	}
	if !keep {
		data = nil
	}
	return st, db.PutStatus(kind, node, id, data)
}
