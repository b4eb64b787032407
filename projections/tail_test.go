package projections

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// The projector commits views in the middle of an atomic batch only once a read of the
// stream proves the batch's end is gone (deleted): a batch whose end is stored but
// late to arrive (an ordered consumer reset mid-batch) is waited for. On the old code
// the views were committed after a second either way, and readers saw part of a
// command.
func TestBatchTailStored(t *testing.T) {
	js := testtools.JetStream(t)
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, AllowAtomicPublish: true})
	require.NoError(t, err)
	var batch []*nats.Msg
	for i := range 3 {
		batch = append(batch, &nats.Msg{Subject: fmt.Sprintf("t.%d", i), Data: []byte("x"), Header: nats.Header{}})
	}
	_, err = jetstreamext.PublishMsgBatch(ctx, js, batch) // seqs 1-3
	require.NoError(t, err)
	_, err = js.Publish(ctx, "t.single", []byte("y")) // seq 4
	require.NoError(t, err)
	for _, c := range []struct {
		seq    uint64
		stored bool
	}{{1, true}, {2, true}, {3, false}, {4, false}, {9, false}} {
		got, err := batchTailStored(ctx, st, c.seq)
		require.NoError(t, err)
		assert.Equal(t, c.stored, got, "after %d", c.seq)
	}
	require.NoError(t, st.DeleteMsg(ctx, 3))
	got, err := batchTailStored(ctx, st, 2)
	require.NoError(t, err)
	assert.False(t, got, "the batch's deleted end counts as gone")
}
