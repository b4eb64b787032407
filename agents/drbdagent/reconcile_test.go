package drbdagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/test/testtools"
)

const testDay0 = "00000000000DA000"

// oneReplica is r1 on n1 alone (the first replica), file_thin in /var/lib/cairn/thin.
func oneReplica(minor int) *drbd.Desired {
	seeds, _, err := drbd.PlanSeeds(drbd.SeedInput{NodeID: 0, Provider: backing.ProviderFileThin,
		Volumes: []drbd.SeedVolume{{Number: 0, Day0GI: testDay0, First: true}}, Rand: strings.NewReader(strings.Repeat("\x12\x34\x56\x78\x9a\xbc\xde\xf0", 8))})
	if err != nil {
		panic(err)
	}
	return &drbd.Desired{Resource: "r1", Node: "n1", Revision: 10, Active: true, Port: 7000,
		Replicas: []drbd.Replica{{Node: "n1", Host: "h1", Address: "10.0.0.1", NodeID: 0, Minors: map[int]int{0: minor}}},
		Volumes:  []drbd.Volume{{Number: 0, SizeKiB: 4096, Day0GI: testDay0}},
		Local: &drbd.Local{NodeID: 0, Provider: backing.ProviderFileThin, Pool: "/var/lib/cairn/thin", Incarnation: 10,
			Seeds: seeds}}
}

// nothingChanged fails unless rd left no trace on the node: no installed file, no
// state file, no backing volume.
func nothingChanged(t *testing.T, n *simNode, rd string) {
	t.Helper()
	paths := NewPaths(n.root)
	for _, p := range []string{paths.ResFile(rd), paths.StateFile(rd), filepath.Join(n.root, "var/lib/cairn/thin", rd+"_00000.img")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists after a refused reconcile", p)
		}
	}
	if c := n.exec.count("drbdmeta create-md"); c != 0 {
		t.Errorf("create-md ran %d times for a refused desired state", c)
	}
}

func failedWith(t *testing.T, n *simNode, rd string, want ...string) {
	t.Helper()
	st, ok := n.pub.get(n.statusSubject(rd))
	if !ok || st.Phase != drbd.PhaseFailed {
		t.Fatalf("status %+v, want phase failed", st)
	}
	for _, w := range want {
		if !strings.Contains(st.Error, w) {
			t.Errorf("status error %q, want it to say %q", st.Error, w)
		}
	}
}

func TestBadDesiredStateIsReportedAndChangesNothing(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	t.Run("unknown provider", func(t *testing.T) {
		n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
		n.pool(t, "var/lib/cairn/thin")
		d := oneReplica(1000)
		d.Local.Provider = "floppy"
		if err := n.reconcile(t, d); err == nil {
			t.Fatal("reconcile accepted an unknown provider")
		}
		failedWith(t, n, "r1", "local.provider", "floppy")
		nothingChanged(t, n, "r1")
	})
	t.Run("missing pool directory", func(t *testing.T) {
		n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
		if err := n.reconcile(t, oneReplica(1000)); err == nil {
			t.Fatal("reconcile accepted a missing pool directory")
		}
		failedWith(t, n, "r1", "local.pool", "does not exist")
		nothingChanged(t, n, "r1")
	})
	t.Run("drbdadm refuses a minor another resource uses", func(t *testing.T) {
		n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
		n.pool(t, "var/lib/cairn/thin")
		other := oneReplica(1000)
		other.Resource, other.Port = "other", 7001
		other.Local.Pool = "/var/lib/cairn/thin"
		if err := n.reconcile(t, other); err != nil {
			t.Fatalf("other: %v", err)
		}
		n.exec.reset("drbdmeta create-md")
		if err := n.reconcile(t, oneReplica(1000)); err == nil {
			t.Fatal("reconcile accepted a conflicting minor")
		}
		failedWith(t, n, "r1", "drbdadm refused", "device-minor")
		nothingChanged(t, n, "r1")
	})
	t.Run("a refused update keeps the installed file", func(t *testing.T) {
		n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
		n.pool(t, "var/lib/cairn/thin")
		if err := n.reconcile(t, oneReplica(1000)); err != nil {
			t.Fatal(err)
		}
		paths := NewPaths(n.root)
		old, _ := os.ReadFile(paths.ResFile("r1"))
		// another resource appears, planted by hand with minor 1001
		planted := strings.ReplaceAll(strings.ReplaceAll(string(old), `"r1"`, `"planted"`), "7000", "7005")
		planted = strings.ReplaceAll(strings.ReplaceAll(planted, "minor 1000", "minor 1001"), "r1_00000", "planted_00000")
		if err := os.WriteFile(filepath.Join(paths.ConfDir, "planted.res"), []byte(planted), 0o644); err != nil {
			t.Fatal(err)
		}
		d := oneReplica(1001)
		d.Revision = 11
		if err := n.reconcile(t, d); err == nil {
			t.Fatal("reconcile accepted a minor the planted resource uses")
		}
		failedWith(t, n, "r1", "device-minor")
		now, _ := os.ReadFile(paths.ResFile("r1"))
		if string(now) != string(old) {
			t.Fatalf("the installed file changed after a refusal:\n%s", now)
		}
	})
}

func TestSingleReplicaLifecycle(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
	n.pool(t, "var/lib/cairn/thin")
	d := oneReplica(1000)
	if err := n.reconcile(t, d); err != nil {
		t.Fatal(err)
	}
	st, _ := n.pub.get(n.statusSubject("r1"))
	if st.Phase != drbd.PhaseApplied || st.Revision != 10 || st.Incarnation != 10 {
		t.Fatalf("status %s", js(st))
	}
	state, err := LoadState(NewPaths(n.root).StateFile("r1"))
	if err != nil || state == nil || !state.MDCreated || !state.Seeded || !state.Adjusted || state.Revision != 10 {
		t.Fatalf("state %+v %v", state, err)
	}
	want := drbd.NewMetadata()
	if err := want.Apply(d.Local.Seeds, 0); err != nil {
		t.Fatal(err)
	}
	got := getGI(t, 1000, state.Disks[0])
	for id := range got {
		if got[id] != want.GI(id) {
			t.Fatalf("node id %d: get-gi %s, want %s", id, got[id], want.GI(id))
		}
	}
	fi, err := os.Stat(state.Disks[0])
	if err != nil || uint64(fi.Size()) != drbd.BackingKiB(4096, drbd.MaxPeers(1))*1024 {
		t.Fatalf("backing file %v %v, want %d KiB", fi, err, drbd.BackingKiB(4096, drbd.MaxPeers(1)))
	}
	// again: nothing is seeded or created twice
	sets := n.exec.count("drbdmeta set-gi")
	if err := n.reconcile(t, d); err != nil {
		t.Fatal(err)
	}
	if n.exec.count("drbdmeta set-gi") != sets || n.exec.count("drbdmeta create-md") != 1 {
		t.Fatalf("a second reconcile seeded again: %v", n.exec.n)
	}
	eventually(t, "status shows the disk UpToDate and its current GI", 5e9, func() (bool, string) {
		st, _ := n.pub.get(n.statusSubject("r1"))
		ok := len(st.Volumes) == 1 && st.Volumes[0].DiskState == "UpToDate" && st.Volumes[0].CurrentGI == got[0].Current().String()
		return ok, js(st)
	})
	// removal
	if err := n.rec.Reconcile(t.Context(), n.subject("r1"), nil); err != nil {
		t.Fatal(err)
	}
	st, _ = n.pub.get(n.statusSubject("r1"))
	if st.Phase != drbd.PhaseRemoved {
		t.Fatalf("status %s", js(st))
	}
	for _, p := range []string{NewPaths(n.root).ResFile("r1"), NewPaths(n.root).StateFile("r1"), state.Disks[0]} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s still exists after removal", p)
		}
	}
	if n.exec.count("drbdmeta wipe-md") != 1 {
		t.Errorf("wipe-md ran %d times", n.exec.count("drbdmeta wipe-md"))
	}
}

// A failure to prepare the paths (here a file where etc/ must be) fails the reconcile,
// and the next one prepares them again once the obstacle is gone: it is not remembered.
func TestPrepareFailureIsRetried(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	n := newSimNode(t, t.TempDir(), "n1", "h1", nil)
	n.pool(t, "var/lib/cairn/thin")
	etc := filepath.Join(n.root, "etc")
	if err := os.WriteFile(etc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.reconcile(t, oneReplica(1000)); err == nil {
		t.Fatal("reconcile succeeded without its directories")
	}
	failedWith(t, n, "r1", "agent directories")
	if err := os.Remove(etc); err != nil {
		t.Fatal(err)
	}
	if err := n.reconcile(t, oneReplica(1000)); err != nil {
		t.Fatalf("after the obstacle went: %v", err)
	}
	if st, _ := n.pub.get(n.statusSubject("r1")); st.Phase != drbd.PhaseApplied {
		t.Fatalf("status %s", js(st))
	}
}
