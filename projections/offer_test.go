package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storedHistory returns n stored messages as the stream would hold them: a cluster,
// then nodes added and taken offline and online again.
func storedHistory(t *testing.T, n int) []events.Raw {
	t.Helper()
	out := make([]events.Raw, 0, n)
	for i := range n {
		var d events.Draft
		switch {
		case i == 0:
			d = events.Draft{Subject: "cairn.ev.cluster.c1", Payload: &events.ClusterCreated{Name: "c1", DataChunks: 1, ParityChunks: 1}}
		case i%3 == 1:
			name := fmt.Sprintf("n%d", i)
			d = events.Draft{Subject: "cairn.ev.node." + name, Payload: &events.NodeAdded{Name: name, Host: "h" + name, Address: "10.0.0.1", Role: "storage"}}
		default:
			name := fmt.Sprintf("n%d", i-i%3+1)
			state, prev := "offline", "online"
			if i%3 == 0 {
				state, prev = "online", "offline"
			}
			d = events.Draft{Subject: "cairn.ev.node." + name, Payload: &events.NodeStateChanged{Name: name, State: state, Previous: prev}}
		}
		envs, err := events.Seal(events.Meta{CommandID: fmt.Sprintf("c%d", i), CorrelationID: "x", CausationID: "x", Actor: "test",
			OccurredAt: time.Unix(1_700_000_000+int64(i), 0)}, []events.Draft{d})
		require.NoError(t, err)
		body, err := events.Encode(envs[0])
		require.NoError(t, err)
		out = append(out, events.Raw{Seq: uint64(i + 1), Subject: envs[0].Subject, Data: body})
	}
	return out
}

// liveProjector is a projector whose Run loop is simulated: t is the open transaction
// Offer works on, and deliver plays the consumer handing over a chunk.
func liveProjector(t *testing.T) (*Projector, *tx, func(raws ...events.Raw)) {
	t.Helper()
	db, err := OpenInMem()
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	p, err := NewProjector(db, nil, events.NewNames(""), zerolog.Nop())
	require.NoError(t, err)
	tx := newTx(db)
	p.live = tx
	return p, tx, func(raws ...events.Raw) { deliverChunk(t, p, tx, true, raws...) }
}

func digestOf(t *testing.T, db *DB) Digest {
	t.Helper()
	d, err := db.Digest()
	require.NoError(t, err)
	return d
}

func TestOfferedEventsAreAppliedOnceAndInStreamOrder(t *testing.T) {
	raws := storedHistory(t, 9)

	// The reference: the consumer delivers everything in one go.
	ref, _, deliverRef := liveProjector(t)
	deliverRef(raws...)
	want := digestOf(t, ref.db)
	require.Equal(t, uint64(9), want.Seq)

	p, _, deliver := liveProjector(t)
	applied := func() float64 { return testutil.ToFloat64(metricApplied) }
	before := applied()

	p.Offer(raws[2:3]) // seq 3 before 1 and 2: held back
	assert.Equal(t, uint64(0), p.Applied(), "an offer ahead of its predecessors waits")
	p.Offer(raws[0:1]) // seq 1: applied; 2 is still missing, so 3 waits on
	assert.Equal(t, uint64(1), p.Applied())
	p.Offer(raws[1:2]) // seq 2: applied, and the waiting 3 after it
	assert.Equal(t, uint64(3), p.Applied())
	p.Offer(raws[1:3]) // offered again: nothing happens
	assert.Equal(t, uint64(3), p.Applied())

	deliver(raws[0:5]...) // the consumer overtakes: 1-3 skipped, 4 and 5 applied
	assert.Equal(t, uint64(5), p.Applied())
	p.Offer(raws[3:4]) // an offer the consumer overtook
	p.Offer(raws[6:7]) // seq 7 waits for 6
	assert.Equal(t, uint64(5), p.Applied())
	deliver(raws[5]) // the consumer's 6 lets the offered 7 follow at once
	assert.Equal(t, uint64(7), p.Applied())
	p.Offer(raws[7:9]) // an atomic batch of two
	deliver(raws[6:9]...)
	assert.Equal(t, uint64(9), p.Applied())

	assert.Equal(t, 9.0, applied()-before, "every event applied exactly once")
	assert.Equal(t, want, digestOf(t, p.db), "the same views as the consumer alone builds")
	assert.Empty(t, p.offered, "nothing left waiting")
}

func TestOfferWithoutARunningProjectorDoesNothing(t *testing.T) {
	raws := storedHistory(t, 2)
	p, _, _ := liveProjector(t)
	p.live = nil // no Run, or one that stops at a sequence (rebuild, views at)
	p.Offer(raws)
	assert.Equal(t, uint64(0), p.Applied())
	assert.Empty(t, p.offered)
}

func TestOfferedInvalidMessageIsRecordedAsTheConsumerWouldRecordIt(t *testing.T) {
	raws := storedHistory(t, 2)
	junk := events.Raw{Seq: 3, Subject: "cairn.ev.node.junk", Data: []byte(`{"not":"an event"}`)}

	ref, _, deliverRef := liveProjector(t)
	deliverRef(append(raws, junk)...)
	p, _, _ := liveProjector(t)
	p.Offer(raws)
	p.Offer([]events.Raw{junk})
	assert.Equal(t, uint64(3), p.Applied())
	assert.Equal(t, digestOf(t, ref.db), digestOf(t, p.db))
}

// TestJunkMovesItsSubjectsBoundary: a message that is not an event is recorded as
// rejected and its subject's boundary moves to it, as the stream's last sequence on the
// subject did (issue 11: a junk publish jammed the subject for admission forever).
func TestJunkMovesItsSubjectsBoundary(t *testing.T) {
	raws := storedHistory(t, 2) // seq 2 is node.added n1
	junk := events.Raw{Seq: 3, Subject: raws[1].Subject, Data: []byte("junk")}
	p, _, deliver := liveProjector(t)
	deliver(append(raws, junk)...)
	v, err := p.db.Read()
	require.NoError(t, err)
	defer v.Close()
	seq, err := v.SubjectSeq(raws[1].Subject)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), seq)
	agg, err := v.AggregateSeq("node")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), agg)
	rej, err := v.Rejected()
	require.NoError(t, err)
	require.Len(t, rej, 1)
	assert.Equal(t, uint64(3), rej[0].Seq)
}

// TestUnreadableEventStopsTheProjector: an event of a version this binary does not know
// stops the projector before it (everything before it committed), with an error naming
// it; it is not skipped (issue 11: serves with different binaries diverged).
func TestUnreadableEventStopsTheProjector(t *testing.T) {
	raws := storedHistory(t, 2)
	future := events.Raw{Seq: 3, Subject: "cairn.ev.node.n9", Data: []byte(`{"id":"x","type":"node.added","schema_version":99,"subject":"cairn.ev.node.n9",` +
		`"occurred_at":"2026-12-02T00:00:00Z","command_id":"c","actor":"a","payload":{}}`)}
	p, tx, _ := liveProjector(t)
	c := &decodedChunk{tail: true}
	for _, r := range append(raws, future, storedHistory(t, 4)[3]) {
		ev, err := events.DecodeStored(r)
		c.items = append(c.items, Item{Event: ev, Raw: r, Err: err})
	}
	p.txMu.Lock()
	_, err := p.applyChunk(tx, c, 0)
	p.txMu.Unlock()
	var up *UpgradeNeededError
	require.ErrorAs(t, err, &up)
	assert.Equal(t, uint64(3), up.Seq)
	assert.Contains(t, up.Error(), "node.added v99")
	assert.Same(t, up, p.Stopped())
	ckpt, err := p.db.Checkpoint()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), ckpt, "everything before it is in the views, nothing after")
}

// TestApplyPanicStopsTheProjectorWithAnError (issue 11): a panic while folding an event
// (a bug) becomes an error that stops the projector, not the death of the process; an
// offered event that panics marks the projector broken.
func TestApplyPanicStopsTheProjectorWithAnError(t *testing.T) {
	raws := storedHistory(t, 1)
	p, tx, _ := liveProjector(t)
	bad := Item{Raw: events.Raw{Seq: 2, Subject: "cairn.ev.node.n1"},
		Event: events.Event{Seq: 2, Envelope: events.Envelope{Subject: "cairn.ev.node.n1", Type: "node.added"}, Data: (*events.NodeAdded)(nil)}}
	ev, err := events.DecodeStored(raws[0])
	require.NoError(t, err)
	p.txMu.Lock()
	_, err = p.applyChunk(tx, &decodedChunk{tail: true, items: []Item{{Event: ev, Raw: raws[0]}, bad}}, 0)
	p.txMu.Unlock()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apply seq 2: panic")
}

// TestCommandRetentionIsDeterministic (issue 11): accepted command ids older than the
// retention leave the views, at fixed sequences with the time of the event there, so
// the views are the same whatever the batching; ids within the retention stay.
func TestCommandRetentionIsDeterministic(t *testing.T) {
	const n = 40
	raws := make([]events.Raw, n)
	for i := range n {
		d := events.Draft{Subject: fmt.Sprintf("cairn.ev.node.n%d", i), Payload: &events.NodeAdded{Name: fmt.Sprintf("n%d", i), Host: fmt.Sprintf("h%d", i), Address: "10.0.0.1", Role: "storage"}}
		if i == 0 {
			d = events.Draft{Subject: "cairn.ev.cluster.c1", Payload: &events.ClusterCreated{Name: "c1", DataChunks: 1, ParityChunks: 1}}
		}
		envs, err := events.Seal(events.Meta{CommandID: fmt.Sprintf("c%d", i), CorrelationID: "x", CausationID: "x", Actor: "test",
			OccurredAt: time.Unix(1_700_000_000, 0).Add(time.Duration(i) * 6 * time.Hour)}, []events.Draft{d}) // 10 days in all
		require.NoError(t, err)
		body, err := events.Encode(envs[0])
		require.NoError(t, err)
		raws[i] = events.Raw{Seq: uint64(i + 1), Subject: envs[0].Subject, Data: body}
	}
	build := func(chunks ...int) *Projector {
		p, tx, deliver := liveProjector(t)
		p.SetCommandRetention(48*time.Hour, 4)
		tx.retention, tx.pruneEvery = p.retention, p.pruneEvery
		from := 0
		for _, c := range chunks {
			deliver(raws[from : from+c]...)
			from += c
		}
		require.Equal(t, n, from)
		return p
	}
	oneGo, oneByOne, mixed := build(n), build(repeat(1, n)...), build(3, 17, 1, 19)
	want := digestOf(t, oneGo.db)
	assert.Equal(t, want, digestOf(t, oneByOne.db), "one event per batch")
	assert.Equal(t, want, digestOf(t, mixed.db), "mixed batches")

	v, err := oneGo.db.Read()
	require.NoError(t, err)
	defer v.Close()
	// The last prune ran at seq 40 (event time 39 × 6 h): ids older than 48 h before it
	// (events before 31 × 6 h) are gone.
	for i := range n {
		_, ok, err := v.Command(fmt.Sprintf("c%d", i))
		require.NoError(t, err)
		assert.Equal(t, i >= 31, ok, "command c%d (at %d h)", i, i*6)
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Offers made while another holds the transaction are committed together by the first
// of them to take it; every other returns finding its events committed.
func TestConcurrentOffersShareOneCommit(t *testing.T) {
	raws := storedHistory(t, 4)
	p, _, _ := liveProjector(t)
	commits := func() uint64 {
		var m dto.Metric
		require.NoError(t, metricBatch.Write(&m))
		return m.GetHistogram().GetSampleCount()
	}
	before := commits()

	p.txMu.Lock() // a commit in progress
	done := make(chan struct{})
	for _, r := range raws {
		go func() {
			p.Offer([]events.Raw{r})
			done <- struct{}{}
		}()
	}
	require.Eventually(t, func() bool {
		p.offerMu.Lock()
		defer p.offerMu.Unlock()
		return len(p.offered) == len(raws)
	}, 5*time.Second, time.Millisecond, "every offer waiting for the transaction")
	p.txMu.Unlock()
	for range raws {
		<-done
	}
	assert.Equal(t, uint64(len(raws)), p.Applied())
	assert.Equal(t, uint64(1), commits()-before, "one commit for the four offers")
}
