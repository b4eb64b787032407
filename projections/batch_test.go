package projections

import (
	"testing"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atomicBatch returns the messages of one atomic batch stored from seq on, as the
// stream holds them: node.added for each name, the first `first` of them by command
// cmd-a and the rest by cmd-b (a group of two commands), every message but the last
// MidBatch.
func atomicBatch(t *testing.T, seq uint64, first int, names ...string) []events.Raw {
	t.Helper()
	out := make([]events.Raw, len(names))
	for i, name := range names {
		cmd := "cmd-a"
		if i >= first {
			cmd = "cmd-b"
		}
		envs, err := events.Seal(events.Meta{CommandID: cmd, Actor: "test", OccurredAt: time.Unix(1_700_000_000, 0)},
			[]events.Draft{{Subject: "cairn.ev.node." + name, Payload: &events.NodeAdded{Name: name, Host: "h" + name, Address: "10.0.0.1", Role: "storage"}}})
		require.NoError(t, err)
		body, err := events.Encode(envs[0])
		require.NoError(t, err)
		out[i] = events.Raw{Seq: seq + uint64(i), Subject: envs[0].Subject, Data: body, MidBatch: i < len(names)-1}
	}
	return out
}

// committedNodes lists which of names the committed views hold.
func committedNodes(t *testing.T, db *DB, names ...string) []string {
	t.Helper()
	v, err := db.Read()
	require.NoError(t, err)
	defer v.Close()
	var out []string
	for _, name := range names {
		_, ok, err := v.Node(name)
		require.NoError(t, err)
		if ok {
			out = append(out, name)
		}
	}
	return out
}

// deliverChunk plays the consumer handing over one chunk; tail: no more messages were
// pending when it was cut.
func deliverChunk(t *testing.T, p *Projector, tx *tx, tail bool, raws ...events.Raw) {
	t.Helper()
	c := &decodedChunk{tail: tail}
	for _, r := range raws {
		ev, err := events.DecodeStored(r)
		c.items = append(c.items, Item{Event: ev, Raw: r, Err: err})
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	_, err := p.applyChunk(tx, c, 0)
	require.NoError(t, err)
}

// TestViewsNeverHoldPartOfAnAtomicBatch: the views are committed only where an atomic
// batch ends, whatever cuts the consumer's chunks (the consumer can find no message
// pending between two of a batch while the server stores it, and a batch open for
// longer than the live commit age was committed with half its events: a reader saw
// a definition without its replicas).
func TestViewsNeverHoldPartOfAnAtomicBatch(t *testing.T) {
	all := []string{"a", "b", "c"}
	cluster := storedHistory(t, 1)
	batch := atomicBatch(t, 2, 2, all...)

	p, tx, _ := liveProjector(t)
	deliverChunk(t, p, tx, true, cluster[0], batch[0])
	assert.Empty(t, committedNodes(t, p.db, all...), "a chunk cut at the stream's end in the middle of a batch")
	assert.Less(t, p.Applied(), uint64(2))

	tx.batchStart = time.Now().Add(-time.Hour) // the open batch is older than any commit age
	deliverChunk(t, p, tx, false, batch[1])
	assert.Empty(t, committedNodes(t, p.db, all...), "an old open batch in the middle of an atomic batch")
	assert.Less(t, p.Applied(), uint64(2))

	deliverChunk(t, p, tx, true, batch[2])
	assert.Equal(t, all, committedNodes(t, p.db, all...))
	assert.Equal(t, uint64(4), p.Applied())
}

// TestOfferedGroupIsCommittedWhole: the commands of one grouped append offer their own
// events; the first command's offer leaves them applied but uncommitted until the
// group's last command offers the end of the batch.
func TestOfferedGroupIsCommittedWhole(t *testing.T) {
	all := []string{"a", "b", "c"}
	cluster := storedHistory(t, 1)
	batch := atomicBatch(t, 2, 2, all...) // cmd-a: a, b; cmd-b: c

	p, _, _ := liveProjector(t)
	p.Offer(cluster)
	require.Equal(t, uint64(1), p.Applied())
	p.Offer(batch[:2])
	assert.Empty(t, committedNodes(t, p.db, all...), "the group's first command alone")
	assert.Equal(t, uint64(1), p.Applied())
	p.Offer(batch[2:])
	assert.Equal(t, all, committedNodes(t, p.db, all...))
	assert.Equal(t, uint64(4), p.Applied())
}

// TestBatchEndDeliveredAfterAnOfferCommits: the consumer brings the end of a batch
// whose start an offer applied.
func TestBatchEndDeliveredAfterAnOfferCommits(t *testing.T) {
	all := []string{"a", "b", "c"}
	batch := atomicBatch(t, 2, 3, all...)
	p, tx, _ := liveProjector(t)
	deliverChunk(t, p, tx, true, storedHistory(t, 1)...)
	p.Offer(batch[:2])
	assert.Empty(t, committedNodes(t, p.db, all...), "the command's first events offered alone")
	assert.Equal(t, uint64(1), p.Applied())
	deliverChunk(t, p, tx, true, batch...)
	assert.Equal(t, all, committedNodes(t, p.db, all...))
	assert.Equal(t, uint64(4), p.Applied())
}
