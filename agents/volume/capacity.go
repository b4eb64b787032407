package volume

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
	"golang.org/x/sys/unix"
)

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
func Measure(ctx context.Context, provider backing.Provider, pool, root string, exec execx.Executor) (backing.Capacity, error) {
	prov, err := For(provider, pool, root, exec)
	if err != nil {
		return backing.Capacity{}, err
	}
	switch p := prov.(type) {
	case *File:
		var st unix.Statfs_t
		if err := unix.Statfs(p.Dir, &st); err != nil {
			return backing.Capacity{}, fmt.Errorf("storage pool directory %s: %w", p.Dir, err)
		}
		bs := uint64(st.Bsize)
		return backing.Capacity{TotalKiB: st.Blocks * bs / 1024, FreeKiB: st.Bavail * bs / 1024}, nil
	case *LVM:
		if p.ThinPool == "" {
			f, err := oneRow(ctx, exec, []string{"vgs", "--noheadings", "--nosuffix", "--units", "b", "-o", "vg_size,vg_free", p.VG}, 2)
			if err != nil {
				return backing.Capacity{}, err
			}
			size, err1 := strconv.ParseUint(f[0], 10, 64)
			free, err2 := strconv.ParseUint(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				return backing.Capacity{}, fmt.Errorf("unexpected vgs output %q", strings.Join(f, " "))
			}
			return backing.Capacity{TotalKiB: size / 1024, FreeKiB: free / 1024}, nil
		}
		f, err := oneRow(ctx, exec, []string{"lvs", "--noheadings", "--nosuffix", "--units", "b", "-o", "lv_size,data_percent", p.VG + "/" + p.ThinPool}, 2)
		if err != nil {
			return backing.Capacity{}, err
		}
		size, err1 := strconv.ParseUint(f[0], 10, 64)
		used, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || used < 0 || used > 100 || math.IsNaN(used) {
			return backing.Capacity{}, fmt.Errorf("unexpected lvs output %q", strings.Join(f, " "))
		}
		return backing.Capacity{TotalKiB: size / 1024, FreeKiB: uint64(float64(size)*(100-used)/100) / 1024}, nil
	case *ZFS:
		f, err := oneRow(ctx, exec, []string{"zfs", "list", "-H", "-p", "-o", "used,available", p.Parent}, 2)
		if err != nil {
			return backing.Capacity{}, err
		}
		used, err1 := strconv.ParseUint(f[0], 10, 64)
		avail, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return backing.Capacity{}, fmt.Errorf("unexpected zfs list output %q", strings.Join(f, " "))
		}
		return backing.Capacity{TotalKiB: (used + avail) / 1024, FreeKiB: avail / 1024}, nil
	}
	return backing.Capacity{}, fmt.Errorf("local.provider %q: no capacity measure", provider)
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
