package drbdagent

import (
	"path/filepath"
	"testing"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/test/testtools"
)

// The agent is killed right after a step (the hook stops the reconcile there, as if
// the process died, and the reconciler is dropped); a new agent on the same root
// finishes the job. The metadata (get-gi for every node id) must be what one
// uninterrupted run produces, create-md must have run once, the seeds applied once in
// full (32 set-gi) and, once adjust started, never again.
func TestRestartBetweenSteps(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	want := uninterruptedGI(t)
	seeds := len(oneReplica(1000).Local.Seeds)

	for _, tt := range []struct {
		step                  string
		setGIAfter, mdAfter   int // calls by the restarted agent
		adjustedBeforeRestart bool
	}{
		{step: "backing", setGIAfter: seeds, mdAfter: 1},
		{step: "installed", setGIAfter: seeds, mdAfter: 1},
		{step: "md-created", setGIAfter: seeds, mdAfter: 0},
		{step: "seeded", setGIAfter: 0, mdAfter: 0},
		{step: "adjusting", setGIAfter: 0, mdAfter: 0, adjustedBeforeRestart: true},
		{step: "adjusted", setGIAfter: 0, mdAfter: 0, adjustedBeforeRestart: true},
	} {
		t.Run("killed after "+tt.step, func(t *testing.T) {
			base := t.TempDir()
			dead := newSimNode(t, base, "n1", "h1", func(rd, step string) bool { return step == tt.step })
			dead.pool(t, "var/lib/cairn/thin")
			if err := dead.reconcile(t, oneReplica(1000)); err != ErrStopped {
				t.Fatalf("first run: %v, want it stopped after %s", err, tt.step)
			}
			dead.cancel()
			st, err := LoadState(NewPaths(dead.root).StateFile("r1"))
			if err != nil || st == nil || st.Adjusted != tt.adjustedBeforeRestart {
				t.Fatalf("state after the crash %+v (%v)", st, err)
			}
			again := newSimNode(t, base, "n1", "h1", nil)
			if err := again.reconcile(t, oneReplica(1000)); err != nil {
				t.Fatalf("after restart: %v", err)
			}
			if got := again.exec.count("drbdmeta set-gi"); got != tt.setGIAfter {
				t.Errorf("the restarted agent ran set-gi %d times, want %d", got, tt.setGIAfter)
			}
			if got := again.exec.count("drbdmeta create-md"); got != tt.mdAfter {
				t.Errorf("the restarted agent ran create-md %d times, want %d", got, tt.mdAfter)
			}
			if total := dead.exec.count("drbdmeta create-md") + again.exec.count("drbdmeta create-md"); total != 1 {
				t.Errorf("create-md ran %d times in all, want 1", total)
			}
			st, _ = LoadState(NewPaths(again.root).StateFile("r1"))
			if !st.MDCreated || !st.Seeded || !st.Adjusted {
				t.Fatalf("state after restart %+v", st)
			}
			sameAsUninterrupted(t, again, want)
			if s, _ := again.pub.get(again.statusSubject("r1")); s.Phase != drbd.PhaseApplied {
				t.Fatalf("status %s", js(s))
			}
		})
	}
}

// A Desired of a newer incarnation (the replica was removed and added again while the
// agent missed the removal) retires the old disk and seeds fresh metadata; one of an
// older incarnation is ignored and changes nothing.
func TestIncarnationRules(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
	n.pool(t, "var/lib/cairn/thin")
	d := oneReplica(1000)
	if err := n.reconcile(t, d); err != nil {
		t.Fatal(err)
	}
	newer := oneReplica(1000)
	newer.Revision, newer.Local.Incarnation = 20, 20
	newer.Local.Seeds, newer.Local.FullSync = nil, true
	if err := n.reconcile(t, newer); err != nil {
		t.Fatal(err)
	}
	if n.exec.count("drbdmeta wipe-md") != 1 || n.exec.count("drbdmeta create-md") != 2 {
		t.Fatalf("new incarnation: wipe-md %d, create-md %d", n.exec.count("drbdmeta wipe-md"), n.exec.count("drbdmeta create-md"))
	}
	got := getGI(t, 1000, filepath.Join(n.root, "var/lib/cairn/thin/r1_00000.img"))
	if fresh := drbd.NewMetadata(); got[0] != fresh.GI(0) {
		t.Fatalf("full sync incarnation: get-gi %s, want fresh metadata %s", got[0], fresh.GI(0))
	}
	sets := n.exec.count("drbdmeta set-gi")
	if err := n.reconcile(t, d); err != nil {
		t.Fatal(err)
	}
	if n.exec.count("drbdmeta set-gi") != sets || n.exec.count("drbdmeta create-md") != 2 {
		t.Fatal("a stale plan (older incarnation) was applied")
	}
	st, _ := LoadState(NewPaths(n.root).StateFile("r1"))
	if st.Incarnation != 20 {
		t.Fatalf("state incarnation %d", st.Incarnation)
	}
}

// Killed halfway through the seeding (the 10th of 32 set-gi never runs): the restarted
// agent applies every seed again (set-gi writes absolute values) and ends with the
// metadata of an uninterrupted run, without a second create-md.
func TestRestartHalfwayThroughSeeding(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	want := uninterruptedGI(t)

	base := t.TempDir()
	dead := newSimNode(t, base, "n1", "h1", nil)
	dead.pool(t, "var/lib/cairn/thin")
	dead.exec.dieKey, dead.exec.dieAt = "drbdmeta set-gi", 10
	if err := dead.reconcile(t, oneReplica(1000)); err == nil {
		t.Fatal("the reconcile survived its kill")
	}
	dead.cancel()
	st, _ := LoadState(NewPaths(dead.root).StateFile("r1"))
	if !st.MDCreated || st.Seeded || st.Adjusted {
		t.Fatalf("state after the kill %+v", st)
	}
	again := newSimNode(t, base, "n1", "h1", nil)
	if err := again.reconcile(t, oneReplica(1000)); err != nil {
		t.Fatal(err)
	}
	if again.exec.count("drbdmeta create-md") != 0 || again.exec.count("drbdmeta set-gi") != len(oneReplica(1000).Local.Seeds) {
		t.Fatalf("restart ran create-md %d, set-gi %d", again.exec.count("drbdmeta create-md"), again.exec.count("drbdmeta set-gi"))
	}
	sameAsUninterrupted(t, again, want)
}

// uninterruptedGI is the metadata (get-gi for every node id) one uninterrupted
// reconcile of oneReplica(1000) leaves on a fresh node.
func uninterruptedGI(t *testing.T) [drbd.MaxNodeID + 1]drbd.GI {
	t.Helper()
	ref := newSimNode(t, t.TempDir(), "n1", "h1", nil)
	ref.pool(t, "var/lib/cairn/thin")
	if err := ref.reconcile(t, oneReplica(1000)); err != nil {
		t.Fatal(err)
	}
	refState, _ := LoadState(NewPaths(ref.root).StateFile("r1"))
	return getGI(t, 1000, refState.Disks[0])
}

// sameAsUninterrupted fails unless r1's disk on n has the metadata want.
func sameAsUninterrupted(t *testing.T, n *simNode, want [drbd.MaxNodeID + 1]drbd.GI) {
	t.Helper()
	got := getGI(t, 1000, filepath.Join(n.root, "var/lib/cairn/thin/r1_00000.img"))
	for id := range got {
		if got[id] != want[id] {
			t.Fatalf("node id %d: get-gi %s, an uninterrupted run gives %s", id, got[id], want[id])
		}
	}
}
