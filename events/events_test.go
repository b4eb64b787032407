package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

func startJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js := testtools.JetStream(t)
	require.NoError(t, events.EnsureStreams(context.Background(), js, events.NewNames(""), events.StreamOptions{}))
	// idempotent: a second start changes nothing
	require.NoError(t, events.EnsureStreams(context.Background(), js, events.NewNames(""), events.StreamOptions{}))
	return js
}

func seal(t *testing.T, cmdID string, drafts ...events.Draft) []events.Envelope {
	t.Helper()
	envs, err := events.Seal(events.Meta{CommandID: cmdID, CorrelationID: cmdID, CausationID: cmdID, Actor: "test", OccurredAt: time.Now()}, drafts)
	require.NoError(t, err)
	return envs
}

func nodeAdded(name string) events.Draft {
	return events.Draft{Subject: "cairn.ev.node." + name, Payload: &events.NodeAdded{Name: name, Host: "h", Address: "10.0.0.1", Role: "storage"}}
}

func seqsOf(raws []events.Raw) []uint64 {
	out := make([]uint64, len(raws))
	for i, r := range raws {
		out[i] = r.Seq
	}
	return out
}

func TestAppendIsConditionalAtomicAndDeduplicated(t *testing.T) {
	js := startJS(t)
	store := events.NewStore(js, events.NewNames(""))
	ctx := context.Background()
	subj := events.Expect{Kind: events.ExpectSubject}

	stored, err := store.Append(ctx, subj, seal(t, "c1", nodeAdded("n1")))
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, seqsOf(stored))
	assert.Equal(t, "cairn.ev.node.n1", stored[0].Subject)
	ev, err := events.DecodeStored(stored[0])
	require.NoError(t, err, "Append returns the body it stored")
	assert.Equal(t, "c1", ev.CommandID)

	// stale per-subject expectation
	_, err = store.Append(ctx, subj, seal(t, "c2", nodeAdded("n1")))
	assert.ErrorIs(t, err, events.ErrWrongLastSequence)

	// the same command id again is a duplicate, not a second event
	_, err = store.Append(ctx, events.Expect{Kind: events.ExpectSubject, Seq: 1}, seal(t, "c1", nodeAdded("n1")))
	var dup *events.DuplicateError
	require.ErrorAs(t, err, &dup)
	assert.Equal(t, uint64(1), dup.Seq)

	// a multi-event command is one atomic batch
	stored, err = store.Append(ctx, events.Expect{Kind: events.ExpectFilter, Filter: "cairn.ev.node.>", Seq: 1},
		seal(t, "c3", nodeAdded("n2"), nodeAdded("n3"), nodeAdded("n4")))
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 3, 4}, seqsOf(stored))
	assert.Equal(t, "cairn.ev.node.n4", stored[2].Subject)

	// a stale batch is refused whole
	_, err = store.Append(ctx, events.Expect{Kind: events.ExpectFilter, Filter: "cairn.ev.node.>", Seq: 1},
		seal(t, "c4", nodeAdded("n5"), nodeAdded("n6")))
	assert.ErrorIs(t, err, events.ErrWrongLastSequence)
	// a repeated batch is a duplicate
	_, err = store.Append(ctx, events.Expect{Kind: events.ExpectStream, Seq: 4}, seal(t, "c3", nodeAdded("n2"), nodeAdded("n3")))
	require.ErrorAs(t, err, &dup)

	last, err := store.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), last, "nothing of the refused appends was stored")

	b, err := store.BoundarySeq(ctx, events.Expect{Kind: events.ExpectFilter, Filter: "cairn.ev.node.>"})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), b)
	b, err = store.BoundarySeq(ctx, events.Expect{Kind: events.ExpectSubject, Subject: "cairn.ev.node.n1"})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), b)
	b, err = store.BoundarySeq(ctx, events.Expect{Kind: events.ExpectSubject, Subject: "cairn.ev.node.nobody"})
	require.NoError(t, err)
	assert.Equal(t, uint64(0), b)

	var got []string
	require.NoError(t, store.Audit(ctx, events.Range{FromSeq: 2, ToSeq: 3}, events.Match{}, 0, func(r events.Record) bool {
		got = append(got, fmt.Sprintf("%d %s %s", r.Seq, r.Type, r.CommandID))
		return true
	}))
	assert.Equal(t, []string{"2 node.added c3", "3 node.added c3"}, got)
}

func TestDecodeValidatesAndUpcasts(t *testing.T) {
	env := func(typ string, version int, payload string) []byte {
		b, _ := json.Marshal(map[string]any{"id": "01", "type": typ, "schema_version": version, "subject": "cairn.ev.node.n1",
			"occurred_at": "2026-01-01T00:00:00Z", "command_id": "c", "correlation_id": "c", "causation_id": "c", "actor": "a",
			"payload": json.RawMessage(payload)})
		return b
	}
	// a v1 node.added (before roles) reads as v2 with role storage
	ev, err := events.Decode(7, env("node.added", 1, `{"name":"n1","host":"h1","address":"10.0.0.1"}`))
	require.NoError(t, err)
	assert.Equal(t, &events.NodeAdded{Name: "n1", Host: "h1", Address: "10.0.0.1", Role: "storage"}, ev.Data)
	assert.Equal(t, uint64(7), ev.Seq)

	// The decoded strings share the body's memory, and their values are the body's
	// (escapes resolved).
	body := env("node.added", 2, `{"name":"n\u0031","host":"h1","address":"10.0.0.1","role":"storage"}`)
	ev, err = events.Decode(8, body)
	require.NoError(t, err)
	assert.Equal(t, &events.NodeAdded{Name: "n1", Host: "h1", Address: "10.0.0.1", Role: "storage"}, ev.Data)
	assert.Equal(t, "cairn.ev.node.n1", ev.Subject)

	bad := []struct{ name, body, reason string }{
		{"not JSON", `{`, "not valid JSON"},
		{"unknown type", string(env("node.exploded", 1, `{}`)), "unknown event type"},
		{"future version", string(env("node.added", 3, `{}`)), "newer than this binary"},
		{"schema violation", string(env("node.added", 2, `{"name":"n1","host":"h1","address":"10.0.0.1"}`)), "role is required"},
		{"v1 with unknown field", string(env("node.added", 1, `{"name":"n1","host":"h1","address":"10.0.0.1","x":1}`)), "not a known field"},
		{"no command id", `{"id":"1","type":"node.added","schema_version":2,"subject":"s","occurred_at":"2026-01-01T00:00:00Z","payload":{}}`, "no command_id"},
		{"bytes after the envelope", string(env("node.added", 2, `{"name":"n1","host":"h1","address":"10.0.0.1","role":"storage"}`)) + ` x`, "after top-level value"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := events.Decode(1, []byte(c.body))
			var de *events.DecodeError
			require.True(t, errors.As(err, &de), "want a DecodeError, got %v", err)
			assert.Contains(t, de.Error(), c.reason)
		})
	}
}

// TestDecodeRemembersOnlyValidBytes: a replay validates byte-identical payloads once;
// the memo never lets through a payload it has not seen pass, however close to one it
// has, and never carries a verdict across types or versions.
func TestDecodeRemembersOnlyValidBytes(t *testing.T) {
	env := func(typ string, version int, payload string) []byte {
		b, _ := json.Marshal(map[string]any{"id": "01", "type": typ, "schema_version": version, "subject": "cairn.ev.node.n1",
			"occurred_at": "2026-01-01T00:00:00Z", "command_id": "c", "correlation_id": "c", "causation_id": "c", "actor": "a",
			"payload": json.RawMessage(payload)})
		return b
	}
	good := `{"name":"n1","state":"offline","previous":"online"}`
	for range 3 {
		ev, err := events.Decode(1, env("node.state-changed", 1, good))
		require.NoError(t, err)
		assert.Equal(t, &events.NodeStateChanged{Name: "n1", State: "offline", Previous: "online"}, ev.Data)
	}
	for _, bad := range []string{
		`{"name":"n1","state":"sleeping","previous":"online"}`,
		`{"name":"n1","state":"offline","previous":"online","x":1}`,
		`{"name":"n 1","state":"offline","previous":"online"}`,
	} {
		_, err := events.Decode(1, env("node.state-changed", 1, bad))
		assert.Error(t, err, bad)
	}
	// the same bytes under another type are validated against that type's schema
	_, err := events.Decode(1, env("node.removed", 1, good))
	assert.Error(t, err)
}

func TestParsePerNodeSubjects(t *testing.T) {
	n := events.NewNames("")
	for _, c := range []struct {
		subject, node, kind, id string
		ok                      bool
	}{
		{"cairn.node.n1.drbd.r1", "n1", "drbd", "r1", true},
		{"cairn.node.n1.zpool.tank", "n1", "zpool", "tank", true},
		{"cairn.node.n1.drbd", "", "", "", false},
		{"cairn.node.n1.drbd.r1.x", "", "", "", false},
		{"cairn.node..drbd.r1", "", "", "", false},
		{"other.node.n1.drbd.r1", "", "", "", false},
		{"cairn.status.n1.drbd.r1", "", "", "", false},
	} {
		node, kind, id, ok := n.ParseNode(c.subject)
		assert.Equal(t, []any{c.node, c.kind, c.id, c.ok}, []any{node, kind, id, ok}, c.subject)
	}
	node, kind, id, ok := n.ParseStatus("cairn.status.n2.zpool.tank")
	assert.Equal(t, []any{"n2", "zpool", "tank", true}, []any{node, kind, id, ok})
	_, _, _, ok = n.ParseStatus("cairn.node.n2.zpool.tank")
	assert.False(t, ok)
}

// A node named by a DNS name keeps one subject token per name, and every parse gives
// the name back exactly as given.
func TestDNSNamesAreOneSubjectToken(t *testing.T) {
	names := events.NewNames("")
	const fqdn = "node-5.rack2.example.com"
	assert.Equal(t, "cairn.ev.node.node-5~rack2~example~com", names.Event("node", fqdn))
	assert.Equal(t, "node", names.Aggregate(names.Event("node", fqdn)))
	subject := names.Node(fqdn, "drbd", "r1")
	assert.Equal(t, "cairn.node.node-5~rack2~example~com.drbd.r1", subject)
	node, kind, id, ok := names.ParseNode(subject)
	assert.True(t, ok)
	assert.Equal(t, [3]string{fqdn, "drbd", "r1"}, [3]string{node, kind, id})
	node, _, _, ok = names.ParseStatus(names.Status(fqdn, "node", fqdn))
	assert.True(t, ok)
	assert.Equal(t, fqdn, node)
	node, ok = names.ParseAgentAttach(names.AgentAttach(fqdn))
	assert.True(t, ok)
	assert.Equal(t, fqdn, node)
	_, ok = names.ParseAgentAttach("cairn.agent.a.b.attach")
	assert.False(t, ok, "two tokens are no node")
	assert.Equal(t, "agent-node-5~rack2~example~com", names.AgentConsumer(fqdn))
	assert.NotContains(t, names.NodeFilter(fqdn), "example.com")
	assert.Equal(t, "n1", events.Untoken(events.Token("n1")), "plain names are their own token")
}

// A decision's read set: every check of an atomic batch is enforced, not only the
// first one, and checks on subjects the batch does not write ride on its messages.
func TestAppendChecksEverySubjectRead(t *testing.T) {
	js := startJS(t)
	store := events.NewStore(js, events.NewNames(""))
	ctx := context.Background()
	_, err := store.Append(ctx, events.Expect{Kind: events.ExpectSubject}, seal(t, "a", nodeAdded("a")))
	require.NoError(t, err)
	_, err = store.Append(ctx, events.Expect{Kind: events.ExpectSubject}, seal(t, "b", nodeAdded("b")))
	require.NoError(t, err)

	checks := func(c ...events.Check) events.Expect { return events.Expect{Kind: events.ExpectChecks, Checks: c} }
	// Stale on the last check only, a subject the batch does not write: refused whole.
	_, err = store.Append(ctx, checks(events.Check{Subject: "cairn.ev.node.n1"}, events.Check{Subject: "cairn.ev.node.n2"},
		events.Check{Subject: "cairn.ev.node.a", Seq: 1}, events.Check{Subject: "cairn.ev.node.b", Seq: 1}),
		seal(t, "c1", nodeAdded("n1"), nodeAdded("n2"), nodeAdded("n3"), nodeAdded("n4")))
	assert.ErrorIs(t, err, events.ErrWrongLastSequence, "node b is at 2, the decision saw 1")
	last, err := store.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last, "nothing of the refused batch was stored")

	// Current everywhere: stored, a filter check included.
	stored, err := store.Append(ctx, checks(events.Check{Subject: "cairn.ev.node.n1"}, events.Check{Subject: "cairn.ev.node.a", Seq: 1},
		events.Check{Subject: "cairn.ev.node.b", Seq: 2}, events.Check{Subject: "cairn.ev.rd.>"}),
		seal(t, "c2", nodeAdded("n1"), nodeAdded("n1"), nodeAdded("n3"), nodeAdded("n4")))
	require.NoError(t, err)
	assert.Equal(t, []uint64{3, 4, 5, 6}, seqsOf(stored))

	stale, err := store.Stale(ctx, checks(events.Check{Subject: "cairn.ev.node.n1", Seq: 4}, events.Check{Subject: "cairn.ev.node.>", Seq: 6}))
	require.NoError(t, err)
	assert.False(t, stale)
	stale, err = store.Stale(ctx, checks(events.Check{Subject: "cairn.ev.node.n1", Seq: 4}, events.Check{Subject: "cairn.ev.node.n4", Seq: 5}))
	require.NoError(t, err)
	assert.True(t, stale, "n4 is at 6")

	// More reads than messages is the handler's bug, refused before anything is sent.
	_, err = store.Append(ctx, checks(events.Check{Subject: "cairn.ev.node.x"}, events.Check{Subject: "cairn.ev.node.y"}),
		seal(t, "c3", nodeAdded("n9")))
	assert.ErrorIs(t, err, events.ErrTooManyChecks)
}

func TestOverlapsFindsChecksCoveringWrittenSubjects(t *testing.T) {
	checks := func(subjects ...string) events.Expect {
		e := events.Expect{Kind: events.ExpectChecks}
		for _, s := range subjects {
			e.Checks = e.Checks.Add(s, 1)
		}
		return e
	}
	written := []string{"cairn.ev.rd.r1", "cairn.ev.node.n1"}
	assert.True(t, events.Overlaps(checks("cairn.ev.rd.r1"), written), "the same subject")
	assert.True(t, events.Overlaps(checks("cairn.ev.rg.g", "cairn.ev.rd.>"), written), "a filter over it")
	assert.True(t, events.Overlaps(checks("cairn.ev.*.n1"), written), "a token wildcard")
	assert.False(t, events.Overlaps(checks("cairn.ev.rd.r2", "cairn.ev.node.n1.x", "cairn.ev.rg.>"), written))
	assert.False(t, events.Overlaps(checks("cairn.ev.rd.r1.>"), written), "> needs a token more")
	assert.True(t, events.Overlaps(events.Expect{Kind: events.ExpectStream}, nil), "only read sets are grouped")
}

// A group of appends is one atomic batch: a stale check of any command refuses all.
// And a check is taken against the stream before the batch: the group must never hold
// a command checking what an earlier one writes (Overlaps), which the appender keeps.
func TestAppendGroupIsAllOrNothingAndNeverHidesAWrite(t *testing.T) {
	js := startJS(t)
	store := events.NewStore(js, events.NewNames(""))
	ctx := context.Background()
	checks := func(c ...events.Check) events.Expect { return events.Expect{Kind: events.ExpectChecks, Checks: c} }
	two := func(id, a, b string) []events.Envelope { return seal(t, id, nodeAdded(a), nodeAdded(b)) }

	_, err := store.AppendGroup(ctx, []events.Pending{
		{Expect: checks(events.Check{Subject: "cairn.ev.node.a"}), Envs: two("g1", "a", "a")},
		{Expect: checks(events.Check{Subject: "cairn.ev.node.b", Seq: 7}), Envs: two("g2", "b", "b")},
	})
	assert.ErrorIs(t, err, events.ErrWrongLastSequence)
	last, err := store.LastSeq(ctx)
	require.NoError(t, err)
	assert.Zero(t, last, "nothing of the group was stored")

	// Appended together, a check over node.> would not see the first command's events:
	// through the appender, the second command always conflicts when the first landed
	// before it.
	appender := events.NewGroupAppender(store, 5*time.Second)
	for i := range 40 {
		seen, err := store.BoundarySeq(ctx, events.Expect{Kind: events.ExpectFilter, Filter: "cairn.ev.node.>"})
		require.NoError(t, err)
		var wg sync.WaitGroup
		var seqA, seqB uint64
		var errB error
		run := func(d time.Duration, f func()) {
			wg.Add(1)
			go func() { defer wg.Done(); time.Sleep(d); f() }()
		}
		// A third command holds the appender, so that A and B queue behind it together.
		run(0, func() {
			envs := two(fmt.Sprintf("c%d", i), "c", "c")
			for j := range envs {
				envs[j].Subject = fmt.Sprintf("cairn.ev.other.c%d", i) // not under node.>
			}
			_, err := appender.Append(ctx, checks(events.Check{Subject: envs[0].Subject}), envs)
			assert.NoError(t, err)
		})
		run(200*time.Microsecond, func() {
			stored, err := appender.Append(ctx, checks(events.Check{Subject: fmt.Sprintf("cairn.ev.node.a%d", i)}), two(fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", i)))
			if assert.NoError(t, err) {
				seqA = stored[0].Seq
			}
		})
		run(400*time.Microsecond, func() {
			stored, err := appender.Append(ctx, checks(events.Check{Subject: "cairn.ev.node.>", Seq: seen}, events.Check{Subject: fmt.Sprintf("cairn.ev.node.b%d", i)}),
				two(fmt.Sprintf("b%d", i), fmt.Sprintf("b%d", i), fmt.Sprintf("b%d", i)))
			if errB = err; err == nil {
				seqB = stored[0].Seq
			}
		})
		wg.Wait()
		if errB == nil {
			assert.Less(t, seqB, seqA, "round %d: B's check of node.> passed although A's events came before it", i)
		} else {
			assert.ErrorIs(t, errB, events.ErrWrongLastSequence)
		}
	}
}

// A CAIRN_NODES stream made by an earlier cairn (no atomic batches) is brought to the
// current configuration on start, after which the dispatcher's atomic batches land.
func TestEnsureStreamsAllowsBatchesOnAnExistingNodesStream(t *testing.T) {
	js := testtools.JetStream(t)
	ctx := context.Background()
	names := events.NewNames("")
	old := names.StreamConfigs(events.StreamOptions{})[1]
	require.Equal(t, names.NodesStream(), old.Name)
	old.AllowAtomicPublish = false
	_, err := js.CreateStream(ctx, old)
	require.NoError(t, err)
	batch := []*nats.Msg{nats.NewMsg(names.Node("n1", "drbd", "r1")), nats.NewMsg(names.Node("n2", "drbd", "r1"))}
	_, err = jetstreamext.PublishMsgBatch(ctx, js, batch)
	require.Error(t, err, "the old stream refuses atomic batches")

	require.NoError(t, events.EnsureStreams(ctx, js, names, events.StreamOptions{}))
	ack, err := jetstreamext.PublishMsgBatch(ctx, js, batch)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), ack.Sequence)
}

// Seal refuses a payload its type's schema refuses: appended, the projector would skip
// it and the command would be acknowledged with nothing changed.
func TestSealRefusesAnInvalidPayload(t *testing.T) {
	_, err := events.Seal(events.Meta{CommandID: "c1"}, []events.Draft{{Subject: "cairn.ev.node.n1",
		Payload: &events.NodeMaintenanceChanged{Name: "n1", Mode: "sideways"}}})
	require.ErrorContains(t, err, "decided an invalid event: node.maintenance-changed v1 payload")
	envs, err := events.Seal(events.Meta{CommandID: "c1"}, []events.Draft{{Subject: "cairn.ev.node.n1",
		Payload: &events.NodeMaintenanceChanged{Name: "n1", Mode: events.MaintenanceEvacuating}}})
	require.NoError(t, err)
	require.Len(t, envs, 1)
}

// An atomic append keeps to its context's deadline (issue 29): a server that takes the
// batch and never answers (here a subscriber where the stream was) costs the command its
// deadline; the batch library's own wait for the first message's acknowledgement (5 s)
// no longer comes on top.
func TestAppendKeepsToItsDeadline(t *testing.T) {
	js := startJS(t)
	names := events.NewNames("")
	store := events.NewStore(js, names)
	ctx := context.Background()
	require.NoError(t, js.DeleteStream(ctx, names.EventsStream()))
	sub, err := js.Conn().SubscribeSync(names.EventFilter(""))
	require.NoError(t, err)
	defer sub.Unsubscribe()
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = store.Append(dctx, events.Expect{Kind: events.ExpectChecks, Checks: events.Checks{{Subject: "cairn.ev.node.n1"}}},
		seal(t, "c1", nodeAdded("n1"), nodeAdded("n2"), nodeAdded("n3")))
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, 2*time.Second, "an append with a 300 ms deadline took %s", took)
}
