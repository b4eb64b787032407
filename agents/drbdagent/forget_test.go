package drbdagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/test/testtools"
)

// twoReplicas is r1 on n1 (first replica) and n2 (a later day-0 replica), seen from node.
func twoReplicas(node string) *drbd.Desired {
	d := oneReplica(1000)
	d.Node = node
	d.Replicas = append(d.Replicas, drbd.Replica{Node: "n2", Host: "h2", Address: "10.0.0.2", NodeID: 1, Minors: map[int]int{0: 1000}})
	if node == "n2" {
		seeds, _, err := drbd.PlanSeeds(drbd.SeedInput{NodeID: 1, Provider: backing.ProviderFileThin,
			Volumes: []drbd.SeedVolume{{Number: 0, Day0GI: testDay0}}})
		if err != nil {
			panic(err)
		}
		d.Local = &drbd.Local{NodeID: 1, Provider: backing.ProviderFileThin, Pool: "/var/lib/cairn/thin", Incarnation: 11, Seeds: seeds}
	}
	return d
}

// When a peer leaves, the remaining replica runs del-peer and forget-peer for its node
// id: the slot gets the day-0 bitmap UUID back, so a replica added later under that
// node id resyncs from day 0 again.
func TestPeerRemovalForgetsItsNodeID(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	base := t.TempDir()
	n1 := newSimNode(t, base, "n1", "h1", nil)
	n2 := newSimNode(t, base, "n2", "h2", nil)
	n1.pool(t, "var/lib/cairn/thin")
	n2.pool(t, "var/lib/cairn/thin")
	if err := n1.reconcile(t, twoReplicas("n1")); err != nil {
		t.Fatal(err)
	}
	if err := n2.reconcile(t, twoReplicas("n2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n1 sees n2 established", 10*time.Second, func() (bool, string) {
		st, _ := n1.pub.get(n1.statusSubject("r1"))
		return connectedTo(st, "n2"), js(st)
	})
	state, _ := LoadState(NewPaths(n1.root).StateFile("r1"))
	day0, _ := drbd.ParseUUID(testDay0)
	if g := getGI(t, 1000, state.Disks[0])[1]; g.Bitmap() == day0 {
		t.Fatalf("after the handshake n1's bitmap UUID for node id 1 is still day 0: %s", g)
	}
	if err := n2.rec.Reconcile(t.Context(), n2.subject("r1"), nil); err != nil {
		t.Fatal(err)
	}
	alone := oneReplica(1000)
	alone.Revision = 12
	if err := n1.reconcile(t, alone); err != nil {
		t.Fatal(err)
	}
	if g := getGI(t, 1000, state.Disks[0])[1]; g.Bitmap() != day0 {
		t.Fatalf("after forget-peer n1's bitmap UUID for node id 1 is %s, want day 0 %s", g.Bitmap(), day0)
	}
	state, _ = LoadState(NewPaths(n1.root).StateFile("r1"))
	if len(state.Peers) != 0 {
		t.Fatalf("state peers %v", state.Peers)
	}
	st, _ := n1.pub.get(n1.statusSubject("r1"))
	if st.Phase != drbd.PhaseApplied || strings.Contains(js(st.Peers), "n2") {
		t.Fatalf("status %s", js(st))
	}
}

// A peer removed and added again under the same node id is a new incarnation: its old
// bitmap slot holds the old disk's history, so the remaining replica forgets it (before
// the adjust that connects the new one) and records the new incarnation.
func TestPeerReaddedUnderTheSameNodeIDIsForgotten(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	base := t.TempDir()
	n1 := newSimNode(t, base, "n1", "h1", nil)
	n1.pool(t, "var/lib/cairn/thin")
	d := twoReplicas("n1")
	d.Replicas[1].Incarnation = 11
	if err := n1.reconcile(t, d); err != nil {
		t.Fatal(err)
	}
	paths := NewPaths(n1.root)
	state, _ := LoadState(paths.StateFile("r1"))
	if state.Peers[1] != "n2#11" {
		t.Fatalf("state peers %v, want n2#11 for node id 1", state.Peers)
	}
	// the old n2 synced once: n1's slot for node id 1 no longer holds day 0
	synced := drbd.UUID(0x1234567890ABCDE0)
	if _, err := newCountingExec(t).Run(context.Background(), drbdutils.SetGI(1000, state.Disks[0], 1, drbd.GI{}.SetUUID(drbd.GIBitmap, synced).String()), execx.Options{}); err != nil {
		t.Fatal(err)
	}
	again := twoReplicas("n1")
	again.Revision = 20
	again.Replicas[1].Incarnation = 20
	if err := n1.reconcile(t, again); err != nil {
		t.Fatal(err)
	}
	state, _ = LoadState(paths.StateFile("r1"))
	if state.Peers[1] != "n2#20" {
		t.Fatalf("state peers %v, want the new incarnation n2#20", state.Peers)
	}
	day0, _ := drbd.ParseUUID(testDay0)
	if g := getGI(t, 1000, state.Disks[0])[1]; g.Bitmap() != day0 {
		t.Fatalf("n1's bitmap UUID for the re-added node id 1 is %s, want day 0 %s (forgotten)", g.Bitmap(), day0)
	}
	// the same incarnation again: nothing forgotten
	if _, err := newCountingExec(t).Run(context.Background(), drbdutils.SetGI(1000, state.Disks[0], 1, drbd.GI{}.SetUUID(drbd.GIBitmap, synced).String()), execx.Options{}); err != nil {
		t.Fatal(err)
	}
	again.Revision = 21
	if err := n1.reconcile(t, again); err != nil {
		t.Fatal(err)
	}
	if g := getGI(t, 1000, state.Disks[0])[1]; g.Bitmap() != synced {
		t.Fatalf("n1 forgot a peer that did not change: bitmap UUID %s, want %s", g.Bitmap(), synced)
	}
}
