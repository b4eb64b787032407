package decide

import (
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Reads is a decision's read set under construction: every subject (or aggregate
// filter) whose state the decision depends on, at the sequence the view has there. The
// append is conditional on exactly these (events.ExpectChecks), so commands that read
// and write different subjects never conflict. docs/commands.md lists each verb's.
type Reads struct {
	v      *projections.View
	names  events.Names
	checks events.Checks
}

// NewReads starts an empty read set on v.
func NewReads(v *projections.View, names events.Names) *Reads { return &Reads{v: v, names: names} }

// Subject records a read of one subject.
func (r *Reads) Subject(subject string) error {
	seq, err := r.v.SubjectSeq(subject)
	if err != nil {
		return err
	}
	r.checks = r.checks.Add(subject, seq)
	return nil
}

// Of records a read of one aggregate's subject (<prefix>.ev.<aggregate>.<id>).
func (r *Reads) Of(aggregate, id string) error { return r.Subject(r.names.Event(aggregate, id)) }

// Aggregate records a read of every subject of an aggregate type.
func (r *Reads) Aggregate(aggregate string) error {
	seq, err := r.v.AggregateSeq(aggregate)
	if err != nil {
		return err
	}
	r.checks = r.checks.Add(r.names.EventFilter(aggregate), seq)
	return nil
}

// Expect is the boundary of the decision: its read set.
func (r *Reads) Expect() events.Expect {
	return events.Expect{Kind: events.ExpectChecks, Checks: r.checks}
}

// Decide returns d with the read set as its boundary.
func (r *Reads) Decide(d Decision) Decision {
	d.Expect = r.Expect()
	return d
}

// View is the view the reads are made on.
func (r *Reads) View() *projections.View { return r.v }

// Names are the subject names of the stream the reads are made on.
func (r *Reads) Names() events.Names { return r.names }
