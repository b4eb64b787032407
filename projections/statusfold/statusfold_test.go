package statusfold_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatusReportsFoldIntoTheResourceView(t *testing.T) {
	s := servertest.Start(t)
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"sp.create", `{"node":"n1","name":"p","provider":"file_thin","pool":"/var/lib/cairn","capacity_kib":1048576}`},
		{"rd.create", `{"name":"r1"}`},
		{"vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`},
		{"replica.add", `{"resource":"r1","node":"n1"}`},
	} {
		r := servertest.Submit(s, c[0], c[1])
		require.True(t, r.OK, "%s: %+v", c[0], r.Error)
	}
	ctx := context.Background()
	pct := 42.5
	good, _ := json.Marshal(drbd.Status{Resource: "r1", Node: "n1", Phase: drbd.PhaseApplied, Role: "Secondary",
		Volumes: []drbd.VolumeStatus{{Volume: 0, Minor: 1000, DiskState: "Diskless", CurrentGI: "00000000000000A2"}},
		Peers:   []drbd.PeerStatus{{Node: "n2", NodeID: 1, Connection: "Connected", Volumes: []drbd.PeerVolumeStatus{{Volume: 0, Replication: "SyncTarget", SyncPercent: &pct}}}}})
	forged, _ := json.Marshal(drbd.Status{Resource: "r1", Node: "n2", Phase: drbd.PhaseFailed})
	_, err := s.JS.Publish(ctx, "cairn.status.n1.drbd.r1", good)
	require.NoError(t, err)
	_, err = s.JS.Publish(ctx, "cairn.status.n1.drbd.r1", forged) // names another node: skipped
	require.NoError(t, err)
	// a later report on another subject: once it is folded, the forged one was handled
	marker, _ := json.Marshal(drbd.Status{Resource: "r2", Node: "n1", Phase: drbd.PhasePending})
	_, err = s.JS.Publish(ctx, "cairn.status.n1.drbd.r2", marker)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		st, err := v.ResourceStatus("r2")
		require.NoError(t, err)
		return len(st) == 1
	}, 5*time.Second, 20*time.Millisecond)

	var body struct {
		Replicas []struct {
			Node     string       `json:"node"`
			NodeID   int          `json:"node_id"`
			Observed *drbd.Status `json:"observed"`
		} `json:"replicas"`
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + s.HTTPAddr + "/cairn/v1/resources/r1")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return json.Unmarshal(raw, &body) == nil && len(body.Replicas) == 1 && body.Replicas[0].Observed != nil
	}, 5*time.Second, 20*time.Millisecond)
	obs := body.Replicas[0].Observed
	assert.Equal(t, drbd.PhaseApplied, obs.Phase, "the forged report did not replace the good one")
	assert.Equal(t, "00000000000000A2", obs.Volumes[0].CurrentGI)
	assert.Equal(t, 42.5, *obs.Peers[0].Volumes[0].SyncPercent)

	// removed: the observed state goes
	gone, _ := json.Marshal(drbd.Status{Resource: "r1", Node: "n1", Phase: drbd.PhaseRemoved})
	_, err = s.JS.Publish(ctx, "cairn.status.n1.drbd.r1", gone)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		st, err := v.ResourceStatus("r1")
		require.NoError(t, err)
		return len(st) == 0
	}, 5*time.Second, 20*time.Millisecond)
}
