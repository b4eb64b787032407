package projections

import (
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/cockroachdb/pebble/v2"
)

// The transaction the fold writes through: the batch of dirty keys, the caches of
// decoded specs and hosts across batches, and the commit with the checkpoint.

// tx is one apply transaction: reads see the transaction's own writes first, writes go
// to one Pebble batch committed together with the checkpoint.
type tx struct {
	db    *DB
	dirty map[string][]byte // nil value = deleted
	// lazy holds values written whole (view types that encode themselves) whose
	// encoding waits for the commit or a read: a node's status rewritten by every state
	// change of a replay is encoded once a batch, not once an event. Such a key's value
	// in dirty is lazyMark; a later write of the key replaces the mark, and lazy's entry
	// then counts no more.
	lazy map[string]jsonAppender
	seq  uint64
	// pending counts the events applied since the last commit; batchStart is when the
	// first of them was.
	pending    int
	batchStart time.Time
	// midBatch: the last event applied is one of an atomic batch's but not its last
	// (events.Raw.MidBatch). The views are not committed then: a reader never sees
	// part of a command, or of a group of commands appended together.
	midBatch bool
	queued   bool // the open batch queued outbox entries
	// cache holds values read or written by earlier batches (nil = absent). The projector
	// is the views' only writer, so it stays coherent; it is dropped when it grows past
	// cacheLimit keys, which bounds its memory.
	cache map[string][]byte
	// cacheBytes is the size of cache's keys and values, bounded by cacheBytesLimit.
	cacheBytes int
	// specs and hosts cache decoded node specs by node name and host entries by host (a
	// missing spec is cached as found=false), for the status events that read them on
	// every change. A cached spec is never changed in place.
	specs map[string]*cachedSpec
	hosts map[string]HostEntry
	// retention is how long accepted command ids are kept (0: for good); every
	// pruneEvery-th event prunes the older ones (see pruneCommands).
	retention  time.Duration
	pruneEvery uint64
	// cmdAt holds the command index keys written since the last commit (they go into
	// the commit's batch after once's keys); cmdAtMin is the smallest ("" when none).
	cmdAt    []string
	cmdAtMin string
	// once holds the keys written once and never read back by apply (command records,
	// outbox entries) since the last commit: they go straight into
	// the next commit's batch, ahead of the dirty keys, without a map or a sort. A
	// deletion of one of them in the same transaction (pruneCommands) is a dirty nil,
	// applied after it.
	once    *pebble.Batch
	onceErr error // the first failed write to once, returned by commit
	scratch []byte
}

type cachedSpec struct {
	spec  NodeSpec
	found bool
}

const cacheLimit = 200_000

// cacheBytesLimit bounds the cache's keys and values: with 100,000 definitions the
// key count alone let it hold hundreds of MiB of definitions.
const cacheBytesLimit = 48 << 20

// cachePut remembers key's value for later batches.
func (t *tx) cachePut(k string, v []byte) {
	t.cache[k] = v
	t.cacheBytes += len(k) + len(v)
}

func newTx(db *DB) *tx {
	return &tx{db: db, dirty: map[string][]byte{}, lazy: map[string]jsonAppender{}, cache: map[string][]byte{},
		specs: map[string]*cachedSpec{}, hosts: map[string]HostEntry{}}
}

// nodeSpec reads a node's spec through the decoded cache.
func (t *tx) nodeSpec(name string) (NodeSpec, bool, error) {
	if c, ok := t.specs[name]; ok {
		return c.spec, c.found, nil
	}
	var spec NodeSpec
	found, err := getJSON(t, nodeSpecKey(name), &spec)
	if err == nil {
		t.specs[name] = &cachedSpec{spec, found}
	}
	return spec, found, err
}

func (t *tx) putNodeSpec(spec NodeSpec) error {
	t.specs[spec.Name] = &cachedSpec{spec, true}
	return t.put(nodeSpecKey(spec.Name), spec)
}

func (t *tx) delNodeSpec(name string) {
	t.specs[name] = &cachedSpec{}
	t.del(nodeSpecKey(name))
}

// hostEntry reads a host's index entry through the decoded cache (zero for none).
func (t *tx) hostEntry(host string) (HostEntry, error) {
	if h, ok := t.hosts[host]; ok {
		return h, nil
	}
	var h HostEntry
	_, err := getJSON(t, hostKey(host), &h)
	if err == nil {
		t.hosts[host] = h
	}
	return h, err
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if v, ok := t.dirty[string(key)]; ok {
		if isLazy(v) {
			v = t.lazy[string(key)].appendJSON(nil)
			t.dirty[string(key)] = v
		}
		return v, nil
	}
	if v, ok := t.cache[string(key)]; ok {
		return v, nil
	}
	v, err := pebbleReader{get: func(k []byte) ([]byte, interface{ Close() error }, error) {
		v, c, err := t.db.pdb.Get(k)
		if c == nil {
			return v, nil, err
		}
		return v, c, err
	}}.Get(key)
	if err == nil {
		t.cachePut(string(key), v)
	}
	return v, err
}

// keysWithPrefix lists the keys under prefix as this transaction sees them: committed,
// and written (or deleted) in it, sorted.
func (t *tx) keysWithPrefix(prefix string) ([]string, error) {
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: prefixEnd([]byte(prefix))})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for it.First(); it.Valid(); it.Next() {
		seen[string(it.Key())] = true
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	for k, v := range t.dirty {
		if strings.HasPrefix(k, prefix) {
			seen[k] = v != nil
		}
	}
	out := make([]string, 0, len(seen))
	for k, live := range seen {
		if live {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (t *tx) put(key string, v any) error {
	if a, ok := v.(jsonAppender); ok { // the hot views of node state changes
		t.dirty[key] = lazyMark
		t.lazy[key] = a
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode view %s: %w", key, err)
	}
	t.dirty[key] = raw
	return nil
}

// lazyMark stands in dirty for a value held in lazy until it is encoded.
var lazyMark = []byte{0}

// isLazy says whether a dirty value is lazyMark (the very slice, not equal bytes).
func isLazy(v []byte) bool { return len(v) == 1 && &v[0] == &lazyMark[0] }

// putRaw writes an encoded value (nil: a deletion).
func (t *tx) putRaw(key string, v []byte) { t.dirty[key] = v }

// putOnce writes a key apply never reads back (see tx.once); key and v may be reused by the
// caller afterwards. A failed write fails the commit.
func (t *tx) putOnce(key, v []byte) {
	if t.once == nil {
		t.once = t.db.pdb.NewBatch()
	}
	if err := t.once.Set(key, v, nil); err != nil && t.onceErr == nil {
		t.onceErr = err
	}
}

func (t *tx) putUint(key string, v uint64) { t.putRaw(key, encodeUint(v)) }
func (t *tx) mark(key string)              { t.putRaw(key, []byte("1")) }
func (t *tx) del(key string)               { t.putRaw(key, nil) }

// commit writes the dirty keys and the checkpoint in one batch. Views can always be
// rebuilt from the stream, so the batch is not fsynced; Pebble's WAL still applies it
// whole or not at all, which keeps views and checkpoint in step.
func (t *tx) commit() error {
	b := t.once
	if b == nil {
		b = t.db.pdb.NewBatch()
	}
	t.once = nil
	defer b.Close()
	if err := t.onceErr; err != nil {
		t.onceErr = nil
		return err
	}
	for k, a := range t.lazy {
		if isLazy(t.dirty[k]) {
			t.dirty[k] = a.appendJSON(nil)
		}
	}
	clear(t.lazy)
	// The command index entries of the batch, written once like the command records
	// but after them: two interleaved runs of ascending keys would cost the memtable's
	// skiplist a full search per key, two runs one after the other almost none. A
	// deletion of one by pruneCommands is a dirty nil, applied after.
	for _, k := range t.cmdAt {
		if err := b.Set([]byte(k), []byte("1"), nil); err != nil {
			return err
		}
	}
	// Sorted keys go into the memtable's skiplist with far better locality.
	keys := make([]string, 0, len(t.dirty))
	for k := range t.dirty {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := t.dirty[k]
		var err error
		if v == nil {
			err = b.Delete([]byte(k), nil)
		} else {
			err = b.Set([]byte(k), v, nil)
		}
		if err != nil {
			return err
		}
	}
	if err := b.Set(keyCheckpoint, encodeUint(t.seq), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	if len(t.cache)+len(t.dirty) > cacheLimit || t.cacheBytes > cacheBytesLimit {
		// A new map: a cleared one keeps the buckets of its largest size.
		t.cache, t.cacheBytes = map[string][]byte{}, 0
	}
	if len(t.specs)+len(t.hosts) > cacheLimit {
		clear(t.specs)
		clear(t.hosts)
	}
	for k, v := range t.dirty {
		if strings.HasPrefix(k, "v/cmd/") || strings.HasPrefix(k, commandAtPrefix) || strings.HasPrefix(k, outboxPrefix) {
			continue // written once, never read back by apply
		}
		t.cachePut(k, v)
	}
	clear(t.dirty)
	t.cmdAt, t.cmdAtMin = t.cmdAt[:0], ""
	return nil
}
