package projections

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// DefaultCommandRetention is how long the views keep an accepted command's id (and so
// answer a retry with it from its record, bound to its request digest).
const DefaultCommandRetention = 7 * 24 * time.Hour

// DefaultPruneEvery is how often (in events) command records past the retention go.
const DefaultPruneEvery = 1024

const commandAtPrefix = "v/cmd-at/"

// commandAtKey indexes one event of a command by its time (seconds, 12 digits), its
// command id and its sequence: the order in which pruneCommands finds the records past
// the retention, and the record key (commandEventKey) to delete with it.
func commandAtKey(at time.Time, id string, seq uint64) string {
	b := make([]byte, 0, len(commandAtPrefix)+12+1+len(id)+1+20)
	b = append(b, commandAtPrefix...)
	b = appendPadded(b, uint64(max(at.Unix(), 0)), 12)
	b = append(b, '/')
	b = append(b, id...)
	b = append(b, '/')
	return string(appendPadded(b, seq, 20))
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(b []byte, v uint64, width int) []byte {
	var digits [20]byte
	n := strconv.AppendUint(digits[:0], v, 10)
	for range width - len(n) {
		b = append(b, '0')
	}
	return append(b, n...)
}

// pruneCommands deletes the records of command events older than before, and their
// index entries. It runs at fixed sequences (every pruneEvery-th event) with the time
// of that event, and sees the views as the events before it left them (committed, and
// written in this transaction), so a rebuild, a replay stopped anywhere and a live run
// delete exactly the same keys: the digest does not depend on when batches were
// committed. Retries of a pruned command id count as new commands.
func pruneCommands(t *tx, before time.Time) error {
	upper := fmt.Sprintf("%s%012d", commandAtPrefix, max(before.Unix(), 0))
	var old []string
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte(commandAtPrefix), UpperBound: []byte(upper)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := string(it.Key())
		if v, written := t.dirty[k]; !written || v != nil {
			old = append(old, k)
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if t.cmdAtMin != "" && t.cmdAtMin < upper { // else none written in this transaction is old
		for _, k := range t.cmdAt { // written in this transaction, not committed yet
			if v, written := t.dirty[k]; k < upper && (!written || v != nil) {
				old = append(old, k) // not deleted by an earlier prune of this transaction
			}
		}
	}
	for _, k := range old {
		rest := strings.TrimPrefix(k, commandAtPrefix)
		parts := strings.Split(rest, "/")
		if len(parts) != 3 {
			return fmt.Errorf("command index key %q", k)
		}
		seq, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil {
			return fmt.Errorf("command index key %q: %w", k, err)
		}
		t.del(commandEventKey(parts[1], seq))
		t.del(k)
	}
	return nil
}
