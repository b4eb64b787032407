package projections

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// ViewsFormat is the format of the views this cairn writes. It goes up whenever views
// written by an older cairn would read wrong with this one (a new index, a field a
// lookup relies on, a changed key): such a store is rebuilt from the events stream when
// serve opens it (Upgrade), never served half-upgraded.
//
//	0  views from before formats were recorded (each upgrade needed `cairn views rebuild`)
//	1  the command index, v/rg-rd/, create_timestamp, v/replacing/
//	2  no domain host lists (v/hosts/<domain>) on a cluster without failure domains
//	3  the replica count of every definition (v/rd-replicas/), which deep pages of
//	   LINSTOR's resource list skip with
//	4  a clone's failed snapshot stays in the snapshots-under-way index (v/snap-busy/)
//	   until deleted, so the lease holder starts the clone again; remotes, backups
//	   (v/backup-busy/) and schedules
//	5  this format: DrbdOptions/auto-quorum of the controller (kept with its options) and
//	   of a group move their definitions' desired state (a new revision)
const ViewsFormat = 5

var keyFormat = []byte("m/format")

// ErrNewerFormat is the error of a views store written by a newer cairn.
var ErrNewerFormat = errors.New("views of a newer format")

// Format returns the format the store was written in: 0 for a store from before
// formats were recorded; an empty store has ViewsFormat once Upgrade ran.
func (db *DB) Format() (int, error) {
	v, closer, err := db.pdb.Get(keyFormat)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, fmt.Errorf("views format %q: %w", v, err)
	}
	return n, nil
}

// Upgrade makes the store ViewsFormat. An empty store just records it. A store of an
// older format loses every view and its checkpoint in one atomic batch that records
// the new format, so the projector replays the stream from sequence 1 into it (a crash
// midway leaves either the old store or the empty new one, never a mix); from says what
// it was and rebuilt is true. A store of a newer format is refused with ErrNewerFormat
// (this cairn cannot read it; the newer one can, or `cairn views rebuild` by this one).
func (db *DB) Upgrade() (from int, rebuilt bool, err error) {
	from, err = db.Format()
	switch {
	case err != nil:
		return from, false, err
	case from == ViewsFormat:
		return from, false, nil
	case from > ViewsFormat:
		return from, false, fmt.Errorf("%w: the store is format %d, this cairn reads format %d: run the cairn that wrote it, or `cairn views rebuild` with this one", ErrNewerFormat, from, ViewsFormat)
	}
	empty, err := db.empty()
	if err != nil {
		return from, false, err
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	if !empty {
		if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
			return from, false, err
		}
	}
	if err := b.Set(keyFormat, []byte(strconv.Itoa(ViewsFormat)), nil); err != nil {
		return from, false, err
	}
	sync := pebble.Sync
	if db.bulk { // no WAL: durable at Close, which flushes
		sync = pebble.NoSync
	}
	if err := b.Commit(sync); err != nil {
		return from, false, err
	}
	return from, !empty, nil
}

// empty reports whether the store holds no key at all.
func (db *DB) empty() (bool, error) {
	it, err := db.pdb.NewIter(nil)
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}
