package volume

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
)

// LVM keeps volumes as logical volumes of the volume group VG: thick LVs (provider
// lvm), or thin LVs in the thin pool ThinPool of VG (lvm_thin, ThinPool set). It runs
// lvs, lvcreate and lvremove through Exec.
//
// Commands (sizes in KiB, LVM's "k" unit is 1024 bytes):
//
//	lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=NAME VG
//	lvcreate --yes --wipesignatures y --size SIZEk --name NAME VG                   (lvm)
//	lvcreate --yes --virtualsize SIZEk --thin --name NAME VG/THINPOOL               (lvm_thin)
//	lvremove -f VG/NAME
//	lvextend --yes --size SIZEk VG/NAME                                             (Grow)
type LVM struct {
	VG       string
	ThinPool string // "" for thick LVs
	Exec     execx.Executor
}

var _ Provider = (*LVM)(nil)

// Path is /dev/<VG>/<name>.
func (l *LVM) Path(name string) string { return "/dev/" + l.VG + "/" + name }

// lv is one row of lvs.
type lv struct {
	sizeBytes, extentBytes uint64
	pool                   string
}

// lookup finds LV name in VG; ok is false if there is none. An error means lvs
// failed (no such VG) or printed what it should not.
func (l *LVM) lookup(ctx context.Context, name string) (lv, bool, error) {
	out, err := l.Exec.Run(ctx, []string{"lvs", "--noheadings", "--nosuffix", "--units", "b", "--separator", ",",
		"-o", "lv_name,lv_size,vg_extent_size,pool_lv", "--select", "lv_name=" + name, l.VG}, execx.Options{})
	if err != nil {
		return lv{}, false, fmt.Errorf("volume %s: %w", name, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) != 4 || f[0] != name {
			continue
		}
		size, err1 := strconv.ParseUint(f[1], 10, 64)
		ext, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return lv{}, false, fmt.Errorf("volume %s: unexpected lvs output %q", name, line)
		}
		return lv{sizeBytes: size, extentBytes: ext, pool: f[3]}, true, nil
	}
	return lv{}, false, nil
}

// Create makes the LV unless it exists. An existing LV is reused if its size is
// sizeKiB rounded up to at most one extent and it is of the wanted kind (thin in
// ThinPool, or thick); otherwise the error wraps ErrMismatch.
func (l *LVM) Create(ctx context.Context, name string, sizeKiB uint64) (string, error) {
	if err := checkCreate(name, sizeKiB); err != nil {
		return "", err
	}
	have, ok, err := l.lookup(ctx, name)
	if err != nil {
		return "", err
	}
	if ok {
		if err := l.check(name, have, sizeKiB); err != nil {
			return "", err
		}
		return l.Path(name), nil
	}
	size := strconv.FormatUint(sizeKiB, 10) + "k"
	argv := []string{"lvcreate", "--yes", "--wipesignatures", "y", "--size", size, "--name", name, l.VG}
	if l.ThinPool != "" {
		argv = []string{"lvcreate", "--yes", "--virtualsize", size, "--thin", "--name", name, l.VG + "/" + l.ThinPool}
	}
	if _, err := l.Exec.Run(ctx, argv, execx.Options{}); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	return l.Path(name), nil
}

func (l *LVM) check(name string, have lv, sizeKiB uint64) error {
	switch {
	case l.ThinPool != "" && have.pool != l.ThinPool:
		kind := "a thick LV"
		if have.pool != "" {
			kind = "a thin LV of pool " + have.pool
		}
		return fmt.Errorf("volume %s: exists in %s as %s, want a thin LV of pool %s: %w", name, l.VG, kind, l.ThinPool, ErrMismatch)
	case l.ThinPool == "" && have.pool != "":
		return fmt.Errorf("volume %s: exists in %s as a thin LV of pool %s, want a thick LV: %w", name, l.VG, have.pool, ErrMismatch)
	case !fits(have.sizeBytes, sizeKiB*1024, have.extentBytes):
		return mismatch(name, have.sizeBytes, sizeKiB, "")
	}
	return nil
}

// Remove runs lvremove -f if the LV exists.
func (l *LVM) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, ok, err := l.lookup(ctx, name)
	if err != nil || !ok {
		return err
	}
	if _, err := l.Exec.Run(ctx, []string{"lvremove", "-f", l.VG + "/" + name}, execx.Options{}); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// Exists asks lvs whether VG has the LV (thin or thick).
func (l *LVM) Exists(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	_, ok, err := l.lookup(ctx, name)
	return ok, err
}

// Grow runs lvextend when the LV is smaller than sizeKiB (LVM rounds up to an extent;
// lvextend refuses a size that is not larger, so an LV that is already large enough is
// left alone).
func (l *LVM) Grow(ctx context.Context, name string, sizeKiB uint64) error {
	if err := checkCreate(name, sizeKiB); err != nil {
		return err
	}
	have, ok, err := l.lookup(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("volume %s: no such LV in %s: %w", name, l.VG, ErrNotFound)
	}
	if have.sizeBytes >= sizeKiB*1024 {
		return nil
	}
	argv := []string{"lvextend", "--yes", "--size", strconv.FormatUint(sizeKiB, 10) + "k", l.VG + "/" + name}
	if _, err := l.Exec.Run(ctx, argv, execx.Options{}); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}
