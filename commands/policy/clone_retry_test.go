package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/projections"
)

// A clone whose snapshot failed at the suspension bound: the lease holder's reading of
// the views (SnapshotProgressFrom) deletes the failed snapshot and starts the clone
// again once resources.CloneRetryAfter has passed, and those commands are accepted: the
// clone's snapshot is under way again and its target claimed.
func TestAFailedCloneIsStartedAgain(t *testing.T) {
	s := servertest.Start(t)
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`},
		{"sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1048576}`},
		{"sp.create", `{"node":"n2","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1048576}`},
		{"rd.create", `{"name":"src"}`},
		{"vd.create", `{"resource":"src","volume":0,"size_kib":4096}`},
		{"replica.add", `{"resource":"src","place_count":2,"storage_pool":"thin"}`},
		{"rd.clone", `{"resource":"src","target":"dst"}`},
		{"rd.snapshot-progress", `{"resource":"src","name":"clone-dst","phase":"failed","reason":"node n2: aborted: suspended for the whole bound without the order to take it"}`},
	} {
		r := servertest.Submit(s, c[0], c[1])
		require.True(t, r.OK, "%s: %+v", c[0], r.Error)
	}
	requests := func(at time.Time) []string {
		policy.Now = func() time.Time { return at }
		t.Cleanup(func() { policy.Now = time.Now })
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		reqs, err := policy.SnapshotProgressFrom(v, "src")
		require.NoError(t, err)
		var out []string
		for _, r := range reqs {
			out = append(out, r.Verb+" "+string(r.Body))
			if at.After(time.Now()) {
				res := servertest.Submit(s, r.Verb, string(r.Body))
				require.True(t, res.OK, "%s: %+v", r.Verb, res.Error)
			}
		}
		return out
	}
	require.Empty(t, requests(time.Now().Add(-time.Second)), "a moment after the failure")
	require.Equal(t, []string{`rd.snapshot-delete {"name":"clone-dst","resource":"src"}`, `rd.clone {"resource":"src","target":"dst"}`},
		requests(time.Now().Add(time.Minute)))

	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	rd, _, _ := v.ResourceDefinition("src")
	snap, ok := rd.Snapshot("clone-dst")
	require.True(t, ok)
	require.Equal(t, projections.SnapshotSuspending, snap.Phase, "started again")
	_, claimed, err := v.TargetClaim("dst")
	require.NoError(t, err)
	require.True(t, claimed)
}
