package drbdagent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd/drbdutils"
)

// LastKnownDir is where drbdmeta keeps, per minor, the size and path of the backing
// device it last wrote metadata to (drbd-minor-<minor>.lkbd). check-resize reads it to
// find the metadata at the old end of a device that grew.
var LastKnownDir = "/var/lib/drbd"

// deviceBytes is the size of a backing device or image file in bytes.
func deviceBytes(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	return uint64(n), nil
}

// moveMetadata moves the internal metadata of a detached disk (minor) that grew from
// oldBytes to its new end with the real `drbdmeta check-resize`. drbdmeta finds the old
// end through its last-known file for the minor, which create-md wrote; Cairn writes it
// again from oldBytes (measured before the grow) because another disk with the same
// minor (a simulated node on the same machine, a test) may have written it since. An
// flock on <LastKnownDir>/drbd-minor-<minor>.lkbd.lock serializes this across
// processes. A disk whose metadata is already at its end is left alone by drbdmeta.
func moveMetadata(ctx context.Context, exec execx.Executor, minor int, disk string, oldBytes uint64) error {
	if err := os.MkdirAll(LastKnownDir, 0o755); err != nil {
		return err
	}
	lkbd := filepath.Join(LastKnownDir, fmt.Sprintf("drbd-minor-%d.lkbd", minor))
	lock, err := os.OpenFile(lkbd+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if err := os.WriteFile(lkbd, fmt.Appendf(nil, "%d\t%s\n", oldBytes, disk), 0o644); err != nil {
		return err
	}
	if _, err := exec.Run(ctx, drbdutils.CheckResize(minor, disk), execx.Options{}); err != nil {
		return fmt.Errorf("move metadata of %s to its new end: %w", disk, err)
	}
	return nil
}
