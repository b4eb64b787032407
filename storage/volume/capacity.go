package volume

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/internal/execx"
	"golang.org/x/sys/unix"
)

// Capacity is what a storage pool's back end says it has, in KiB: its size and what is
// still free. For thin pools (lvm_thin, zfs_thin, file_thin) it is physical space:
// volumes on them may promise more (over-provisioning).
type Capacity struct {
	TotalKiB uint64 `json:"total_kib"`
	FreeKiB  uint64 `json:"free_kib"`
}

// Measure asks the back end of a storage pool (provider and pool as in For; root as
// in For) for its capacity:
//
//	file, file_thin  statfs(2) of the pool directory (blocks and blocks available to
//	                 unprivileged users, times the block size)
//	lvm              vgs --noheadings --nosuffix --units b -o vg_size,vg_free VG
//	lvm_thin         lvs --noheadings --nosuffix --units b -o lv_size,data_percent VG/THINPOOL
//	zfs, zfs_thin    zfs list -H -p -o used,available POOL (total = used + available)
//
// Returns an error naming local.pool for a pool For refuses, the tool's error when it
// fails (no such VG, pool or directory) and an error quoting the output it cannot read.
func Measure(ctx context.Context, provider drbd.Provider, pool, root string, exec execx.Executor) (Capacity, error) {
	prov, err := For(provider, pool, root, exec)
	if err != nil {
		return Capacity{}, err
	}
	switch p := prov.(type) {
	case *File:
		var st unix.Statfs_t
		if err := unix.Statfs(p.Dir, &st); err != nil {
			return Capacity{}, fmt.Errorf("storage pool directory %s: %w", p.Dir, err)
		}
		bs := uint64(st.Bsize)
		return Capacity{TotalKiB: st.Blocks * bs / 1024, FreeKiB: st.Bavail * bs / 1024}, nil
	case *LVM:
		if p.ThinPool == "" {
			f, err := oneRow(ctx, exec, []string{"vgs", "--noheadings", "--nosuffix", "--units", "b", "-o", "vg_size,vg_free", p.VG}, 2)
			if err != nil {
				return Capacity{}, err
			}
			size, err1 := strconv.ParseUint(f[0], 10, 64)
			free, err2 := strconv.ParseUint(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				return Capacity{}, fmt.Errorf("unexpected vgs output %q", strings.Join(f, " "))
			}
			return Capacity{TotalKiB: size / 1024, FreeKiB: free / 1024}, nil
		}
		f, err := oneRow(ctx, exec, []string{"lvs", "--noheadings", "--nosuffix", "--units", "b", "-o", "lv_size,data_percent", p.VG + "/" + p.ThinPool}, 2)
		if err != nil {
			return Capacity{}, err
		}
		size, err1 := strconv.ParseUint(f[0], 10, 64)
		used, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || used < 0 || used > 100 || math.IsNaN(used) {
			return Capacity{}, fmt.Errorf("unexpected lvs output %q", strings.Join(f, " "))
		}
		return Capacity{TotalKiB: size / 1024, FreeKiB: uint64(float64(size)*(100-used)/100) / 1024}, nil
	case *ZFS:
		f, err := oneRow(ctx, exec, []string{"zfs", "list", "-H", "-p", "-o", "used,available", p.Parent}, 2)
		if err != nil {
			return Capacity{}, err
		}
		used, err1 := strconv.ParseUint(f[0], 10, 64)
		avail, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return Capacity{}, fmt.Errorf("unexpected zfs list output %q", strings.Join(f, " "))
		}
		return Capacity{TotalKiB: (used + avail) / 1024, FreeKiB: avail / 1024}, nil
	}
	return Capacity{}, fmt.Errorf("local.provider %q: no capacity measure", provider)
}

// oneRow runs argv and returns the n whitespace-separated fields of its first
// non-empty output line.
func oneRow(ctx context.Context, exec execx.Executor, argv []string, n int) ([]string, error) {
	out, err := exec.Run(ctx, argv, execx.Options{})
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if len(f) != n {
				return nil, fmt.Errorf("unexpected %s output %q", argv[0], strings.TrimSpace(line))
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("%s printed nothing", argv[0])
}

// PoolSpec is the desired state of one storage pool on its node (the message the
// dispatcher keeps on <prefix>.node.<node>.sp.<name>; empty when the pool is gone): what
// the agent measures and reports.
type PoolSpec struct {
	Node     string        `json:"node"`
	Name     string        `json:"name"`
	Provider drbd.Provider `json:"provider"`
	Pool     string        `json:"pool"`
	Revision uint64        `json:"revision"`
}

// PoolReport is an agent's report of one storage pool on <prefix>.status.<node>.sp.<name>:
// the capacity measured at At, or Error when it could not be measured.
type PoolReport struct {
	Node  string    `json:"node"`
	Name  string    `json:"name"`
	At    time.Time `json:"at"`
	Error string    `json:"error,omitempty"`
	Capacity
}
