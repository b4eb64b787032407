package projections

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/cockroachdb/pebble/v2"
)

// Observed state lives under s/: its only writer is the status folder, it is not part
// of the digest (it is not derived from CAIRN_EVENTS) and a rebuild leaves it alone.
const statusPrefix = "s/drbd/"

func drbdStatusKey(rd, node string) string { return statusPrefix + rd + "/" + node }

const poolStatusPrefix = "s/zpool/"

func poolStatusKey(pool, node string) string { return poolStatusPrefix + pool + "/" + node }

const spStatusPrefix = "s/sp/"

func spStatusKey(node, pool string) string { return spStatusPrefix + node + "/" + pool }

// PutStatus stores the latest report of kind (KindDRBD, KindZpool, KindSP) for object
// id on node in the observed-state keyspace, or deletes it when data is empty. Only the
// status folder (projections/statusfold) writes here; it checks the report against its
// subject first. An unknown kind is an error and stores nothing.
func (db *DB) PutStatus(kind, node, id string, data []byte) error {
	var key string
	switch kind {
	case KindDRBD:
		key = drbdStatusKey(id, node)
	case KindZpool:
		key = poolStatusKey(id, node)
	case KindSP:
		key = spStatusKey(node, id)
	default:
		return fmt.Errorf("status: kind %q has no observed state", kind)
	}
	if len(data) == 0 {
		return db.pdb.Delete([]byte(key), pebble.NoSync)
	}
	return db.pdb.Set([]byte(key), data, pebble.NoSync)
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
func (v *View) StoragePoolReport(node, pool string) (backing.PoolReport, bool, error) {
	var rep backing.PoolReport
	ok, err := getJSON(v.r, spStatusKey(node, pool), &rep)
	return rep, ok, err
}

// PoolStatus returns the latest observed state of pool by node.
func (v *View) PoolStatus(pool string) (map[string]zpool.Status, error) {
	return scanStatus(v, poolStatusPrefix+pool+"/", func(st zpool.Status) string { return st.Node })
}

// ReplicaUpToDate reports whether replica r of rd is UpToDate by its own node's latest report:
// the report is of r's current disk (its incarnation), carried out (applied), and every
// volume of rd is UpToDate there. A report of an earlier disk of the node, one still
// pending, or a missing volume is not UpToDate.
func ReplicaUpToDate(rd ResourceDefinition, r Replica, statuses map[string]drbd.Status) bool {
	st, ok := statuses[r.Node]
	if !ok || st.Incarnation != r.Incarnation || st.Phase != drbd.PhaseApplied || len(st.Volumes) < len(rd.Volumes) {
		return false
	}
	for _, v := range st.Volumes {
		if v.DiskState != "UpToDate" {
			return false
		}
	}
	return true
}
