package drbdagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
)

func snapshotOf(t *testing.T, s *server.Server, rd, name string) (projections.RDSnapshot, bool) {
	t.Helper()
	v, err := s.DB.Read()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	def, ok, err := v.ResourceDefinition(rd)
	if err != nil || !ok {
		t.Fatalf("definition %s: %v", rd, err)
	}
	snap, ok := def.Snapshot(name)
	if !ok {
		return projections.RDSnapshot{}, false
	}
	return *snap, true
}

// Snapshots of a DRBD resource end to end with three in-process agents on the simulated
// kernel and the real serve: every disk suspends I/O, the leading serve sees all
// suspended and records the order to take, every disk snapshots its file (a real
// reflink/sparse copy) and resumes, the serve records it taken. Suspension is short and
// I/O is resumed everywhere. With one disk's agent away, the others resume at the
// suspension bound and the serve records the snapshot failed; the agent that comes back
// aborts without suspending. Deleting removes the files.
func TestSnapshotsAcrossReplicas(t *testing.T) {
	s, base, nodes := threeNodes(t)
	submit(t, s, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	submit(t, s, "rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`)
	waitApplied(t, s, "r1", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})
	snapFile := func(node, snap string) string {
		return filepath.Join(nodes[node].root, "var/lib/cairn/thin", "r1_00000."+snap+".snap")
	}

	// Data on every disk before the snapshot (as DRBD replicates it): the restored
	// copy on n1 must hold it.
	disk1, _ := diskOf(t, nodes["n1"], "r1")
	for _, n := range []string{"n1", "n2", "n3"} {
		disk, _ := diskOf(t, nodes[n], "r1")
		if err := writeData([]string{disk}, 0, []byte("before the snapshot")); err != nil {
			t.Fatal(err)
		}
	}
	submit(t, s, "rd.snapshot", `{"resource":"r1","name":"s1"}`)
	eventually(t, "s1 taken", 30*time.Second, func() (bool, string) {
		snap, _ := snapshotOf(t, s, "r1", "s1")
		return snap.Phase == projections.SnapshotTaken, js(snap)
	})
	for _, n := range []string{"n1", "n2", "n3"} {
		if _, err := os.Stat(snapFile(n, "s1")); err != nil {
			t.Errorf("%s has no snapshot file: %v", n, err)
		}
		eventually(t, n+" reports s1 taken, I/O resumed", 10*time.Second, func() (bool, string) {
			st, _ := lastStatus(t, s, n, "r1")
			reg, _ := loadReg(nodes[n].sim.regPath("r1", n))
			return len(st.Snapshots) == 1 && st.Snapshots[0].Phase == drbd.SnapTaken && st.Snapshots[0].SuspendedMs > 0 &&
				st.Snapshots[0].SuspendedMs < 700 && reg != nil && !reg.Suspended, js(st.Snapshots)
		})
	}
	refusedCmd(t, s, "rd.snapshot", `{"resource":"r1","name":"s1"}`, "already has a snapshot s1")

	// Restore s1 into r2 on the three nodes that hold it: they start in sync (no
	// resync among them), n1's copy holds what n1 had, and a later disk would be fully
	// synced (the definition is marked restored).
	submit(t, s, "rd.restore", `{"resource":"r1","snapshot":"s1","target":"r2"}`)
	st := waitApplied(t, s, "r2", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})
	for n, status := range st {
		for peer, kind := range syncKinds(status) {
			if kind != "none" && kind != "" {
				t.Errorf("restored r2 on %s synced with %s: %s, want none (one consistent snapshot)", n, peer, kind)
			}
		}
		if len(status.Volumes) != 1 || status.Volumes[0].DiskState != "UpToDate" {
			t.Errorf("restored r2 on %s: volumes %s, want UpToDate", n, js(status.Volumes))
		}
	}
	disk2, _ := diskOf(t, nodes["n1"], "r2")
	b, err := os.ReadFile(disk2)
	if err != nil || !strings.HasPrefix(string(b), "before the snapshot") {
		t.Errorf("n1's restored r2 does not hold n1's data of the snapshot: %v", err)
	}
	if rd2 := desiredOf(t, s, "n1", "r2"); rd2 == nil || rd2.Local.RestoreFrom == nil || rd2.Local.RestoreFrom.Snapshot != "s1" {
		t.Errorf("r2's desired state on n1 does not name the snapshot it starts from: %+v", rd2)
	}
	refusedCmd(t, s, "rd.restore", `{"resource":"r1","snapshot":"nope","target":"r3"}`, "has no snapshot nope")
	refusedCmd(t, s, "rd.restore", `{"resource":"r1","snapshot":"s1","target":"r2"}`, "already has replicas")
	submit(t, s, "rd.delete", `{"name":"r2"}`)
	refusedCmd(t, s, "rd.delete", `{"name":"r1"}`, "has snapshots (s1)")

	// n3's agent is away: n1 and n2 suspend, resume at the bound; the snapshot fails.
	nodes["n3"].stop()
	submit(t, s, "rd.snapshot", `{"resource":"r1","name":"s2"}`)
	eventually(t, "s2 failed", 30*time.Second, func() (bool, string) {
		snap, _ := snapshotOf(t, s, "r1", "s2")
		return snap.Phase == projections.SnapshotFailed, js(snap)
	})
	snap, _ := snapshotOf(t, s, "r1", "s2")
	t.Logf("s2: %s", snap.Reason)
	for _, n := range []string{"n1", "n2"} {
		eventually(t, n+" resumed I/O (its bound or the order to abort)", 5*time.Second, func() (bool, string) {
			reg, _ := loadReg(nodes[n].sim.regPath("r1", n))
			st, _ := lastStatus(t, s, n, "r1")
			return reg != nil && !reg.Suspended, js(st.Snapshots)
		})
		st, _ := lastStatus(t, s, n, "r1")
		for _, ss := range st.Snapshots {
			if ss.Name == "s2" && ss.SuspendedMs > 700+500 {
				t.Errorf("%s: suspended %.0f ms, past the 700 ms bound", n, ss.SuspendedMs)
			}
		}
		if _, err := os.Stat(snapFile(n, "s2")); err == nil {
			t.Errorf("%s kept the file of the failed snapshot", n)
		}
	}
	nodes["n3"] = startClusterNode(t, s, base, "n3", "h3")
	eventually(t, "n3 aborts s2 without suspending", 30*time.Second, func() (bool, string) {
		st, _ := lastStatus(t, s, "n3", "r1")
		for _, ss := range st.Snapshots {
			if ss.Name == "s2" {
				return ss.Phase == drbd.SnapAborted && ss.SuspendedMs == 0, js(st.Snapshots)
			}
		}
		return false, js(st.Snapshots)
	})

	// Roll r1 back to s1: refused while active; deactivated everywhere, every disk
	// holds s1's data again with fresh metadata sharing one current UUID, and once
	// activated they connect without a resync.
	f, err := os.OpenFile(disk1, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("AFTER  the snapshot"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	refusedCmd(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`, "deactivate it everywhere first")
	submit(t, s, "resource.deactivate", `{"resource":"r1"}`)
	submit(t, s, "rd.rollback", `{"resource":"r1","snapshot":"s1"}`)
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" rolled back", 30*time.Second, func() (bool, string) {
			st, err := LoadState(NewPaths(nodes[n].root).StateFile("r1"))
			return err == nil && st != nil && st.RolledBack > 0, js(st)
		})
	}
	if b, err := os.ReadFile(disk1); err != nil || !strings.HasPrefix(string(b), "before the snapshot") {
		t.Errorf("n1's r1 does not hold the snapshot's data after the rollback: %q %v", b[:20], err)
	}
	submit(t, s, "resource.activate", `{"resource":"r1"}`)
	// The simulated kernel's own state (each node's registry) is the truth here: the
	// rolled-back disks connect without a resync.
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" up and connected to both peers after the rollback", 30*time.Second, func() (bool, string) {
			reg, _ := loadReg(nodes[n].sim.regPath("r1", n))
			if reg == nil || !reg.Up || len(reg.Conns) != 2 {
				return false, js(reg)
			}
			for p, c := range reg.Conns {
				if c.State != "Connected" || c.Syncs[0] == nil || c.Syncs[0].Kind != "none" {
					return false, fmt.Sprintf("peer %d: %s", p, js(c))
				}
			}
			return reg.Volumes[0].DiskState == "UpToDate", js(reg)
		})
	}

	// Clone: a snapshot the serve restores into r3 once it is taken, and deletes once
	// every disk of r3 was made from it (no snapshot left behind, as LINSTOR's clone).
	submit(t, s, "rd.clone", `{"resource":"r1","target":"r3"}`)
	waitApplied(t, s, "r3", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})
	eventually(t, "the clone's snapshot deleted once r3 is restored", 30*time.Second, func() (bool, string) {
		clone, ok := snapshotOf(t, s, "r1", "clone-r3")
		return !ok, js(clone)
	})
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" removed the clone's snapshot file", 30*time.Second, func() (bool, string) {
			_, err := os.Stat(snapFile(n, "clone-r3"))
			return os.IsNotExist(err), fmt.Sprint(err)
		})
		if b, err := os.ReadFile(filepath.Join(nodes[n].root, "var/lib/cairn/thin", "r3_00000.img")); err != nil || !strings.HasPrefix(string(b), "before the snapshot") {
			t.Errorf("%s's r3 does not hold r1's data after the clone's snapshot went: %v", n, err)
		}
	}
	refusedCmd(t, s, "rd.clone", `{"resource":"r1","target":"r3"}`, "already exists")
	submit(t, s, "rd.delete", `{"name":"r3"}`)

	submit(t, s, "rd.snapshot-delete", `{"resource":"r1","name":"s1"}`)
	submit(t, s, "rd.snapshot-delete", `{"resource":"r1","name":"s2"}`)
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" removed the snapshot files", 30*time.Second, func() (bool, string) {
			_, err := os.Stat(snapFile(n, "s1"))
			st, _ := lastStatus(t, s, n, "r1")
			return os.IsNotExist(err) && len(st.Snapshots) == 0, js(st.Snapshots)
		})
	}
	submit(t, s, "rd.delete", `{"name":"r1"}`)
	noDivergence(t, nodes["n1"].sim.Dir)
}

// noDivergence fails the test when the simulated kernel's data oracle saw two disks
// declared in sync with different data.
func noDivergence(t *testing.T, simDir string) {
	t.Helper()
	d, err := SimDivergences(simDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range d {
		t.Errorf("data oracle: %s", line)
	}
}

func refusedCmd(t *testing.T, s *server.Server, verb, body, msg string) {
	t.Helper()
	r := servertest.Submit(s, verb, body)
	if r.OK || r.Error == nil || !strings.Contains(r.Error.Message, msg) {
		t.Fatalf("%s %s: %+v, want a refusal saying %q", verb, body, r, msg)
	}
}
