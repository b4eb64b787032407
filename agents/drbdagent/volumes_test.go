package drbdagent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
)

// A volume added to a deployed resource and deleted again, end to end with three
// in-process agents on the simulated kernel: every replica gets the new volume (the
// disks a backing volume, metadata and seeds; the tiebreaker a minor), the disks are
// UpToDate without a full sync of the new volume (day 0), and after vd.delete every disk
// wipes and removes it while the other volume stays.
func TestAddAndDropVolume(t *testing.T) {
	s, _, nodes := threeNodes(t)
	submit(t, s, "rd.create", `{"name":"r1"}`)
	submit(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n1"}`)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n2"}`)
	waitApplied(t, s, "r1", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})

	submit(t, s, "vd.create", `{"resource":"r1","volume":1,"size_kib":8192}`)
	volFile := func(n string, v int) string {
		return filepath.Join(nodes[n].root, "var/lib/cairn/thin", fmt.Sprintf("r1_%05d.img", v))
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" has volume 1", 30*time.Second, func() (bool, string) {
			st, _ := lastStatus(t, s, n, "r1")
			if st.Phase != drbd.PhaseApplied || len(st.Volumes) != 2 || !connectedTo(st, otherThan(n)...) {
				return false, js(st)
			}
			want := "UpToDate"
			if n == "n3" {
				want = "Diskless"
			}
			for _, v := range st.Volumes {
				if v.DiskState != want {
					return false, js(st.Volumes)
				}
			}
			for _, p := range st.Peers {
				for _, pv := range p.Volumes {
					if pv.SyncKind == "full" {
						return false, "a full sync of a new thin volume: " + js(st.Peers)
					}
				}
			}
			return true, ""
		})
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := os.Stat(volFile(n, 1)); err != nil {
			t.Errorf("%s has no backing file for volume 1: %v", n, err)
		}
	}

	submit(t, s, "vd.delete", `{"resource":"r1","volume":1}`)
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" dropped volume 1", 30*time.Second, func() (bool, string) {
			st, _ := lastStatus(t, s, n, "r1")
			_, err := os.Stat(volFile(n, 1))
			state, _ := LoadState(NewPaths(nodes[n].root).StateFile("r1"))
			return st.Phase == drbd.PhaseApplied && len(st.Volumes) == 1 && st.Volumes[0].Volume == 0 && os.IsNotExist(err), js(st) + "\ndesired " + js(desiredOf(t, s, n, "r1")) + "\nstate " + js(state)
		})
	}
	if _, err := os.Stat(volFile("n1", 0)); err != nil {
		t.Errorf("volume 0 went with volume 1: %v", err)
	}
	if c := nodes["n1"].exec.count("drbdmeta wipe-md"); c != 1 {
		t.Errorf("n1 ran wipe-md %d times, want 1 (volume 1 only)", c)
	}
}
