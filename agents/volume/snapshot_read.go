package volume

import (
	"context"
	"fmt"
	"os"

	"github.com/cairn-io/cairn/agents/execx"
)

// SnapshotReader makes a snapshot's image readable for a backup: OpenSnapshot returns
// the path of a file or device holding the snapshot's data and a release to call when
// done. Every Snapshotter of this package has it.
type SnapshotReader interface {
	OpenSnapshot(ctx context.Context, name, snap string) (path string, release func(), err error)
}

// OpenSnapshot returns the snapshot's image file (nothing to release).
func (f *File) OpenSnapshot(_ context.Context, name, snap string) (string, func(), error) {
	if err := checkSnap(name, snap); err != nil {
		return "", nil, err
	}
	p := f.SnapshotPath(name, snap)
	if _, err := os.Stat(p); err != nil {
		return "", nil, fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return p, func() {}, nil
}

// OpenSnapshot activates the thin snapshot LV, which LVM skips at activation
// (`lvchange --yes --activate y --ignoreactivationskip VG/NAME.SNAP`), and returns its
// device; release deactivates it (`lvchange --activate n VG/NAME.SNAP`). Needs a kernel
// with device-mapper: tested against recorded argv only.
func (l *LVM) OpenSnapshot(ctx context.Context, name, snap string) (string, func(), error) {
	if err := checkSnap(name, snap); err != nil {
		return "", nil, err
	}
	lv := l.VG + "/" + name + "." + snap
	if _, err := l.Exec.Run(ctx, []string{"lvchange", "--yes", "--activate", "y", "--ignoreactivationskip", lv}, execx.Options{}); err != nil {
		return "", nil, fmt.Errorf("activate snapshot %s of %s: %w", snap, name, err)
	}
	release := func() {
		_, _ = l.Exec.Run(context.Background(), []string{"lvchange", "--activate", "n", lv}, execx.Options{})
	}
	return "/dev/" + lv, release, nil
}

// OpenSnapshot makes the zvol's snapshots visible as devices (`zfs set snapdev=visible
// PARENT/NAME`) and returns /dev/zvol/PARENT/NAME@SNAP (nothing to release: the
// property stays). Needs the zfs kernel module: tested against recorded argv only.
func (z *ZFS) OpenSnapshot(ctx context.Context, name, snap string) (string, func(), error) {
	if err := checkSnap(name, snap); err != nil {
		return "", nil, err
	}
	if _, err := z.Exec.Run(ctx, []string{"zfs", "set", "snapdev=visible", z.Parent + "/" + name}, execx.Options{}); err != nil {
		return "", nil, fmt.Errorf("snapshot %s of %s: %w", snap, name, err)
	}
	return z.Path(name) + "@" + snap, func() {}, nil
}
