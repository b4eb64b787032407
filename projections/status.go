package projections

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/volume"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var statusFolded = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_status_folded_total",
	Help: "Observed-state reports folded into the views, by outcome (ok, invalid)."}, []string{"outcome"})

// Observed state lives under s/: its only writer is the status folder, it is not part
// of the digest (it is not derived from CAIRN_EVENTS) and a rebuild leaves it alone.
const statusPrefix = "s/drbd/"

func drbdStatusKey(rd, node string) string { return statusPrefix + rd + "/" + node }

const poolStatusPrefix = "s/zpool/"

func poolStatusKey(pool, node string) string { return poolStatusPrefix + pool + "/" + node }

const spStatusPrefix = "s/sp/"

func spStatusKey(node, pool string) string { return spStatusPrefix + node + "/" + pool }

// StatusHooks are called by FoldStatus with reports once they are folded (after a
// restart with the latest of each subject again, so a reaction is not lost while serve
// is down). Nil hooks are skipped.
type StatusHooks struct {
	DRBD     func(st drbd.Status)
	Pool     func(node string, st zpool.Status)
	Capacity func(rep volume.PoolReport)
}

// FoldStatus consumes the agents' DRBD, shared-pool and storage-pool status reports
// (<prefix>.status.*.drbd.*, .zpool.* and .sp.*, the latest of each subject first, then
// every new one) and keeps the latest per object and node in the views until ctx ends.
// The node and object come from the subject, which only that node's agent may publish
// to; a report naming another is refused. hooks see the pool and storage-pool reports.
func FoldStatus(ctx context.Context, db *DB, js jetstream.JetStream, names events.Names, log zerolog.Logger, hooks StatusHooks) error {
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
func foldStatus(db *DB, names events.Names, subject string, data []byte) (*zpool.Status, *volume.PoolReport, *drbd.Status, error) {
	node, kind, id, ok := names.ParseStatus(subject)
	if !ok || (kind != KindDRBD && kind != KindZpool && kind != KindSP) {
		return nil, nil, nil, fmt.Errorf("not a DRBD, pool or storage pool status subject")
	}
	switch kind {
	case KindZpool:
		st, err := foldOne(db, poolStatusKey(id, node), data, func(st zpool.Status) (bool, error) {
			if st.Node != node || st.Pool != id {
				return false, fmt.Errorf("status names pool %s on %s but was published for %s on %s", st.Pool, st.Node, id, node)
			}
			return true, nil
		})
		return st, nil, nil, err
	case KindSP:
		rep, err := foldOne(db, spStatusKey(node, id), data, func(rep volume.PoolReport) (bool, error) {
			if rep.Node != node || rep.Name != id {
				return false, fmt.Errorf("report names storage pool %s on %s but was published for %s on %s", rep.Name, rep.Node, id, node)
			}
			return true, nil
		})
		return nil, rep, nil, err
	}
	st, err := foldOne(db, drbdStatusKey(id, node), data, func(st drbd.Status) (bool, error) {
		if st.Node != node || st.Resource != id {
			return false, fmt.Errorf("status names %s on %s but was published for %s on %s", st.Resource, st.Node, id, node)
		}
		return st.Phase != drbd.PhaseRemoved, nil
	})
	return nil, nil, st, err
}

// foldOne stores (keep true) or deletes a status report under key after check accepted
// it; an empty report deletes. It returns the report (nil when empty).
func foldOne[T any](db *DB, key string, data []byte, check func(T) (keep bool, err error)) (*T, error) {
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
		return st, db.pdb.Delete([]byte(key), pebble.NoSync)
	}
	return st, db.pdb.Set([]byte(key), data, pebble.NoSync)
}

// scanStatus reads every status report under prefix, keyed by node.
func scanStatus[T any](v *View, prefix string, node func(T) string) (map[string]T, error) {
	out := map[string]T{}
	err := v.scan(prefix, func(key string, val []byte) error {
		var st T
		if err := json.Unmarshal(val, &st); err != nil {
			return fmt.Errorf("view %s: %w", key, err)
		}
		out[node(st)] = st
		return nil
	})
	return out, err
}

// ResourceStatus returns the latest observed state of rd by node.
func (v *View) ResourceStatus(rd string) (map[string]drbd.Status, error) {
	return scanStatus(v, statusPrefix+rd+"/", func(st drbd.Status) string { return st.Node })
}

// EachResourceStatus calls fn with every replica's latest observed state, by definition
// then node, in one scan.
func (v *View) EachResourceStatus(fn func(drbd.Status) error) error {
	return v.scan(statusPrefix, func(key string, val []byte) error {
		var st drbd.Status
		if err := json.Unmarshal(val, &st); err != nil {
			return fmt.Errorf("view %s: %w", key, err)
		}
		return fn(st)
	})
}

// StoragePoolReport returns the latest report of a node's storage pool (ok false before
// its agent's first).
func (v *View) StoragePoolReport(node, pool string) (volume.PoolReport, bool, error) {
	var rep volume.PoolReport
	ok, err := getJSON(v.r, spStatusKey(node, pool), &rep)
	return rep, ok, err
}

// PoolStatus returns the latest observed state of pool by node.
func (v *View) PoolStatus(pool string) (map[string]zpool.Status, error) {
	return scanStatus(v, poolStatusPrefix+pool+"/", func(st zpool.Status) string { return st.Node })
}
