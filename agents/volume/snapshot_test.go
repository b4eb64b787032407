package volume

import (
	"context"
	"os"
	"testing"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/stretchr/testify/require"
)

// file_thin snapshots for real: the snapshot keeps the data of its moment while the
// volume changes, a second Snapshot keeps the first, DeleteSnapshot removes it (twice
// is fine); a thick file is refused with ErrNoSnapshots.
func TestFileSnapshot(t *testing.T) {
	ctx := context.Background()
	p, err := For(backing.ProviderFileThin, "/pool", t.TempDir(), nil)
	require.NoError(t, err)
	s, err := SnapshotsOf(p, backing.ProviderFileThin)
	require.NoError(t, err)
	path, err := p.Create(ctx, "r1_00000", 1024)
	require.NoError(t, err)
	write := func(at int64, data string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte(data), at)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	write(8192, "before")
	require.NoError(t, s.Snapshot(ctx, "r1_00000", "s1"))
	write(8192, "after!")
	require.NoError(t, s.Snapshot(ctx, "r1_00000", "s1"), "again: kept as it is")
	snapFile := p.(*File).SnapshotPath("r1_00000", "s1")
	b, err := os.ReadFile(snapFile)
	require.NoError(t, err)
	require.Equal(t, "before", string(b[8192:8198]))
	require.Len(t, b, 1024*1024)
	require.NoError(t, s.DeleteSnapshot(ctx, "r1_00000", "s1"))
	require.NoFileExists(t, snapFile)
	require.NoError(t, s.DeleteSnapshot(ctx, "r1_00000", "s1"))
	require.Error(t, s.Snapshot(ctx, "r1_00000", "../x"))

	thick, err := For(backing.ProviderFile, "/pool", t.TempDir(), nil)
	require.NoError(t, err)
	_, err = SnapshotsOf(thick, backing.ProviderFile)
	require.ErrorIs(t, err, ErrNoSnapshots)
	_, err = SnapshotsOf(&LVM{VG: "vg0"}, backing.ProviderLVM)
	require.ErrorIs(t, err, ErrNoSnapshots)
}

// LVM thin and ZFS snapshots through the recorder: the exact commands.
func TestLVMAndZFSSnapshots(t *testing.T) {
	ctx := context.Background()
	rec := &execx.Recorder{Strict: true}
	rec.On("lvs").Stdout("")
	rec.On("lvcreate")
	l := &LVM{VG: "vg0", ThinPool: "thin", Exec: rec}
	require.NoError(t, l.Snapshot(ctx, "r1_00000", "s1"))
	require.Equal(t, []string{
		"lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=r1_00000.s1 vg0",
		"lvcreate --yes --snapshot --setactivationskip y --name r1_00000.s1 vg0/r1_00000",
	}, rec.Commands())

	rec = &execx.Recorder{Strict: true}
	rec.On("zfs", "list").Fail(1, "cannot open 'tank/r1_00000@s1': dataset does not exist\n")
	rec.On("zfs", "snapshot")
	z := &ZFS{Parent: "tank", Exec: rec}
	require.NoError(t, z.Snapshot(ctx, "r1_00000", "s1"))
	require.NoError(t, z.DeleteSnapshot(ctx, "r1_00000", "s1"), "gone: nothing to destroy")
	require.Equal(t, []string{
		"zfs list -H -t snapshot -o name tank/r1_00000@s1",
		"zfs snapshot tank/r1_00000@s1",
		"zfs list -H -t snapshot -o name tank/r1_00000@s1",
	}, rec.Commands())
	rec = &execx.Recorder{Strict: true}
	rec.On("zfs", "list").Stdout("tank/r1_00000@s1\n")
	rec.On("zfs", "destroy")
	z = &ZFS{Parent: "tank", Exec: rec}
	require.NoError(t, z.DeleteSnapshot(ctx, "r1_00000", "s1"))
	require.Equal(t, []string{"zfs list -H -t snapshot -o name tank/r1_00000@s1", "zfs destroy tank/r1_00000@s1"}, rec.Commands())
}

// Restore: a file_thin volume restored from a snapshot holds the snapshot's data at the
// wanted length (real files); LVM and ZFS through the recorder.
func TestRestore(t *testing.T) {
	ctx := context.Background()
	p, err := For(backing.ProviderFileThin, "/pool", t.TempDir(), nil)
	require.NoError(t, err)
	s, _ := SnapshotsOf(p, backing.ProviderFileThin)
	path, err := p.Create(ctx, "r1_00000", 1024)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(make([]byte, 4096), []byte("data")...), 0o600))
	require.NoError(t, os.Truncate(path, 1024*1024))
	require.NoError(t, s.Snapshot(ctx, "r1_00000", "s1"))
	require.NoError(t, s.Restore(ctx, "r2_00000", "r1_00000", "s1", 2048))
	b, err := os.ReadFile(p.Path("r2_00000"))
	require.NoError(t, err)
	require.Len(t, b, 2048*1024)
	require.Equal(t, "data", string(b[4096:4100]))
	_, err = p.Create(ctx, "r2_00000", 2048)
	require.NoError(t, err, "the restored volume fits its size")
	require.Error(t, s.Restore(ctx, "r3_00000", "r1_00000", "nope", 2048))

	rec := &execx.Recorder{Strict: true}
	rec.On("lvs").Stdout("")
	rec.On("lvcreate")
	rec.On("lvresize")
	require.NoError(t, (&LVM{VG: "vg0", ThinPool: "thin", Exec: rec}).Restore(ctx, "r2_00000", "r1_00000", "s1", 2048))
	require.Equal(t, []string{
		"lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=r2_00000 vg0",
		"lvcreate --yes --snapshot --setactivationskip n --name r2_00000 vg0/r1_00000.s1",
		"lvresize --yes --force --size 2048k vg0/r2_00000",
	}, rec.Commands())
	rec = &execx.Recorder{Strict: true}
	rec.On("zfs", "list").Stdout("")
	rec.On("zfs", "clone")
	rec.On("zfs", "set")
	require.NoError(t, (&ZFS{Parent: "tank", Exec: rec}).Restore(ctx, "r2_00000", "r1_00000", "s1", 2000))
	require.Equal(t, []string{
		"zfs list -H -p -t volume -d 1 -o name,volsize,volblocksize,refreservation tank",
		"zfs clone tank/r1_00000@s1 tank/r2_00000",
		"zfs set volsize=2048K tank/r2_00000",
	}, rec.Commands())
}

// Rollback: a file_thin volume holds its snapshot's data again (real files), twice is
// the same; LVM and ZFS through the recorder.
func TestRollback(t *testing.T) {
	ctx := context.Background()
	p, err := For(backing.ProviderFileThin, "/pool", t.TempDir(), nil)
	require.NoError(t, err)
	s, _ := SnapshotsOf(p, backing.ProviderFileThin)
	path, err := p.Create(ctx, "r1_00000", 1024)
	require.NoError(t, err)
	write := func(data string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte(data), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	write("old")
	require.NoError(t, s.Snapshot(ctx, "r1_00000", "s1"))
	write("new")
	for range 2 {
		require.NoError(t, s.Rollback(ctx, "r1_00000", "s1", 1024))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, "old", string(b[:3]))
		require.Len(t, b, 1024*1024)
	}

	rec := &execx.Recorder{Strict: true}
	rec.On("zfs", "rollback")
	require.NoError(t, (&ZFS{Parent: "tank", Exec: rec}).Rollback(ctx, "r1_00000", "s1", 1024))
	require.Equal(t, []string{"zfs rollback tank/r1_00000@s1"}, rec.Commands())
	rec = &execx.Recorder{Strict: true}
	lvsOf := func(lv string) []string {
		return []string{"lvs", "--noheadings", "--nosuffix", "--units", "b", "--separator", ",", "-o", "lv_name,lv_size,vg_extent_size,pool_lv", "--select", "lv_name=" + lv}
	}
	rec.On(lvsOf("r1_00000.s1")...).Stdout("  r1_00000.s1,1048576,4194304,thin\n")
	rec.On(lvsOf("r1_00000")...).Stdout("  r1_00000,1048576,4194304,thin\n").Times(1) // Remove's lookup: it exists
	rec.On("lvs").Stdout("")                                                          // then it is gone
	rec.On("lvremove")
	rec.On("lvcreate")
	rec.On("lvresize")
	require.NoError(t, (&LVM{VG: "vg0", ThinPool: "thin", Exec: rec}).Rollback(ctx, "r1_00000", "s1", 1024))
	require.Equal(t, []string{
		"lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=r1_00000.s1 vg0",
		"lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=r1_00000 vg0",
		"lvremove -f vg0/r1_00000",
		"lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=r1_00000 vg0",
		"lvcreate --yes --snapshot --setactivationskip n --name r1_00000 vg0/r1_00000.s1",
		"lvresize --yes --force --size 1024k vg0/r1_00000",
	}, rec.Commands())
}
