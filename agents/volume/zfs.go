package volume

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
)

// ZFSGranuleKiB is what zvol sizes are rounded up to: zfs refuses a volsize that is
// not a multiple of the volblocksize, and every volblocksize up to 128K divides it.
const ZFSGranuleKiB = 128

// ZFS keeps volumes as zvols <Parent>/<name>: with a refreservation of their full size
// (provider zfs) or sparse (zfs_thin, Thin set: zfs create -s). It runs zfs through Exec.
//
// Commands (sizes in KiB, zfs's "K" is 1024 bytes):
//
//	zfs list -H -p -t volume -d 1 -o name,volsize,volblocksize,refreservation PARENT
//	zfs create -V SIZEK [-s] PARENT/NAME
//	zfs destroy PARENT/NAME
//	zfs set volsize=SIZEK PARENT/NAME                                     (Grow)
type ZFS struct {
	Parent string
	Thin   bool
	Exec   execx.Executor
}

var _ Provider = (*ZFS)(nil)

// Path is /dev/zvol/<Parent>/<name>.
func (z *ZFS) Path(name string) string { return "/dev/zvol/" + z.Parent + "/" + name }

type zvol struct {
	sizeBytes, blockBytes uint64
	reserved              bool
}

// lookup lists the zvols directly under Parent and finds name; an error means zfs
// failed (no such pool or dataset) or printed what it should not.
func (z *ZFS) lookup(ctx context.Context, name string) (zvol, bool, error) {
	out, err := z.Exec.Run(ctx, []string{"zfs", "list", "-H", "-p", "-t", "volume", "-d", "1",
		"-o", "name,volsize,volblocksize,refreservation", z.Parent}, execx.Options{})
	if err != nil {
		return zvol{}, false, fmt.Errorf("volume %s: %w", name, err)
	}
	full := z.Parent + "/" + name
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) != 4 || f[0] != full {
			continue
		}
		size, err1 := parseBytes(f[1])
		block, err2 := parseBytes(f[2])
		resv, err3 := parseBytes(f[3])
		if err1 != nil || err2 != nil || err3 != nil {
			return zvol{}, false, fmt.Errorf("volume %s: unexpected zfs list output %q", name, line)
		}
		return zvol{sizeBytes: size, blockBytes: block, reserved: resv > 0}, true, nil
	}
	return zvol{}, false, nil
}

// Create makes the zvol unless it exists, with sizeKiB rounded up to ZFSGranuleKiB.
// An existing zvol is reused if its size fits (sizeKiB rounded up to the granule or
// its volblocksize) and it is thin or thick as wanted; otherwise the error wraps
// ErrMismatch.
func (z *ZFS) Create(ctx context.Context, name string, sizeKiB uint64) (string, error) {
	if err := checkCreate(name, sizeKiB); err != nil {
		return "", err
	}
	have, ok, err := z.lookup(ctx, name)
	if err != nil {
		return "", err
	}
	if ok {
		switch {
		case z.Thin && have.reserved:
			return "", fmt.Errorf("volume %s: exists as a thick zvol (refreservation set), want a sparse one: %w", name, ErrMismatch)
		case !z.Thin && !have.reserved:
			return "", fmt.Errorf("volume %s: exists as a sparse zvol (no refreservation), want a thick one: %w", name, ErrMismatch)
		case !fits(have.sizeBytes, sizeKiB*1024, max(ZFSGranuleKiB*1024, have.blockBytes)):
			return "", mismatch(name, have.sizeBytes, sizeKiB, "")
		}
		return z.Path(name), nil
	}
	rounded := (sizeKiB + ZFSGranuleKiB - 1) / ZFSGranuleKiB * ZFSGranuleKiB
	argv := []string{"zfs", "create", "-V", strconv.FormatUint(rounded, 10) + "K"}
	if z.Thin {
		argv = append(argv, "-s")
	}
	argv = append(argv, z.Parent+"/"+name)
	if _, err := z.Exec.Run(ctx, argv, execx.Options{}); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	return z.Path(name), nil
}

// Remove runs zfs destroy if the zvol exists. A zvol with snapshots or in use is
// refused by zfs, and that error is returned.
func (z *ZFS) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, ok, err := z.lookup(ctx, name)
	if err != nil || !ok {
		return err
	}
	if _, err := z.Exec.Run(ctx, []string{"zfs", "destroy", z.Parent + "/" + name}, execx.Options{}); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// Exists asks zfs whether Parent has the zvol.
func (z *ZFS) Exists(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	_, ok, err := z.lookup(ctx, name)
	return ok, err
}

// parseBytes reads a `zfs list -p` number; "none" and "-" (unset) are 0.
func parseBytes(s string) (uint64, error) {
	if s == "none" || s == "-" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// Grow sets the zvol's volsize to sizeKiB rounded up to ZFSGranuleKiB when it is
// smaller (a thick zvol's refreservation follows volsize, as zfs does when it was
// created with the default reservation).
func (z *ZFS) Grow(ctx context.Context, name string, sizeKiB uint64) error {
	if err := checkCreate(name, sizeKiB); err != nil {
		return err
	}
	have, ok, err := z.lookup(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("volume %s: no such zvol under %s: %w", name, z.Parent, ErrNotFound)
	}
	if have.sizeBytes >= sizeKiB*1024 {
		return nil
	}
	rounded := (sizeKiB + ZFSGranuleKiB - 1) / ZFSGranuleKiB * ZFSGranuleKiB
	if _, err := z.Exec.Run(ctx, []string{"zfs", "set", "volsize=" + strconv.FormatUint(rounded, 10) + "K", z.Parent + "/" + name}, execx.Options{}); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}
