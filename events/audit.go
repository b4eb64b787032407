package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Match selects events by envelope fields; empty fields match everything.
type Match struct {
	Type      string
	Actor     string
	CommandID string
}

// Record is one stored event as an auditor sees it: the envelope as written, where it
// sits in the stream, and, for a stored message that is not a valid event, why not.
type Record struct {
	Seq    uint64    `json:"seq"`
	Stored time.Time `json:"stored_at"`
	Envelope
	Invalid string `json:"invalid,omitempty"`
}

// MarshalJSON flattens the envelope next to seq and stored_at.
func (r Record) MarshalJSON() ([]byte, error) {
	type flat struct {
		Seq    uint64    `json:"seq"`
		Stored time.Time `json:"stored_at"`
		Envelope
		Invalid string `json:"invalid,omitempty"`
	}
	return json.Marshal(flat{r.Seq, r.Stored, r.Envelope, r.Invalid})
}

// Audit calls fn for every stored event in r that matches m, in stream order, at most
// limit of them (0 = no limit). Invalid messages are reported, not skipped. The stream
// seeks to r's first sequence or time and filters by r's subject itself; a message
// that does not match m by its envelope is skipped without validating its payload, so
// a query for one actor or type validates only what it returns.
func (s *Store) Audit(ctx context.Context, r Range, m Match, limit int, fn func(Record) bool) error {
	n := 0
	return s.ReadRaw(ctx, r, func(raw Raw) bool {
		if m != (Match{}) {
			var env auditEnvelope
			if json.Unmarshal(raw.Data, &env) == nil && !m.matches(env.Type, env.Actor, env.CommandID) {
				return true
			}
		}
		rec := recordOf(raw)
		if !m.matches(rec.Type, rec.Actor, rec.CommandID) {
			return true
		}
		n++
		if !fn(rec) {
			return false
		}
		return limit == 0 || n < limit
	})
}

// recordOf is a stored message as an auditor sees it: the envelope as written, even
// when it does not decode as an event (Invalid says why).
func recordOf(raw Raw) Record {
	rec := Record{Seq: raw.Seq, Stored: raw.Stored}
	ev, err := DecodeStored(raw)
	rec.Envelope = ev.Envelope
	if err != nil {
		rec.Invalid = err.Error()
		if rec.Subject == "" {
			rec.Subject = raw.Subject
		}
	}
	return rec
}

// auditEnvelope is the part of an envelope audit filters look at.
type auditEnvelope struct {
	Type      string `json:"type"`
	Actor     string `json:"actor"`
	CommandID string `json:"command_id"`
}

func (m Match) matches(typ, actor, commandID string) bool {
	return (m.Type == "" || typ == m.Type) && (m.Actor == "" || actor == m.Actor) && (m.CommandID == "" || commandID == m.CommandID)
}

// Follow calls fn with every event matching m on subject filter (wildcards allowed; ""
// every event) from sequence from on, in stream order, as the stream has them and then
// as they are stored, until ctx ends or fn returns an error (which Follow returns). It
// reads through an ordered consumer, which JetStream recreates at the next sequence
// after any interruption: no event is skipped and none comes twice.
func (s *Store) Follow(ctx context.Context, subject string, from uint64, m Match, fn func(Record) error) error {
	if subject == s.names.EventFilter("") {
		subject = ""
	}
	return s.followStream(ctx, s.names.EventsStream(), subject, from, func(raw Raw) error {
		rec := recordOf(raw)
		if !m.matches(rec.Type, rec.Actor, rec.CommandID) {
			return nil
		}
		return fn(rec)
	})
}

// FollowStatus is Follow for the agents' reports (the status stream, <prefix>.status.>):
// every message on subject (wildcards allowed; "" all) from sequence from on, raw.
func (s *Store) FollowStatus(ctx context.Context, subject string, from uint64, fn func(Raw) error) error {
	return s.followStream(ctx, s.names.StatusStream(), subject, from, fn)
}

// LastStatus is the last report stored on one status subject (no wildcards); ok is
// false when there is none.
func (s *Store) LastStatus(ctx context.Context, subject string) (data []byte, ok bool, err error) {
	st, err := s.js.Stream(ctx, s.names.StatusStream())
	if err != nil {
		return nil, false, err
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return m.Data, true, nil
}

// FromNew as a start sequence of FollowStatus means: only what is stored from now on.
const FromNew = ^uint64(0)

// followStream reads stream through an ordered consumer from sequence from on.
func (s *Store) followStream(ctx context.Context, stream, subject string, from uint64, fn func(Raw) error) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(from, 1),
		InactiveThreshold: time.Minute}
	if from == FromNew {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverNewPolicy, 0
	}
	if subject != "" {
		cfg.FilterSubjects = []string{subject}
	}
	cons, err := s.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if err := fn(Raw{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Stored: meta.Timestamp, Data: msg.Data(), MidBatch: MidBatch(msg.Headers())}); err != nil {
			return err
		}
	}
}
