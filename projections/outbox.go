package projections

import (
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// OutboxEntry asks the dispatcher to publish the desired state of Resource on Node.
type OutboxEntry struct {
	Node     string
	Resource string
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
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd([]byte(outboxPrefix))})
	if err != nil {
		v.Close()
		return nil, err
	}
	defer it.Close()
	seen := map[OutboxEntry]bool{}
	n := 0
	for it.First(); it.Valid() && n < limit; it.Next() {
		n++
		// o/dispatch/<seq20>/<node>/<rd>
		rest := strings.TrimPrefix(string(it.Key()), outboxPrefix)
		parts := strings.SplitN(rest, "/", 3)
		b.keys = append(b.keys, append([]byte(nil), it.Key()...))
		if len(parts) != 3 {
			continue
		}
		e := OutboxEntry{Node: parts[1], Resource: parts[2]}
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
