package admission

import (
	"fmt"
	"sync"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
)

// Memory is admission without NATS, the in-memory implementation of the decision seam
// (as hashicorp/raft ships its in-memory store): commands are decoded and decided by the
// same handlers as Admission, on views in a Pebble store held in memory, and the events
// of an accepted command go to an in-memory log and into the views at once (DB.Fold).
// Commands run one at a time, so there are no races to lose, no claims in flight and
// no retries; an accepted command's id repeated gets its first reply, as from Admission. Property tests run thousands
// of command sequences on it; a conformance test runs the same sequences on a serve and
// requires the same replies.
type Memory struct {
	mu    sync.Mutex
	dec   *Admission
	db    *projections.DB
	names events.Names
	log   []events.Event
}

// NewMemory returns an empty in-memory admission for the deployment prefix that answers
// the verbs of handlers (opts as New's; Now gives every event's time). Close releases
// its views.
func NewMemory(prefix string, opts Options, handlers []decide.Handler) (*Memory, error) {
	db, err := projections.OpenInMem()
	if err != nil {
		return nil, err
	}
	names := events.NewNames(prefix)
	dec := newDecider(names, zerolog.Nop(), opts)
	for _, h := range handlers {
		dec.Register(h)
	}
	return &Memory{dec: dec, db: db, names: names}, nil
}

// Submit decides one command on the current views: a refusal appends nothing; an
// accepted command's events are sealed (envelopes as Admission appends them) and folded
// into the views with their payloads as decided before Submit returns. The reply has Admission's shape (events with their sequences in the log).
func (m *Memory) Submit(req Request) Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	req, h, err := m.dec.Decode(req)
	if err != nil {
		return refused(req.CommandID, err)
	}
	v, err := m.db.Read()
	if err != nil {
		return refused(req.CommandID, err)
	}
	if rec, ok, err := v.Command(req.CommandID); err != nil || ok {
		v.Close()
		if err != nil {
			return refused(req.CommandID, err)
		}
		return m.dec.sameRequest(req, rec.Digest, acceptedReply(rec, nil))
	}
	d, err := h.Decide(v, m.names, req.Body)
	v.Close()
	if err != nil {
		return refused(req.CommandID, err)
	}
	r := Reply{OK: true, CommandID: req.CommandID, Warnings: d.Warnings}
	if len(d.Events) == 0 {
		return r
	}
	envs, err := events.Seal(events.Meta{CommandID: req.CommandID, CorrelationID: req.CorrelationID,
		CausationID: req.CausationID, Actor: req.Actor, OccurredAt: m.dec.opts.Now(), RequestDigest: req.digest}, d.Events)
	if err != nil {
		return refused(req.CommandID, err)
	}
	evs := make([]events.Event, len(envs))
	for i, env := range envs {
		// The payload as decided: the stream's encode, schema check and decode are
		// Admission's (the conformance tests run both).
		evs[i] = events.Event{Seq: uint64(len(m.log) + i + 1), Envelope: env, Data: d.Events[i].Payload}
	}
	if err := m.db.Fold(m.names, evs); err != nil {
		return refused(req.CommandID, cairn.Errorf(cairn.CodeInternal, "%v", err))
	}
	m.log = append(m.log, evs...)
	for _, ev := range evs {
		r.Events = append(r.Events, EventRef{Seq: ev.Seq, Type: ev.Type, Subject: ev.Subject})
	}
	return r
}

// Read returns a snapshot of the views (close it).
func (m *Memory) Read() (*projections.View, error) { return m.db.Read() }

// Events returns the log: every event accepted so far, in order.
func (m *Memory) Events() []events.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]events.Event(nil), m.log...)
}

// Close releases the views.
func (m *Memory) Close() error {
	if err := m.db.Close(); err != nil {
		return fmt.Errorf("memory admission: %w", err)
	}
	return nil
}
