// Package decide is the kit every verb family decides with: a Handler turns one
// schema-valid command body and a view into a Decision (the events to append and the
// boundary they depend on) or a refusal, and Reads builds that boundary from what the
// decision read. It holds no verb itself: the families (nodes, resources, pools, …)
// hold those, and the admission package runs them.
package decide

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
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

// DecodeBody decodes a schema-valid body into v; an error is invalid_argument. DRBD
// options in v (a top-level field of type drbd.Options) must be valid (drbd.Options
// Validate: what the JSON Schema cannot say, such as an extra option that duplicates a
// typed one): accepted, they would make every agent's render of the resource fail.
func DecodeBody(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return cairn.InvalidField("", "body: %v", err)
	}
	return validOptions(v)
}

var optionsType = reflect.TypeFor[drbd.Options]()

// validOptions validates every top-level drbd.Options field of the struct v points to
// (in embedded structs too), naming the field by its JSON name (drbd_options.extra[…]).
func validOptions(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil
	}
	return validOptionsIn(rv.Elem())
}

// validOptionsIn is validOptions on a struct value, embedded structs included.
func validOptionsIn(rv reflect.Value) error {
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if err := validOptionsIn(rv.Field(i)); err != nil {
				return err
			}
			continue
		}
		if f.Type != optionsType || !f.IsExported() {
			continue
		}
		err := rv.Field(i).Interface().(drbd.Options).Validate()
		if err == nil {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		e := cairn.AsError(err)
		field := strings.Replace(e.Field, "options", name, 1)
		msg := e.Message
		if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
			first := cairn.AsError(joined.Unwrap()[0])
			field, msg = strings.Replace(first.Field, "options", name, 1), first.Message
		}
		return cairn.InvalidField(field, "%s", msg)
	}
	return nil
}

// DecodeWithBoundary decodes a schema-valid body into cmd and computes the command's
// boundary from it.
func DecodeWithBoundary(body []byte, cmd any, boundary func() (events.Expect, error)) (Decision, error) {
	if err := DecodeBody(body, cmd); err != nil {
		return Decision{}, err
	}
	exp, err := boundary()
	return Decision{Expect: exp}, err
}

// With adds one event (skipped when payload is a nil pointer: a no-op) and warnings.
func (d Decision) With(subject string, payload events.Payload, warnings []string) Decision {
	if payload != nil && !reflect.ValueOf(payload).IsNil() {
		d.Events = append(d.Events, events.Draft{Subject: subject, Payload: payload})
	}
	d.Warnings = append(d.Warnings, warnings...)
	return d
}

// SubjectBoundary is the boundary "nothing new on subject since the view".
func SubjectBoundary(v *projections.View, subject string) (events.Expect, error) {
	seq, err := v.SubjectSeq(subject)
	return events.Expect{Kind: events.ExpectSubject, Seq: seq, Subject: subject}, err
}

// AggregateBoundary is the boundary "nothing new on any subject of the aggregate type".
func AggregateBoundary(v *projections.View, names events.Names, aggregate string) (events.Expect, error) {
	seq, err := v.AggregateSeq(aggregate)
	return events.Expect{Kind: events.ExpectFilter, Seq: seq, Filter: names.EventFilter(aggregate)}, err
}

// Ptr is &v when ok, nil otherwise (a view lookup as an optional value).
func Ptr[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

// NameOnly is the body of the verbs that name one object (lvol.delete,
// snapshot.delete, token.revoke, …).
type NameOnly struct {
	Name string `json:"name"`
}

// Merge joins decisions of one command taken on the same view (a composite verb): their
// events in order, their warnings, and the union of their read sets. Every decision's
// boundary must be a read set (Reads); Merge panics otherwise (a programming error).
func Merge(ds ...Decision) Decision {
	out := Decision{Expect: events.Expect{Kind: events.ExpectChecks}}
	for _, d := range ds {
		if d.Expect.Kind != events.ExpectChecks && d.Expect.Kind != 0 {
			panic("decide.Merge: a decision whose boundary is not a read set")
		}
		out.Events = append(out.Events, d.Events...)
		out.Warnings = append(out.Warnings, d.Warnings...)
		for _, c := range d.Expect.Checks {
			out.Expect.Checks = out.Expect.Checks.Add(c.Subject, c.Seq)
		}
	}
	return out
}
