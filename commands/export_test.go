package commands

import (
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ReplaceDecideForTest replaces the Decide of verb (tests of what admission does when a
// handler misbehaves).
func (a *Admission) ReplaceDecideForTest(verb string, decide func(v *projections.View, names events.Names, body []byte) (Decision, error)) {
	h := a.handlers[verb]
	h.Decide = decide
	a.handlers[verb] = h
}

// DecideForTest decides verb on v as admission would, without appending.
func (a *Admission) DecideForTest(verb string, v *projections.View, names events.Names, body []byte) (Decision, error) {
	return a.handlers[verb].Decide(v, names, body)
}
