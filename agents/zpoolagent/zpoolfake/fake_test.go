package zpoolfake_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/agents/zpoolagent"
	"github.com/cairn-io/cairn/agents/zpoolagent/zpoolfake"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zpool"
)

func leaf(t *testing.T, image string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk0.img")
	zfsimage.GunzipTo(t, zfsimage.FixturePath(image, "disk0"), p)
	return p
}

func check(t *testing.T, p string, hostid uint32) mmp.Verdict {
	d, f, err := zfs.OpenDevice(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return mmp.Checker{ReadEvery: mmp.MinInterval, Tunables: mmp.Tunables{ImportIntervals: 1, Interval: mmp.MinInterval}}.
		Check(context.Background(), []zfs.Device{d}, hostid, nil)
}

// TestFakeZpool: the fake refuses as zpool does (and the agent's classifier reads its
// messages), and leaves the labels as zpool would: after its own export the pool is
// "exported by this host" for the next check.
func TestFakeZpool(t *testing.T) {
	p := leaf(t, "single-off") // left ACTIVE by host-a, multihost off
	const me = 0x44444444
	f := &zpoolfake.Fake{StateFile: filepath.Join(t.TempDir(), "state"), HostID: me, Hostname: "n1"}
	z := zpoolagent.Zpool{Exec: f}
	ctx := context.Background()
	if ok, err := z.Imported(ctx, "pool-single-off"); ok || err != nil {
		t.Fatalf("imported before import: %v %v", ok, err)
	}
	err := z.Import(ctx, "pool-single-off", []string{p}, false)
	if r := zpoolagent.ClassifyImport(err); r.Phase != zpool.PhaseRefused || r.Code != zpoolagent.CodePreviouslyInUse || r.ForeignHostID != "0x11111111" || r.ForeignHost != "host-a" {
		t.Fatalf("import without -f of a pool active elsewhere: %v -> %+v", err, r)
	}
	if err := z.Import(ctx, "nope", []string{p}, true); zpoolagent.ClassifyImport(err).Code != zpoolagent.CodeNoSuchPool {
		t.Fatalf("no such pool: %v", err)
	}
	if err := z.Import(ctx, "pool-single-off", []string{filepath.Dir(p)}, true); err != nil { // -d DIR works too
		t.Fatal(err)
	}
	if ok, err := z.Imported(ctx, "pool-single-off"); !ok || err != nil {
		t.Fatalf("not imported: %v %v", ok, err)
	}
	if err := z.Import(ctx, "pool-single-off", []string{p}, true); zpoolagent.ClassifyImport(err).Code != zpoolagent.CodeNameTaken {
		t.Fatalf("second import: %v", err)
	}
	if v := check(t, p, 0x55555555); v.LastHost == nil || v.LastHost.HostID != me || v.LastHost.Hostname != "n1" || v.State != "active" {
		t.Fatalf("labels after import: %+v", v)
	}
	if err := z.Export(ctx, "pool-single-off"); err != nil {
		t.Fatal(err)
	}
	if err := z.Export(ctx, "pool-single-off"); !zpoolagent.IsNoSuchPool(err) {
		t.Fatalf("export of a pool not imported: %v", err)
	}
	if v := check(t, p, me); v.State != "exported" || v.LastHost.HostID != me {
		t.Fatalf("labels after export: %+v", v)
	}
	if got := strings.Join(f.Calls(), "\n"); !strings.Contains(got, "import -d "+p+" -N -o cachefile=none pool-single-off") {
		t.Fatalf("calls:\n%s", got)
	}

	// A multihost pool and no hostid: ZFS-8000-EY.
	fast := leaf(t, "single-fast")
	f0 := &zpoolfake.Fake{StateFile: filepath.Join(t.TempDir(), "state")}
	err = zpoolagent.Zpool{Exec: f0}.Import(ctx, "pool-single-fast", []string{fast}, true)
	if r := zpoolagent.ClassifyImport(err); r.Code != zpoolagent.CodeHostIDRequired {
		t.Fatalf("hostid 0: %v -> %+v", err, r)
	}
	// Exported by this host: the next check needs no watch.
	fe := &zpoolfake.Fake{StateFile: filepath.Join(t.TempDir(), "state"), HostID: me}
	ze := zpoolagent.Zpool{Exec: fe}
	if err := ze.Import(ctx, "pool-single-fast", []string{fast}, true); err != nil {
		t.Fatal(err)
	}
	if err := ze.Export(ctx, "pool-single-fast"); err != nil {
		t.Fatal(err)
	}
	if v := check(t, fast, me); v.Code != mmp.CodeExportedByThisHost {
		t.Fatalf("after our export: %+v", v)
	}
	// The fence (export -F) leaves the labels ACTIVE with this host's hostid: the next
	// check on this host is a full one.
	if err := ze.Import(ctx, "pool-single-fast", []string{fast}, false); err != nil {
		t.Fatal(err)
	}
	if h, err := ze.Health(ctx, "pool-single-fast"); err != nil || h.State != "ONLINE" || h.Suspended != "" {
		t.Fatalf("health of an imported pool: %+v %v", h, err)
	}
	require.NoError(t, zpoolfake.Suspend(fe.StateFile, "pool-single-fast", "mmp"))
	if h, err := ze.Health(ctx, "pool-single-fast"); err != nil || h.State != "SUSPENDED" || h.Suspended != zpoolagent.CodeMMPSuspended {
		t.Fatalf("health of an MMP-suspended pool: %+v %v", h, err)
	}
	require.NoError(t, zpoolfake.Suspend(fe.StateFile, "pool-single-fast", "io"))
	if h, err := ze.Health(ctx, "pool-single-fast"); err != nil || h.Suspended != zpoolagent.CodeIOSuspended {
		t.Fatalf("health of an I/O-suspended pool: %+v %v", h, err)
	}
	if err := ze.Fence(ctx, "pool-single-fast"); err != nil {
		t.Fatal(err)
	}
	if v := check(t, fast, me); v.Code == mmp.CodeExportedByThisHost || v.State != "active" {
		t.Fatalf("after our fence: %+v", v)
	}
}
