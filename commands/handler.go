// Package commands is admission: it decodes and validates each command, decides its
// events against the views with pure rules, and appends them conditionally on the
// command's consistency boundary. A refused or malformed command appends nothing.
package commands

import (
	"encoding/json"
	"reflect"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Decision is what a handler decided: the events to append (none for a no-op), the
// boundary the decision depends on, and warnings for the operator.
type Decision struct {
	Events   []events.Draft
	Expect   events.Expect
	Warnings []string
}

// Handler decides one verb. Decide reads what it needs from the view (a consistent
// snapshot at view.Seq()) and returns a Decision, or a *cairn.Error refusing the
// command. Decision.Expect is set even with a refusal (unless the body could not be
// decoded), so admission can confirm the refusal was decided on current state. The
// body has already passed the verb's JSON Schema. Decide must not write anything:
// admission appends the events.
type Handler struct {
	Verb   string
	Decide func(v *projections.View, names events.Names, body []byte) (Decision, error)
}

// decodeBody decodes a schema-valid body into v; an error is invalid_argument.
func decodeBody(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return cairn.InvalidField("", "body: %v", err)
	}
	return nil
}

// decodeWithBoundary decodes a schema-valid body into cmd and computes the command's
// boundary from it.
func decodeWithBoundary(body []byte, cmd any, boundary func() (events.Expect, error)) (Decision, error) {
	if err := decodeBody(body, cmd); err != nil {
		return Decision{}, err
	}
	exp, err := boundary()
	return Decision{Expect: exp}, err
}

// with adds one event (skipped when payload is a nil pointer: a no-op) and warnings.
func (d Decision) with(subject string, payload events.Payload, warnings []string) Decision {
	if payload != nil && !reflect.ValueOf(payload).IsNil() {
		d.Events = append(d.Events, events.Draft{Subject: subject, Payload: payload})
	}
	d.Warnings = append(d.Warnings, warnings...)
	return d
}

// subjectBoundary is the boundary "nothing new on subject since the view".
func subjectBoundary(v *projections.View, subject string) (events.Expect, error) {
	seq, err := v.SubjectSeq(subject)
	return events.Expect{Kind: events.ExpectSubject, Seq: seq, Subject: subject}, err
}

// aggregateBoundary is the boundary "nothing new on any subject of the aggregate type".
func aggregateBoundary(v *projections.View, names events.Names, aggregate string) (events.Expect, error) {
	seq, err := v.AggregateSeq(aggregate)
	return events.Expect{Kind: events.ExpectFilter, Seq: seq, Filter: names.EventFilter(aggregate)}, err
}
