// Package projections folds the events stream into views kept in Pebble, and serves
// reads of those views. Every Pebble batch carries the view changes of a run of events
// together with the checkpoint (the stream sequence of the last of them), so a crash
// neither applies an event twice nor skips one: on restart the projector resumes after
// the checkpoint it finds.
//
// Key space:
//
//	m/checkpoint              last applied stream sequence (not part of the digest)
//	v/cluster                 the cluster
//	v/node/<name>/spec        a node's desired spec (written by node.added/removed only)
//	v/node/<name>/status      a node's observed state (written by node.state-changed only)
//	v/cmd/<command id>/<seq>  each event an accepted command appended (idempotency)
//	v/rejected/<seq>          a stored message that is not a valid event, and why
//	x/subj/<subject>          last sequence of an event subject (admission boundaries)
//	x/agg/<aggregate>         last sequence of any event of an aggregate type
package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	json "github.com/segmentio/encoding/json"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var (
	keyCheckpoint = []byte("m/checkpoint")
	prefixViews   = []byte("v/")
	prefixExpect  = []byte("x/")
)

// DB is the Pebble store of the views.
type DB struct {
	pdb  *pebble.DB
	bulk bool
	// outboxFrom is where the next outbox read starts: just past the last acknowledged
	// entry, so reads do not wade through the tombstones of published ones.
	outboxMu   sync.Mutex
	outboxFrom []byte
}

// Open opens (creating if needed) the views store in dir.
func Open(dir string) (*DB, error) {
	return open(dir, nil, false, false)
}

// OpenExisting opens a views store that must exist already (the offline tools: a
// mistyped --data must not create an empty store and report its digest).
func OpenExisting(dir string) (*DB, error) {
	return open(dir, nil, false, true)
}

// OpenBulk opens a fresh views store for a bulk load (rebuild): no write-ahead log, so
// nothing is durable until Close, which flushes. A crash mid-load leaves a store to
// throw away; the rebuild starts it afresh.
func OpenBulk(dir string) (*DB, error) {
	return open(dir, nil, true, false)
}

// OpenInMem opens a views store held in memory (tests and `views at`).
func OpenInMem() (*DB, error) {
	return open("", vfs.NewMem(), true, false)
}

func open(dir string, fs vfs.FS, bulk, mustExist bool) (*DB, error) {
	// Bloom filters on every level make a lookup of an absent key (a new command id, a
	// new subject) cheap; the cache and memtable are sized for views, not the log.
	cache := pebble.NewCache(64 << 20)
	defer cache.Unref()
	opts := &pebble.Options{Logger: quietLogger{}, Cache: cache, MemTableSize: 32 << 20, DisableWAL: bulk, ErrorIfNotExists: mustExist}
	if bulk {
		// A bulk load writes each key about once: compacting while loading is wasted
		// work. The store compacts in the background once opened normally.
		opts.DisableAutomaticCompactions = true
		opts.L0StopWritesThreshold = 1 << 20
		opts.MemTableSize = 64 << 20
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if fs != nil {
		opts.FS = fs
	}
	pdb, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open views store %s: %w", dir, err)
	}
	return &DB{pdb: pdb, bulk: bulk}, nil
}

// Close closes the store, flushing it first after a bulk load.
func (db *DB) Close() error {
	if db.bulk {
		if err := db.pdb.Flush(); err != nil {
			db.pdb.Close()
			return err
		}
	}
	return db.pdb.Close()
}

// Checkpoint returns the stream sequence of the last applied event (0 for none).
func (db *DB) Checkpoint() (uint64, error) {
	v, closer, err := db.pdb.Get(keyCheckpoint)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	return binary.BigEndian.Uint64(v), nil
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// reader is what a snapshot and the apply transaction have in common.
type reader interface {
	Get(key []byte) ([]byte, error)
}

// getJSON reads key into v; found is false when the key does not exist.
func getJSON(r reader, key string, v any) (bool, error) {
	raw, err := r.Get([]byte(key))
	if err != nil || raw == nil {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("view %s: %w", key, err)
	}
	return true, nil
}

func getUint(r reader, key string) (uint64, error) {
	raw, err := r.Get([]byte(key))
	if err != nil || raw == nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(raw), nil
}

func encodeUint(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// pebbleReader adapts a snapshot to reader, copying values out.
type pebbleReader struct {
	get func([]byte) ([]byte, interface{ Close() error }, error)
}

func (p pebbleReader) Get(key []byte) ([]byte, error) {
	v, closer, err := p.get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, nil
}
