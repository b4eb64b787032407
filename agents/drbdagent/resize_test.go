package drbdagent

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
)

// vd.resize end to end with three in-process agents on the simulated kernel (real
// drbdadm and drbdmeta): two file_thin disks and a tiebreaker. One disk's host is down
// (agent stopped, DRBD down) when the resize is accepted: the other disk grows its
// backing but DRBD cannot grow the device while a diskful peer is away (its status
// says so per volume); when the host returns its agent grows the backing, moves the
// metadata of the detached disk to the new end (drbdmeta check-resize), attaches and
// resizes, and every replica then reports the new size with the metadata intact.
func TestResizeWithAHostDown(t *testing.T) {
	s, base, nodes := threeNodes(t)
	submit(t, s, "rd.create", `{"name":"r1"}`)
	submit(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n1"}`)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n2"}`)
	waitApplied(t, s, "r1", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})
	if n, err := SimWrite(t.Context(), nodes["n1"].exec, DefaultSimDir(nodes["n1"].root), nodes["n1"].root, "r1", 10); err != nil || n != 10 {
		t.Fatalf("sim write: %d blocks, %v", n, err)
	}
	disk2, minor2 := diskOf(t, nodes["n2"], "r1")
	before := getGI(t, minor2, disk2)

	// n2's host goes down: agent gone, DRBD down.
	nodes["n2"].stop()
	if err := nodes["n2"].sim.Down(context.Background(), "r1"); err != nil {
		t.Fatal(err)
	}
	submit(t, s, "vd.resize", `{"resource":"r1","volume":0,"size_kib":8192}`)
	maxPeers := drbd.MaxPeers(3)
	disk1, _ := diskOf(t, nodes["n1"], "r1")
	eventually(t, "n1 grew its backing and waits for n2", 30*time.Second, func() (bool, string) {
		st, _ := lastStatus(t, s, "n1", "r1")
		fi, err := os.Stat(disk1)
		grown := err == nil && fi.Size() == int64(drbd.BackingKiB(8192, maxPeers))*1024
		return grown && len(st.Volumes) == 1 && st.Volumes[0].Resize == drbd.ResizeGrowingDevice &&
			st.Volumes[0].SizeKiB == 4096 && strings.Contains(st.Error, "n2 (node id 1) is not connected"), js(st)
	})
	if fi, _ := os.Stat(disk2); fi.Size() != int64(drbd.BackingKiB(4096, maxPeers))*1024 {
		t.Fatalf("n2's backing changed while its host was down: %d bytes", fi.Size())
	}

	// n2 returns and catches up: every replica reports the new size.
	nodes["n2"] = startClusterNode(t, s, base, "n2", "h2")
	for _, n := range []string{"n1", "n2", "n3"} {
		eventually(t, n+" reports the new size", 60*time.Second, func() (bool, string) {
			st, _ := lastStatus(t, s, n, "r1")
			return st.Phase == drbd.PhaseApplied && len(st.Volumes) == 1 && st.Volumes[0].SizeKiB == 8192 &&
				st.Volumes[0].Resize == "" && connectedTo(st, otherThan(n)...), js(st)
		})
	}
	if fi, _ := os.Stat(disk2); fi.Size() != int64(drbd.BackingKiB(8192, maxPeers))*1024 {
		t.Fatalf("n2's backing is %d bytes after the resize, want %d KiB", fi.Size(), drbd.BackingKiB(8192, maxPeers))
	}
	after := getGI(t, minor2, disk2)
	if after[1].Current() != before[1].Current() {
		t.Errorf("n2's current UUID %s after the grow, was %s: the metadata did not survive the move", after[1].Current(), before[1].Current())
	}
	if c := nodes["n2"].exec.count("drbdmeta check-resize"); c != 1 {
		t.Errorf("n2 ran check-resize %d times, want 1 (its disk grew while detached)", c)
	}
}

func otherThan(node string) []string {
	var out []string
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != node {
			out = append(out, n)
		}
	}
	return out
}

// TestForgetPeerAndGrowInOneReconcile: n1's agent is away while a third disk replaces
// the tiebreaker on n3 (under a new node id) and the volume is resized, so when it comes
// back one desired state asks it to grow its backing file and to forget-peer the
// tiebreaker's node id. The simulated disk's metadata sits at the old end of the grown
// file until the resize moves it (the kernel has it in memory all along): the forget
// must still find it, not fail with "No valid meta data found" and leave n1 failed for
// good. n1 then forgets, connects n3's disk, grows the device, and keeps its data's
// current UUID.
func TestForgetPeerAndGrowInOneReconcile(t *testing.T) {
	s, base, nodes := threeNodes(t)
	submit(t, s, "rd.create", `{"name":"r1"}`)
	submit(t, s, "vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n1"}`)
	submit(t, s, "replica.add", `{"resource":"r1","node":"n2"}`)
	waitApplied(t, s, "r1", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})
	disk1, minor1 := diskOf(t, nodes["n1"], "r1")
	before := getGI(t, minor1, disk1)

	nodes["n1"].stop()                                               // the agent only: DRBD stays up
	submit(t, s, "replica.add", `{"resource":"r1","place_count":3}`) // a third disk: the tiebreaker goes
	submit(t, s, "vd.resize", `{"resource":"r1","volume":0,"size_kib":8192}`)
	nodes["n1"] = startClusterNode(t, s, base, "n1", "h1")
	eventually(t, "n1 forgot the tiebreaker, connected n3's disk and grew the device", 60*time.Second, func() (bool, string) {
		st, _ := lastStatus(t, s, "n1", "r1")
		return st.Phase == drbd.PhaseApplied && st.Error == "" && len(st.Volumes) == 1 && st.Volumes[0].SizeKiB == 8192 &&
			connectedTo(st, "n2", "n3"), js(st)
	})
	if after := getGI(t, minor1, disk1); after[0].Current() != before[0].Current() {
		t.Errorf("n1's current UUID %s after the forget and grow, was %s", after[0].Current(), before[0].Current())
	}
}
