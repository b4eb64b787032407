package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Envelope is the body of every message on the events stream. It is what auditors read:
// what happened (Type at SchemaVersion, Payload), to what (Subject), when (OccurredAt),
// and why (the command that caused it, who sent it, the correlation chain).
type Envelope struct {
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	SchemaVersion int       `json:"schema_version"`
	Subject       string    `json:"subject"`
	OccurredAt    time.Time `json:"occurred_at"`
	CommandID     string    `json:"command_id"`
	CorrelationID string    `json:"correlation_id"`
	CausationID   string    `json:"causation_id"`
	Actor         string    `json:"actor"`
	// RequestDigest identifies the request the command id was given to (its verb and
	// body, see admission.RequestDigest): a retry with the same id must be the same
	// request. Empty in events of older binaries.
	RequestDigest string          `json:"request_digest,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

// Draft is an event decided by a command handler before it gets its envelope.
type Draft struct {
	Subject string
	Payload Payload
}

// Payload is implemented by every event payload type; EventType names it in the registry.
type Payload interface {
	EventType() string
}

// Meta is what the command gives every event it causes.
type Meta struct {
	CommandID     string
	CorrelationID string
	CausationID   string
	Actor         string
	OccurredAt    time.Time
	RequestDigest string
}

// Seal wraps drafts into envelopes at the current schema version of their types. It
// returns an error if a payload's type is not registered or a payload does not pass
// its type's schema (a decision's bug: appended, the projector would skip the event
// and an accepted command would have changed nothing).
func Seal(meta Meta, drafts []Draft) ([]Envelope, error) {
	out := make([]Envelope, 0, len(drafts))
	for _, d := range drafts {
		t, ok := Lookup(d.Payload.EventType())
		if !ok {
			return nil, fmt.Errorf("event type %q is not registered", d.Payload.EventType())
		}
		raw, err := json.Marshal(d.Payload)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", t.Name, err)
		}
		if _, err := validPayload(t, t.Version, raw); err != nil {
			return nil, fmt.Errorf("decided an invalid event: %w", err)
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		out = append(out, Envelope{
			ID:            id.String(),
			Type:          t.Name,
			SchemaVersion: t.Version,
			Subject:       d.Subject,
			OccurredAt:    meta.OccurredAt.UTC(),
			CommandID:     meta.CommandID,
			CorrelationID: meta.CorrelationID,
			CausationID:   meta.CausationID,
			Actor:         meta.Actor,
			RequestDigest: meta.RequestDigest,
			Payload:       raw,
		})
	}
	return out, nil
}

// Event is a decoded, validated and upcast event as read from the stream.
type Event struct {
	Seq uint64
	Envelope
	// Data is the typed payload at the type's current version (a pointer to the
	// registered Go type).
	Data Payload
}
