package drbdutils

// Seeding plans applied with the real drbdmeta (drbd-utils 9.22) on a sparse file:
// create-md, set-gi per seed, get-gi for every node id, compared with the plan (through
// the Metadata model). Skipped when drbdmeta is not on PATH.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"

	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/test/testtools"
)

// sparseDisk creates a 64 MiB sparse file to hold internal metadata.
func sparseDisk(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRun(t *testing.T, argv []string) result {
	t.Helper()
	res := run(t, "h0", nil, argv)
	if res.rc != 0 {
		t.Fatalf("%s: rc %d\nstdout %s\nstderr %s", strings.Join(argv, " "), res.rc, res.stdout, res.stderr)
	}
	return res
}

const testMinor = 1000

// readBack returns get-gi for every node id 0..31.
func readBack(t *testing.T, disk string) [drbd.MaxNodeID + 1]drbd.GI {
	t.Helper()
	var out [drbd.MaxNodeID + 1]drbd.GI
	for n := 0; n <= drbd.MaxNodeID; n++ {
		res := mustRun(t, GetGI(testMinor, disk, n))
		g, err := ParseGetGI([]byte(res.stdout))
		if err != nil {
			t.Fatalf("node id %d: %v", n, err)
		}
		out[n] = g
	}
	return out
}

func TestSeedsWithRealDrbdmeta(t *testing.T) {
	testtools.Path(t, Drbdmeta)
	tests := []struct {
		name   string
		in     drbd.SeedInput
		dstate string
	}{
		{"first replica", drbd.SeedInput{NodeID: 0, Provider: backing.ProviderZFSThin, Volumes: []drbd.SeedVolume{{Number: 0, Day0GI: day0Hex, First: true}}, Rand: fixedRand()}, "Consistent"},
		{"later replica on zfs_thin, node id 2", drbd.SeedInput{NodeID: 2, Provider: backing.ProviderZFSThin, Volumes: []drbd.SeedVolume{{Number: 0, Day0GI: day0Hex, First: false}}}, "Consistent"},
		{"later replica with a node id above max-peers", drbd.SeedInput{NodeID: 30, Provider: backing.ProviderLVMThin, Volumes: []drbd.SeedVolume{{Number: 0, Day0GI: day0Hex, First: false}}}, "Consistent"},
		{"later replica on thick lvm: full sync", drbd.SeedInput{NodeID: 1, Provider: backing.ProviderLVM, Volumes: []drbd.SeedVolume{{Number: 0, Day0GI: day0Hex, First: false}}}, "Inconsistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := sparseDisk(t)
			seeds, fullSync, err := drbd.PlanSeeds(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, CreateMD(testMinor, disk, drbd.MaxPeers(3)))
			for _, s := range seeds {
				res := mustRun(t, SeedArgv(testMinor, disk, s))
				if strings.Contains(res.stdout, "Operation canceled") {
					t.Fatalf("set-gi did not write: %s", res.stdout)
				}
			}
			want := drbd.NewMetadata()
			if err := want.Apply(seeds, 0); err != nil {
				t.Fatal(err)
			}
			got := readBack(t, disk)
			for n := 0; n <= drbd.MaxNodeID; n++ {
				if got[n] != want.GI(n) {
					t.Errorf("node id %d: drbdmeta get-gi %s, plan says %s", n, got[n], want.GI(n))
				}
			}
			if fullSync && got[tt.in.NodeID].Current() != drbd.UUIDJustCreated {
				t.Errorf("full-sync replica's current UUID is %s, want UUID_JUST_CREATED", got[tt.in.NodeID].Current())
			}
			res := mustRun(t, Dstate(testMinor, disk))
			if ds, err := ParseDstate([]byte(res.stdout)); err != nil || ds != tt.dstate {
				t.Errorf("dstate %q, %v; want %s", ds, err, tt.dstate)
			}
		})
	}
}

// drbdmeta's layout, checked directly: set-gi for a node id without a bitmap slot
// (max-peers 2, node id 5) stores that node id's bitmap UUID and touches no other
// node id's — the reason PlanSeeds can seed all 32 node ids.
func TestDrbdmetaKeepsBitmapUUIDsForNodeIDsWithoutSlots(t *testing.T) {
	testtools.Path(t, Drbdmeta)
	disk := sparseDisk(t)
	mustRun(t, CreateMD(testMinor, disk, 2))
	mustRun(t, SetGI(testMinor, disk, 5, ":AAAAAAAAAAAAAAA2::::"))
	mustRun(t, SetGI(testMinor, disk, 31, ":BBBBBBBBBBBBBBB2::::"))
	got := readBack(t, disk)
	for n, g := range got {
		want := drbd.UUID(0)
		switch n {
		case 5:
			want = 0xAAAAAAAAAAAAAAA2
		case 31:
			want = 0xBBBBBBBBBBBBBBB2
		}
		if g.Bitmap() != want || g.Current() != drbd.UUIDJustCreated {
			t.Errorf("node id %d: %s, want bitmap %s and current 4", n, g, want)
		}
	}
	res := run(t, "h0", nil, GetGI(testMinor, disk, 32))
	if res.rc == 0 || !strings.Contains(res.stderr, "node-id out of range (0...31)") {
		t.Fatalf("node id 32: rc %d %q, want drbdmeta to refuse it", res.rc, res.stderr)
	}
}

func TestDrbdmetaWipeMD(t *testing.T) {
	testtools.Path(t, Drbdmeta)
	disk := sparseDisk(t)
	mustRun(t, CreateMD(testMinor, disk, drbd.MaxPeers(2)))
	if ds, err := ParseDstate([]byte(mustRun(t, Dstate(testMinor, disk)).stdout)); err != nil || ds != "Inconsistent" {
		t.Fatalf("dstate after create-md %q, %v", ds, err)
	}
	mustRun(t, WipeMD(testMinor, disk))
	res := run(t, "h0", nil, Dstate(testMinor, disk))
	if res.rc == 0 {
		t.Fatal("dstate succeeded on wiped metadata")
	}
	if _, err := ParseDstate([]byte(res.stdout + res.stderr)); err == nil || !strings.Contains(err.Error(), "no valid DRBD metadata") {
		t.Fatalf("ParseDstate on wiped metadata: %v", err)
	}
}

// The metadata size formula matches what drbdmeta create-md lays out (dump-md's
// md_size_sect and bm_offset, the start of the metadata = the usable size).
func TestInternalMetadataSizeMatchesDrbdmeta(t *testing.T) {
	testtools.Path(t, Drbdmeta)
	for _, tt := range []struct {
		size     int64
		maxPeers int
	}{
		{64 << 20, 1}, {64 << 20, 2}, {64 << 20, 7}, {1 << 30, 7}, {1<<30 + 12288, 7}, {1<<30 + 1000, 3}, {4 << 30, 31}, {10 << 30, 1},
	} {
		p := filepath.Join(t.TempDir(), "disk.img")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(tt.size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		mustRun(t, CreateMD(testMinor, p, tt.maxPeers))
		dump := mustRun(t, DumpMD(testMinor, p)).stdout
		var mdSect, bmOffset uint64
		for _, l := range strings.Split(dump, "\n") {
			fmt.Sscanf(l, "# md_size_sect %d", &mdSect)
			fmt.Sscanf(l, "# bm_offset %d", &bmOffset)
		}
		if got := drbd.InternalMetadataBytes(uint64(tt.size), tt.maxPeers); got != mdSect*512 {
			t.Errorf("size %d, max-peers %d: InternalMetadataBytes %d, drbdmeta md_size_sect %d (%d bytes)", tt.size, tt.maxPeers, got, mdSect, mdSect*512)
		}
		if got := drbd.UsableBytes(uint64(tt.size), tt.maxPeers); got != bmOffset {
			t.Errorf("size %d, max-peers %d: UsableBytes %d, drbdmeta bm_offset %d", tt.size, tt.maxPeers, got, bmOffset)
		}
	}
}

// A detached disk that grew: drbdmeta no longer finds the internal metadata at the new
// end until check-resize moves it; it finds the old end through its last-known file
// for the minor (written here as the agent writes it, with the size before the grow).
// The GIs survive the move, and a second check-resize (nothing grew) changes nothing.
func TestDrbdmetaCheckResizeAfterGrow(t *testing.T) {
	testtools.Path(t, Drbdmeta)
	const minor = 1999 // no other test uses it: the last-known file is per minor and machine
	disk := sparseDisk(t)
	mustRun(t, CreateMD(minor, disk, drbd.MaxPeers(3)))
	mustRun(t, SetGI(minor, disk, 0, "ABCDEF0123456780:1234567890ABCDE0:::1:1"))
	before := mustRun(t, GetGI(minor, disk, 0)).stdout
	if err := os.Truncate(disk, 128<<20); err != nil {
		t.Fatal(err)
	}
	if res := run(t, "h0", nil, GetGI(minor, disk, 0)); res.rc == 0 && strings.TrimSpace(res.stdout) != "" {
		t.Fatalf("get-gi found metadata at the new end before check-resize: %q", res.stdout)
	}
	lkbd := fmt.Sprintf("/var/lib/drbd/drbd-minor-%d.lkbd", minor)
	if err := os.WriteFile(lkbd, fmt.Appendf(nil, "%d\t%s\n", 64<<20, disk), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, CheckResize(minor, disk))
	if got := mustRun(t, GetGI(minor, disk, 0)).stdout; got != before {
		t.Fatalf("GI after check-resize %q, want %q", got, before)
	}
	mustRun(t, CheckResize(minor, disk))
	if got := mustRun(t, GetGI(minor, disk, 0)).stdout; got != before {
		t.Fatalf("GI after a second check-resize %q, want %q", got, before)
	}
}

// TestGetGIOfFileAsksNoKernel: the minor-less get-gi reads the same GI as GetGI, but
// drbdmeta runs no drbdsetup for it (GetGI runs `drbdsetup <minor> dstate`, which on a
// host without the module runs modprobe). The drbdsetup on PATH here records its calls
// and says the minor is unconfigured.
func TestGetGIOfFileAsksNoKernel(t *testing.T) {
	testtools.Path(t, Drbdmeta)
	disk := sparseDisk(t)
	mustRun(t, CreateMD(testMinor, disk, 2))
	mustRun(t, SetGI(testMinor, disk, 1, "0123456789ABCDEF:FEDCBA9876543211::::1:1:0:1:1:0:0:0:0:0:0"))
	fake := t.TempDir()
	calls := filepath.Join(fake, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\necho Unconfigured\n"
	if err := os.WriteFile(filepath.Join(fake, "drbdsetup"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	path := []string{"PATH=" + fake + ":" + os.Getenv("PATH")}
	withMinor := run(t, "h0", path, GetGI(testMinor, disk, 1))
	recorded, _ := os.ReadFile(calls)
	if withMinor.rc != 0 || !strings.Contains(string(recorded), "dstate") {
		t.Fatalf("GetGI: rc %d, drbdsetup calls %q (want a dstate): the fake is not what drbdmeta ran", withMinor.rc, recorded)
	}
	if err := os.Remove(calls); err != nil {
		t.Fatal(err)
	}
	ofFile := run(t, "h0", path, GetGIOfFile(disk, 1))
	if ofFile.rc != 0 || ofFile.stdout != withMinor.stdout {
		t.Fatalf("GetGIOfFile: rc %d stdout %q, want %q (stderr %s)", ofFile.rc, ofFile.stdout, withMinor.stdout, ofFile.stderr)
	}
	if !strings.HasPrefix(ofFile.stdout, "0123456789ABCDEF:FEDCBA9876543211:") {
		t.Fatalf("get-gi %q does not show the GI set", ofFile.stdout)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("GetGIOfFile ran drbdsetup: %q", b)
	}
}
