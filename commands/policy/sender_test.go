package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/policy"
)

// A policy never loops on a refusal: a refused command is not sent again before its
// backoff (2 s, doubling) has passed on the policy's clock, and each refusal is shown
// with its reason. Here an evacuation with no node to move to: replica.replace is
// refused (autoplace finds none).
func TestAPolicyBacksOffARefusal(t *testing.T) {
	s := servertest.Start(t)
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`},
		{"sp.create", `{"node":"n1","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":1048576}`},
		{"sp.create", `{"node":"n2","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":1048576}`},
		{"rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`},
		{"rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`},
		{"node.evacuate", `{"name":"n1"}`},
	} {
		r := servertest.Submit(s, c[0], c[1])
		require.True(t, r.OK, "%s: %+v", c[0], r.Error)
	}
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	e := &policy.Evacuator{Adm: s.Admission, DB: s.DB, Now: func() time.Time { return now }}
	refusals := func() int {
		n := 0
		for _, d := range e.Status().Recent {
			if d.Verb == "replica.replace" {
				require.Equal(t, "precondition_failed", d.Outcome)
				require.Contains(t, d.Reason, "refused: autoplace needs")
				n++
			}
		}
		return n
	}
	ctx := context.Background()
	for _, step := range []struct {
		after time.Duration
		want  int
	}{
		{0, 1},                       // refused
		{0, 1},                       // at once again: backing off, not sent
		{1900 * time.Millisecond, 1}, // within 2 s
		{200 * time.Millisecond, 2},  // past 2 s: sent again, refused, backoff 4 s
		{3 * time.Second, 2},         // within 4 s
		{1100 * time.Millisecond, 3}, // past 4 s
	} {
		now = now.Add(step.after)
		require.NoError(t, e.Once(ctx))
		require.Equal(t, step.want, refusals(), "after %s more", step.after)
	}
}
