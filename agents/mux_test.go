package agents_test

import (
	"context"
	"testing"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/events"
)

type recordingReconciler struct{ subjects []string }

func (r *recordingReconciler) Reconcile(_ context.Context, subject string, _ []byte) error {
	r.subjects = append(r.subjects, subject)
	return nil
}

func TestMux(t *testing.T) {
	z, d := &recordingReconciler{}, &recordingReconciler{}
	m := agents.Mux{Names: events.NewNames(""), Kinds: map[string]agents.Reconciler{"zpool": z}, Default: d}
	for _, s := range []string{"cairn.node.n1.zpool.tank", "cairn.node.n1.drbd.r1", "cairn.node.n1.zpool.t2"} {
		if err := m.Reconcile(context.Background(), s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Reconcile(context.Background(), "cairn.status.n1.zpool.tank", nil); err == nil {
		t.Fatal("a status subject routed")
	}
	if len(z.subjects) != 2 || len(d.subjects) != 1 || d.subjects[0] != "cairn.node.n1.drbd.r1" {
		t.Fatalf("zpool %v, default %v", z.subjects, d.subjects)
	}
	if err := (agents.Mux{Names: events.NewNames("")}).Reconcile(context.Background(), "cairn.node.n1.lvm.x", nil); err != nil {
		t.Fatal("a kind without a reconciler is recorded only, not an error")
	}
}
