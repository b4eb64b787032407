package projections_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/stretchr/testify/require"
)

// Folding a serve's stream with DB.Fold (the in-memory log's path, no projector) gives
// the projector's views exactly; a gap or a repeat in the sequences applies nothing.
func TestFoldEqualsTheProjector(t *testing.T) {
	s := servertest.Start(t)
	history(t, s, rand.New(rand.NewPCG(3, 4)), 200)
	var evs []events.Event
	require.NoError(t, s.Store.ReadRaw(context.Background(), events.Range{}, func(r events.Raw) bool {
		ev, err := events.DecodeStored(r)
		require.NoError(t, err)
		evs = append(evs, ev)
		return true
	}))
	require.NotEmpty(t, evs)

	db, err := projections.OpenInMem()
	require.NoError(t, err)
	defer db.Close()
	half := len(evs) / 2
	require.ErrorContains(t, db.Fold(s.Store.Names(), evs[1:]), "without gaps", "a fold that skips the first event")
	require.NoError(t, db.Fold(s.Store.Names(), evs[:half]))
	require.ErrorContains(t, db.Fold(s.Store.Names(), evs[half-1:]), "without gaps", "a fold that repeats an event")
	require.NoError(t, db.Fold(s.Store.Names(), evs[half:]))

	want, err := s.DB.Digest()
	require.NoError(t, err)
	got, err := db.Digest()
	require.NoError(t, err)
	require.Equal(t, want, got)
}
