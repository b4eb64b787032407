package projections

import (
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Kinds of desired state the outbox queues.
const (
	KindDRBD  = "drbd"
	KindZpool = "zpool"
	// KindSP: a storage pool its node's agent measures and reports.
	KindSP = "sp"
)

// OutboxEntry asks the dispatcher to publish the desired state of (Kind, ID) on Node:
// <prefix>.node.<Node>.<Kind>.<ID>.
type OutboxEntry struct {
	Node string
	Kind string
	ID   string
}

// OutboxBatch is a consistent read of the oldest outbox entries together with the views
// they refer to: render desired state from View, publish it, then Ack.
type OutboxBatch struct {
	View    *View
	Entries []OutboxEntry // distinct (node, resource) pairs, oldest first
	keys    [][]byte
}

// Outbox reads up to limit entries (before coalescing) from one snapshot. The batch's
// View is at least as new as every entry; close it when done. An empty batch has no
// entries.
func (db *DB) Outbox(limit int) (*OutboxBatch, error) {
	v, err := db.Read()
	if err != nil {
		return nil, err
	}
	b := &OutboxBatch{View: v}
	db.outboxMu.Lock()
	from := db.outboxFrom
	db.outboxMu.Unlock()
	if from == nil {
		from = []byte(outboxPrefix)
	}
	it, err := v.newIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd([]byte(outboxPrefix))})
	if err != nil {
		v.Close()
		return nil, err
	}
	defer it.Close()
	seen := map[OutboxEntry]bool{}
	n := 0
	for it.First(); it.Valid() && n < limit; it.Next() {
		n++
		// o/dispatch/<seq20>/<node>/<kind>/<id>
		rest := strings.TrimPrefix(string(it.Key()), outboxPrefix)
		parts := strings.SplitN(rest, "/", 4)
		b.keys = append(b.keys, append([]byte(nil), it.Key()...))
		if len(parts) != 4 {
			continue
		}
		e := OutboxEntry{Node: parts[1], Kind: parts[2], ID: parts[3]}
		if !seen[e] {
			seen[e] = true
			b.Entries = append(b.Entries, e)
		}
	}
	return b, it.Error()
}

// Ack deletes the batch's entries, one point deletion each (range deletions would pile
// up in the memtable and slow every read). Entries are written once and never
// rewritten, so an entry queued after the read is never lost.
func (db *DB) Ack(b *OutboxBatch) error {
	if len(b.keys) == 0 {
		return nil
	}
	batch := db.pdb.NewBatch()
	defer batch.Close()
	for _, k := range b.keys {
		if err := batch.Delete(k, nil); err != nil {
			return err
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return err
	}
	db.outboxMu.Lock()
	db.outboxFrom = append(append([]byte(nil), b.keys[len(b.keys)-1]...), 0)
	db.outboxMu.Unlock()
	return nil
}
