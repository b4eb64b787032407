package projections_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/projections"
)

// An empty store records the format; a store of an older format (here one without a
// recorded format, as every store before formats) loses its views and checkpoint in
// one batch so the projector replays the stream into it; a newer one is refused and
// left as it is.
func TestViewsFormatUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "views")
	db, err := projections.Open(dir)
	require.NoError(t, err)
	from, rebuilt, err := db.Upgrade()
	require.NoError(t, err)
	require.False(t, rebuilt, "an empty store has nothing to rebuild")
	require.Equal(t, 0, from)
	f, err := db.Format()
	require.NoError(t, err)
	require.Equal(t, projections.ViewsFormat, f)
	require.NoError(t, db.Close())

	// An old store: views, a checkpoint, no format.
	raw, err := pebble.Open(dir, &pebble.Options{})
	require.NoError(t, err)
	require.NoError(t, raw.Delete([]byte("m/format"), pebble.Sync))
	require.NoError(t, raw.Set([]byte("m/checkpoint"), []byte{0, 0, 0, 0, 0, 0, 0, 42}, pebble.Sync))
	require.NoError(t, raw.Set([]byte("v/rd/r1"), []byte(`{"name":"r1"}`), pebble.Sync))
	require.NoError(t, raw.Close())
	db, err = projections.Open(dir)
	require.NoError(t, err)
	cp, err := db.Checkpoint()
	require.NoError(t, err)
	require.Equal(t, uint64(42), cp)
	from, rebuilt, err = db.Upgrade()
	require.NoError(t, err)
	require.True(t, rebuilt)
	require.Equal(t, 0, from)
	cp, err = db.Checkpoint()
	require.NoError(t, err)
	require.Zero(t, cp, "the projector starts again from sequence 1")
	d, err := db.Digest()
	require.NoError(t, err)
	require.Zero(t, d.Keys, "no view of the old format is left")
	require.NoError(t, db.Close())

	// A newer store.
	raw, err = pebble.Open(dir, &pebble.Options{})
	require.NoError(t, err)
	require.NoError(t, raw.Set([]byte("m/format"), []byte(strconv.Itoa(projections.ViewsFormat+1)), pebble.Sync))
	require.NoError(t, raw.Set([]byte("v/rd/r1"), []byte(`{"name":"r1"}`), pebble.Sync))
	require.NoError(t, raw.Close())
	db, err = projections.Open(dir)
	require.NoError(t, err)
	defer db.Close()
	_, _, err = db.Upgrade()
	require.ErrorIs(t, err, projections.ErrNewerFormat)
	require.ErrorContains(t, err, fmt.Sprintf("format %d, this cairn reads format %d", projections.ViewsFormat+1, projections.ViewsFormat))
	d, err = db.Digest()
	require.NoError(t, err)
	require.Equal(t, 1, d.Keys, "a refused store is left as it is")
}
