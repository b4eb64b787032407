package volume

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
)

// Loop puts the image files of the file providers behind loop devices: DRBD attaches
// block devices only (drbdmeta works on the file itself). It runs losetup through
// Exec; loop devices need root and the loop module, so its tests use execx.Recorder.
//
// Commands:
//
//	losetup --find --show --nooverlap FILE   (attach; reuses a device already backed by FILE)
//	losetup --associated FILE                (which devices FILE backs)
//	losetup --detach DEV
type Loop struct {
	Exec execx.Executor
}

// Attach returns a loop device backed by file, setting one up unless one exists
// (losetup --nooverlap makes that check and the setup one step). Returns losetup's
// error if it fails (no free loop device, no permission).
func (l Loop) Attach(ctx context.Context, file string) (string, error) {
	out, err := l.Exec.Run(ctx, []string{"losetup", "--find", "--show", "--nooverlap", file}, execx.Options{})
	if err != nil {
		return "", fmt.Errorf("loop device for %s: %w", file, err)
	}
	dev := strings.TrimSpace(string(out))
	if !strings.HasPrefix(dev, "/dev/") {
		return "", fmt.Errorf("loop device for %s: unexpected losetup output %q", file, out)
	}
	return dev, nil
}

// Devices returns the loop devices backed by file (none: empty).
func (l Loop) Devices(ctx context.Context, file string) ([]string, error) {
	out, err := l.Exec.Run(ctx, []string{"losetup", "--associated", file}, execx.Options{})
	if err != nil {
		return nil, fmt.Errorf("loop devices of %s: %w", file, err)
	}
	var devs []string
	for _, line := range strings.Split(string(out), "\n") {
		// /dev/loop3: [2049]:1835 (/var/lib/cairn/volumes/r1_00000.img)
		if dev, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.HasPrefix(dev, "/dev/") {
			devs = append(devs, dev)
		}
	}
	return devs, nil
}

// Detach detaches every loop device backed by file; none is not an error. Call it
// before Remove of the file. Returns losetup's error if a device cannot be detached.
func (l Loop) Detach(ctx context.Context, file string) error {
	devs, err := l.Devices(ctx, file)
	if err != nil {
		return err
	}
	for _, dev := range devs {
		if _, err := l.Exec.Run(ctx, []string{"losetup", "--detach", dev}, execx.Options{}); err != nil {
			return fmt.Errorf("detach %s (%s): %w", dev, file, err)
		}
	}
	return nil
}
