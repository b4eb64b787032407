package agents

import (
	"context"
	"fmt"

	"github.com/cairn-io/cairn/events"
)

// Mux is a Reconciler that routes each desired-state subject
// <prefix>.node.<node>.<kind>.<id> to the Reconciler of its kind, e.g.
//
//	agents.Options{Reconciler: agents.Mux{Names: names, Kinds: map[string]agents.Reconciler{
//		"zpool": zpoolReconciler, "drbd": drbdReconciler}}}
//
// A subject of a kind without a Reconciler goes to Default; without Default it is
// ignored (nil error: the agent only records it). A subject outside <prefix>.node. is
// an error.
type Mux struct {
	Names   events.Names
	Kinds   map[string]Reconciler
	Default Reconciler
}

var _ Reconciler = Mux{}

// Kind returns the kind of a desired-state subject, "" when it is not one.
func (m Mux) Kind(subject string) string {
	_, kind, _, _ := m.Names.ParseNode(subject)
	return kind
}

// Reconcile hands the subject to its kind's Reconciler.
func (m Mux) Reconcile(ctx context.Context, subject string, desired []byte) error {
	kind := m.Kind(subject)
	if kind == "" {
		return fmt.Errorf("agent: %s is not a desired-state subject", subject)
	}
	if r := m.Kinds[kind]; r != nil {
		return r.Reconcile(ctx, subject, desired)
	}
	if m.Default != nil {
		return m.Default.Reconcile(ctx, subject, desired)
	}
	return nil
}
