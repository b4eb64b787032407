package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/rs/zerolog"
)

// Snapshotter takes and removes point-in-time snapshots of backing volumes. Thin back
// ends have it (lvm_thin, zfs, zfs_thin, file_thin); thick LVM and preallocated files
// do not, as in LINSTOR (SnapshotsOf answers ErrNoSnapshots).
//
// Both methods are idempotent: Snapshot of a snapshot that exists leaves it (a retry
// after a crash), DeleteSnapshot of one that does not exist succeeds.
type Snapshotter interface {
	// Snapshot takes snapshot snap of volume name. The caller keeps writes away
	// (DRBD's suspend-io) so the copy is consistent with the other replicas'.
	Snapshot(ctx context.Context, name, snap string) error
	// DeleteSnapshot removes snapshot snap of volume name.
	DeleteSnapshot(ctx context.Context, name, snap string) error
	// Restore makes volume name of sizeKiB KiB (as Create sizes it) holding snapshot
	// snap of volume from: its data up to the smaller size, the rest (where internal
	// metadata goes) whatever follows. A volume name that exists is left as it is (a
	// retry; the caller's Create checks it). Returns an error when the snapshot is
	// missing or the tool fails.
	Restore(ctx context.Context, name, from, snap string, sizeKiB uint64) error
	// Rollback makes volume name of sizeKiB KiB hold its own snapshot snap again (all
	// that was written since is lost). Idempotent: repeating it gives the same volume.
	Rollback(ctx context.Context, name, snap string, sizeKiB uint64) error
}

// ErrNoSnapshots is returned by SnapshotsOf for a provider without snapshots.
var ErrNoSnapshots = errors.New("provider has no snapshots")

// SnapshotsOf returns p's Snapshotter, or an error wrapping ErrNoSnapshots naming the
// provider.
func SnapshotsOf(p Provider, provider backing.Provider) (Snapshotter, error) {
	s, ok := p.(Snapshotter)
	if !ok || !backing.CanSnapshot(provider) {
		return nil, fmt.Errorf("provider %s: %w (thick volumes are not snapshotted; use lvm_thin, zfs, zfs_thin or file_thin)", provider, ErrNoSnapshots)
	}
	return s, nil
}

var snapRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$`)

func checkSnap(name, snap string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if !snapRE.MatchString(snap) {
		return fmt.Errorf("snapshot name %q: must be 1-48 letters, digits, '_' or '-', starting with a letter or digit", snap)
	}
	return nil
}

// SnapshotPath is the image file of snapshot snap of a file volume: <Dir>/<name>.<snap>.snap.
func (f *File) SnapshotPath(name, snap string) string {
	return filepath.Join(f.Dir, name+"."+snap+".snap")
}

// Snapshot copies the image file with `cp --reflink=auto --sparse=always` (a reflink
// where the file system shares blocks, a sparse copy otherwise) to a temporary name and
// renames it in place, so a snapshot file is always complete. Only file_thin.
func (f *File) Snapshot(ctx context.Context, name, snap string) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	if !f.Thin {
		return fmt.Errorf("volume %s: provider file: %w", name, ErrNoSnapshots)
	}
	dst := f.SnapshotPath(name, snap)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := copyFile(ctx, f.Path(name), dst, 0); err != nil {
		return fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return nil
}

// copyFile copies src to dst with `cp --reflink=auto --sparse=always` (a reflink where
// the file system shares blocks, a sparse copy otherwise) under a temporary name, sets
// its length to sizeBytes (unless 0) and renames it to dst, so dst is always complete.
func copyFile(ctx context.Context, src, dst string, sizeBytes int64) error {
	tmp := dst + ".tmp"
	if _, err := (&execx.Runner{Log: zerolog.Nop()}).Run(ctx, []string{"cp", "--reflink=auto", "--sparse=always", src, tmp}, execx.Options{}); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if sizeBytes > 0 {
		if err := os.Truncate(tmp, sizeBytes); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	return os.Rename(tmp, dst)
}

// Restore copies the snapshot's image file (`cp --reflink=auto --sparse=always`) to a
// temporary name, sets its length to sizeKiB and renames it to the volume's image.
func (f *File) Restore(ctx context.Context, name, from, snap string, sizeKiB uint64) error {
	if err := checkSnap(from, snap); err != nil {
		return err
	}
	if err := checkCreate(name, sizeKiB); err != nil {
		return err
	}
	if _, err := os.Stat(f.Path(name)); err == nil {
		return nil
	}
	src := f.SnapshotPath(from, snap)
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("restore %s from snapshot %s of %s: %w", name, snap, from, err)
	}
	if err := copyFile(ctx, src, f.Path(name), int64(sizeKiB)*1024); err != nil {
		return fmt.Errorf("restore %s from snapshot %s of %s: %w", name, snap, from, err)
	}
	return nil
}

// Rollback replaces the image file with a copy of its snapshot (renamed over the
// image: a crash leaves either the old or the rolled-back image).
func (f *File) Rollback(ctx context.Context, name, snap string, sizeKiB uint64) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	if err := copyFile(ctx, f.SnapshotPath(name, snap), f.Path(name), int64(sizeKiB)*1024); err != nil {
		return fmt.Errorf("rollback %s to snapshot %s: %w", name, snap, err)
	}
	return nil
}

// DeleteSnapshot removes the snapshot's image file.
func (f *File) DeleteSnapshot(ctx context.Context, name, snap string) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	if err := os.Remove(f.SnapshotPath(name, snap)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return nil
}

// Snapshot runs `lvcreate --yes --snapshot --setactivationskip y --name NAME.SNAP VG/NAME`
// (a thin snapshot in the same thin pool, skipped at activation as LVM does by default)
// unless it exists. Only lvm_thin.
func (l *LVM) Snapshot(ctx context.Context, name, snap string) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	if l.ThinPool == "" {
		return fmt.Errorf("volume %s: provider lvm: %w", name, ErrNoSnapshots)
	}
	lv := name + "." + snap
	if _, ok, err := l.lookup(ctx, lv); err != nil || ok {
		return err
	}
	if _, err := l.Exec.Run(ctx, []string{"lvcreate", "--yes", "--snapshot", "--setactivationskip", "y", "--name", lv, l.VG + "/" + name}, execx.Options{}); err != nil {
		return fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return nil
}

// Restore runs `lvcreate --yes --snapshot --setactivationskip n --name NAME VG/FROM.SNAP`
// (a writable thin snapshot of the snapshot) and `lvresize --yes --force --size SIZEk
// VG/NAME` to the wanted size, unless NAME exists.
func (l *LVM) Restore(ctx context.Context, name, from, snap string, sizeKiB uint64) error {
	if err := checkSnap(from, snap); err != nil {
		return err
	}
	if err := checkCreate(name, sizeKiB); err != nil {
		return err
	}
	if _, ok, err := l.lookup(ctx, name); err != nil || ok {
		return err
	}
	for _, argv := range [][]string{
		{"lvcreate", "--yes", "--snapshot", "--setactivationskip", "n", "--name", name, l.VG + "/" + from + "." + snap},
		{"lvresize", "--yes", "--force", "--size", strconv.FormatUint(sizeKiB, 10) + "k", l.VG + "/" + name},
	} {
		if _, err := l.Exec.Run(ctx, argv, execx.Options{}); err != nil {
			return fmt.Errorf("restore %s from snapshot %s of %s: %w", name, snap, from, err)
		}
	}
	return nil
}

// Rollback removes the LV and makes it again as a writable thin snapshot of its
// snapshot (lvremove, then Restore); thin snapshots do not depend on their origin.
func (l *LVM) Rollback(ctx context.Context, name, snap string, sizeKiB uint64) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	if _, ok, err := l.lookup(ctx, name+"."+snap); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("rollback %s: no snapshot %s", name, snap)
		}
		return err
	}
	if err := l.Remove(ctx, name); err != nil {
		return err
	}
	return l.Restore(ctx, name, name, snap, sizeKiB)
}

// DeleteSnapshot runs lvremove -f VG/NAME.SNAP if it exists.
func (l *LVM) DeleteSnapshot(ctx context.Context, name, snap string) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	return l.Remove(ctx, name+"."+snap)
}

// Snapshot runs `zfs snapshot PARENT/NAME@SNAP` unless it exists (zfs list -t snapshot).
func (z *ZFS) Snapshot(ctx context.Context, name, snap string) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	full := z.Parent + "/" + name + "@" + snap
	if _, err := z.Exec.Run(ctx, []string{"zfs", "list", "-H", "-t", "snapshot", "-o", "name", full}, execx.Options{}); err == nil {
		return nil
	}
	if _, err := z.Exec.Run(ctx, []string{"zfs", "snapshot", full}, execx.Options{}); err != nil {
		return fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return nil
}

// Restore runs `zfs clone PARENT/FROM@SNAP PARENT/NAME` and sets its volsize (rounded
// to ZFSGranuleKiB), unless NAME exists. The clone depends on the snapshot: ZFS refuses
// to destroy the snapshot while the clone lives.
func (z *ZFS) Restore(ctx context.Context, name, from, snap string, sizeKiB uint64) error {
	if err := checkSnap(from, snap); err != nil {
		return err
	}
	if err := checkCreate(name, sizeKiB); err != nil {
		return err
	}
	if _, ok, err := z.lookup(ctx, name); err != nil || ok {
		return err
	}
	rounded := (sizeKiB + ZFSGranuleKiB - 1) / ZFSGranuleKiB * ZFSGranuleKiB
	for _, argv := range [][]string{
		{"zfs", "clone", z.Parent + "/" + from + "@" + snap, z.Parent + "/" + name},
		{"zfs", "set", "volsize=" + strconv.FormatUint(rounded, 10) + "K", z.Parent + "/" + name},
	} {
		if _, err := z.Exec.Run(ctx, argv, execx.Options{}); err != nil {
			return fmt.Errorf("restore %s from snapshot %s of %s: %w", name, snap, from, err)
		}
	}
	return nil
}

// Rollback runs `zfs rollback PARENT/NAME@SNAP` (only the latest snapshot: Cairn
// rolls back to no other).
func (z *ZFS) Rollback(ctx context.Context, name, snap string, sizeKiB uint64) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	if _, err := z.Exec.Run(ctx, []string{"zfs", "rollback", z.Parent + "/" + name + "@" + snap}, execx.Options{}); err != nil {
		return fmt.Errorf("rollback %s to snapshot %s: %w", name, snap, err)
	}
	return nil
}

// DeleteSnapshot runs `zfs destroy PARENT/NAME@SNAP` if it exists.
func (z *ZFS) DeleteSnapshot(ctx context.Context, name, snap string) error {
	if err := checkSnap(name, snap); err != nil {
		return err
	}
	full := z.Parent + "/" + name + "@" + snap
	if _, err := z.Exec.Run(ctx, []string{"zfs", "list", "-H", "-t", "snapshot", "-o", "name", full}, execx.Options{}); err != nil {
		return nil // gone (or the pool is): nothing to delete
	}
	if _, err := z.Exec.Run(ctx, []string{"zfs", "destroy", full}, execx.Options{}); err != nil {
		return fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return nil
}
