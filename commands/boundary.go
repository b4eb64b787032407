package commands

import (
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// reads is a decision's read set under construction: every subject (or aggregate
// filter) whose state the decision depends on, at the sequence the view has there. The
// append is conditional on exactly these (events.ExpectChecks), so commands that read
// and write different subjects never conflict. docs/commands.md lists each verb's.
type reads struct {
	v      *projections.View
	names  events.Names
	checks events.Checks
}

func newReads(v *projections.View, names events.Names) *reads { return &reads{v: v, names: names} }

// subject records a read of one subject.
func (r *reads) subject(subject string) error {
	seq, err := r.v.SubjectSeq(subject)
	if err != nil {
		return err
	}
	r.checks = r.checks.Add(subject, seq)
	return nil
}

// of records a read of one aggregate's subject (<prefix>.ev.<aggregate>.<id>).
func (r *reads) of(aggregate, id string) error { return r.subject(r.names.Event(aggregate, id)) }

// aggregate records a read of every subject of an aggregate type.
func (r *reads) aggregate(aggregate string) error {
	seq, err := r.v.AggregateSeq(aggregate)
	if err != nil {
		return err
	}
	r.checks = r.checks.Add(r.names.EventFilter(aggregate), seq)
	return nil
}

// expect is the boundary of the decision: its read set.
func (r *reads) expect() events.Expect {
	return events.Expect{Kind: events.ExpectChecks, Checks: r.checks}
}

// decide returns d with the read set as its boundary.
func (r *reads) decide(d Decision) Decision {
	d.Expect = r.expect()
	return d
}
