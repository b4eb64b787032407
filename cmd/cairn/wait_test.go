package main

import (
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResourceSettled covers what `cairn wait resource` adds to drbd.Converged: the
// desired state must reflect the definition's last event, every replica it lists must
// have its own, and a definition without replicas has not settled (unless deleted).
func TestResourceSettled(t *testing.T) {
	replicas := []drbd.Replica{{Node: "n1", NodeID: 0}, {Node: "n2", NodeID: 1}}
	desired := func(node string, rev uint64) drbd.Desired {
		return drbd.Desired{Resource: "r1", Node: node, Revision: rev, Active: true, Replicas: replicas,
			Volumes: []drbd.Volume{{Number: 0}}, Local: &drbd.Local{NodeID: 0}}
	}
	up := func(node, peer string, rev uint64) *drbd.Status {
		return &drbd.Status{Resource: "r1", Node: node, Revision: rev, Phase: drbd.PhaseApplied,
			Volumes: []drbd.VolumeStatus{{Volume: 0, DiskState: "UpToDate"}},
			Peers:   []drbd.PeerStatus{{Node: peer, Connection: "Connected", Volumes: []drbd.PeerVolumeStatus{{Volume: 0, Replication: "Established"}}}}}
	}
	for _, c := range []struct {
		name string
		s    resourceState
		why  string
	}{
		{"settled", resourceState{name: "r1", lastSeq: 7,
			desired:  map[string]drbd.Desired{"n1": desired("n1", 7), "n2": desired("n2", 7)},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7), "n2": up("n2", "n1", 7)}}, ""},
		{"desired state behind the last event", resourceState{name: "r1", lastSeq: 9,
			desired:  map[string]drbd.Desired{"n1": desired("n1", 7), "n2": desired("n2", 7)},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7), "n2": up("n2", "n1", 7)}},
			"n1: desired state at revision 7, the definition's last event is 9 (dispatching)"},
		{"a listed replica without desired state", resourceState{name: "r1", lastSeq: 7,
			desired:  map[string]drbd.Desired{"n1": desired("n1", 7)},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7)}}, "n2: no desired state yet (dispatching)"},
		{"a node's report behind", resourceState{name: "r1", lastSeq: 7,
			desired:  map[string]drbd.Desired{"n1": desired("n1", 7), "n2": desired("n2", 7)},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7), "n2": up("n2", "n1", 5)}}, "n2: at revision 5 of 7"},
		{"no replica yet", resourceState{name: "r1", lastSeq: 3, desired: map[string]drbd.Desired{}}, "r1 has no replica yet"},
		{"deleted and torn down", resourceState{name: "r1", lastSeq: 12, deleted: true,
			desired: map[string]drbd.Desired{"n1": {Resource: "r1", Node: "n1"}}, statuses: map[string]*drbd.Status{}}, ""},
		{"deleted, a node still up", resourceState{name: "r1", lastSeq: 12, deleted: true,
			desired:  map[string]drbd.Desired{"n1": {Resource: "r1", Node: "n1"}},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7)}}, "n1: being removed (phase applied)"},
		{"left by the resource, its agent gone", resourceState{name: "r1", lastSeq: 7, gone: func(n string) bool { return n == "n3" },
			desired:  map[string]drbd.Desired{"n1": desired("n1", 7), "n2": desired("n2", 7), "n3": {Resource: "r1", Node: "n3"}},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7), "n2": up("n2", "n1", 7), "n3": up("n3", "n1", 5)}}, ""},
		{"left by the resource, its agent alive", resourceState{name: "r1", lastSeq: 7, gone: func(n string) bool { return false },
			desired:  map[string]drbd.Desired{"n1": desired("n1", 7), "n2": desired("n2", 7), "n3": {Resource: "r1", Node: "n3"}},
			statuses: map[string]*drbd.Status{"n1": up("n1", "n2", 7), "n2": up("n2", "n1", 7), "n3": up("n3", "n1", 5)}}, "n3: being removed (phase applied)"},
	} {
		ok, why := c.s.settled()
		assert.Equal(t, c.why == "", ok, c.name)
		assert.Equal(t, c.why, why, c.name)
	}
}

// TestPoolSettled: `cairn wait pool` waits for the grant holder's imported report of the
// current grant; a refusal ends it, a failure is waited out (the agent retries).
func TestPoolSettled(t *testing.T) {
	granted := map[string]zpool.Desired{"n1": {Pool: "tank", Node: "n1", GrantSeq: 5, Revision: 5}, "n2": {}}
	for _, c := range []struct {
		name     string
		lastSeq  uint64
		desired  map[string]zpool.Desired
		statuses map[string]zpool.Status
		done     bool
		why      string
	}{
		{"imported", 5, granted, map[string]zpool.Status{"n1": {Node: "n1", GrantSeq: 5, Phase: zpool.PhaseImported}}, true, ""},
		{"no grant", 3, map[string]zpool.Desired{"n1": {}, "n2": {}}, nil, false, "pool tank is granted to no node (pool.import grants it)"},
		{"grant not dispatched", 7, granted, nil, false, "n1: desired state at revision 5, the pool's last event is 7 (dispatching)"},
		{"no report", 5, granted, map[string]zpool.Status{}, false, "n1: no report yet"},
		{"an older grant imported", 5, granted, map[string]zpool.Status{"n1": {Node: "n1", GrantSeq: 2, Phase: zpool.PhaseImported}}, false,
			"n1: reports grant 2, the pool's grant is 5"},
		{"checking", 5, granted, map[string]zpool.Status{"n1": {Node: "n1", GrantSeq: 5, Phase: zpool.PhaseChecking}}, false, "n1: checking"},
		{"refused", 5, granted, map[string]zpool.Status{"n1": {Node: "n1", GrantSeq: 5, Phase: zpool.PhaseRefused, Code: "activity_detected", Error: "pool is active"}}, false,
			fatalPrefix + "n1: refused [activity_detected]: pool is active"},
		{"the node cannot observe its pools", 5, granted, map[string]zpool.Status{"n1": {Node: "n1", Phase: zpool.PhaseFailed, Code: "observe_failed",
			Error: `zpool list -H -o name tank: exec: "zpool": executable file not found in $PATH`}}, false,
			`n1: failed [observe_failed]: zpool list -H -o name tank: exec: "zpool": executable file not found in $PATH (the agent retries)`},
		{"failed", 5, granted, map[string]zpool.Status{"n1": {Node: "n1", GrantSeq: 5, Phase: zpool.PhaseFailed, Code: "import_failed", Error: "exit 1"}}, false,
			"n1: failed [import_failed]: exit 1 (the agent retries)"},
	} {
		p := &poolState{name: "tank", lastSeq: c.lastSeq, desired: c.desired, statuses: c.statuses}
		done, why := p.settled()
		assert.Equal(t, c.done, done, c.name)
		assert.Equal(t, c.why, why, c.name)
	}
}

// TestWaitFoldsMessages: desired states and statuses land by the node their subject
// names; an empty desired state means the resource leaves the node, an empty status
// that the report is gone, and a status naming another node is refused.
func TestWaitFoldsMessages(t *testing.T) {
	names := events.NewNames("cairn")
	s := &resourceState{name: "r1", desired: map[string]drbd.Desired{}, statuses: map[string]*drbd.Status{}}
	require.NoError(t, s.fold(names, "cairn.node.n1.drbd.r1", []byte(`{"resource":"r1","node":"n1","revision":4,"local":{"node_id":0}}`)))
	require.NoError(t, s.fold(names, "cairn.node.n2.drbd.r1", nil))
	assert.NotNil(t, s.desired["n1"].Local)
	assert.Nil(t, s.desired["n2"].Local, "an empty desired state: leaving")
	require.NoError(t, s.fold(names, "cairn.status.n1.drbd.r1", []byte(`{"resource":"r1","node":"n1","phase":"applied"}`)))
	require.Equal(t, "applied", s.statuses["n1"].Phase)
	require.ErrorContains(t, s.fold(names, "cairn.status.n1.drbd.r1", []byte(`{"resource":"r1","node":"n2"}`)), "status names node n2")
	require.NoError(t, s.fold(names, "cairn.status.n1.drbd.r1", nil))
	assert.NotContains(t, s.statuses, "n1", "an empty status: the report is gone")
	require.Error(t, s.fold(names, "cairn.ev.rd.r1", []byte(`{}`)), "not a watched subject")
	require.Error(t, s.fold(names, "cairn.node.n1.drbd.r1", []byte(`{`)), "malformed JSON")
}

// A node never heard from is gone once --node-gone-after passed since the wait started;
// one heard from, that long after its last heartbeat.
func TestHeartbeatsGone(t *testing.T) {
	h := newHeartbeats(400 * time.Millisecond)
	h.heard("n1")
	assert.False(t, h.gone("n1"))
	assert.False(t, h.gone("n2"), "not heard from, but the wait just started")
	time.Sleep(500 * time.Millisecond)
	assert.True(t, h.gone("n2"))
	assert.True(t, h.gone("n1"))
	h.heard("n1")
	assert.False(t, h.gone("n1"))
}
