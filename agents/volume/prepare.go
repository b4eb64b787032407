package volume

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
)

// Prepare makes a storage pool's back end on devices (LINSTOR's physical-storage
// create-device-pool): a volume group (lvm), a volume group and a thin pool filling it
// (lvm_thin, pool VG/THINPOOL), or a zpool and its dataset (zfs, zfs_thin, pool
// POOL[/DATASET]). It is idempotent: a back end that exists is left as it is (made
// before, or by the operator), so it runs at every report. Before anything is made,
// every device is probed (blkid -p): a device carrying any signature (a filesystem, a
// partition table, LVM or ZFS of something else) refuses the whole pool, naming it and
// what it carries, and nothing is made: Cairn never writes over data. file and
// file_thin pools take no devices.
//
//	lvm       vgs VG || vgcreate VG DEVICES
//	lvm_thin  vgs VG || vgcreate VG DEVICES; lvs VG/THINPOOL || lvcreate -l 100%FREE --thinpool THINPOOL VG
//	zfs       zpool list POOL || zpool create POOL DEVICES; zfs list POOL/DATASET || zfs create -p POOL/DATASET
//
// made says whether anything was created.
func Prepare(ctx context.Context, provider backing.Provider, pool string, devices []string, exec execx.Executor) (made bool, err error) {
	prov, err := For(provider, pool, "/", exec)
	if err != nil {
		return false, err
	}
	switch p := prov.(type) {
	case *LVM:
		if !exists(ctx, exec, "vgs", "--noheadings", "-o", "vg_name", p.VG) {
			if err := refuseSignatures(ctx, exec, devices); err != nil {
				return false, err
			}
			if _, err := exec.Run(ctx, append([]string{"vgcreate", "--yes", p.VG}, devices...), execx.Options{}); err != nil {
				return false, fmt.Errorf("make volume group %s on %s: %w", p.VG, strings.Join(devices, " "), err)
			}
			made = true
		}
		if p.ThinPool != "" && !exists(ctx, exec, "lvs", "--noheadings", "-o", "lv_name", p.VG+"/"+p.ThinPool) {
			if _, err := exec.Run(ctx, []string{"lvcreate", "--yes", "--extents", "100%FREE", "--thinpool", p.ThinPool, p.VG}, execx.Options{}); err != nil {
				return made, fmt.Errorf("make thin pool %s/%s: %w", p.VG, p.ThinPool, err)
			}
			made = true
		}
		return made, nil
	case *ZFS:
		zpool, dataset, _ := strings.Cut(p.Parent, "/")
		if !exists(ctx, exec, "zpool", "list", "-H", "-o", "name", zpool) {
			if err := refuseSignatures(ctx, exec, devices); err != nil {
				return false, err
			}
			if _, err := exec.Run(ctx, append([]string{"zpool", "create", zpool}, devices...), execx.Options{}); err != nil {
				return false, fmt.Errorf("make zpool %s on %s: %w", zpool, strings.Join(devices, " "), err)
			}
			made = true
		}
		if dataset != "" && !exists(ctx, exec, "zfs", "list", "-H", "-o", "name", p.Parent) {
			if _, err := exec.Run(ctx, []string{"zfs", "create", "-p", p.Parent}, execx.Options{}); err != nil {
				return made, fmt.Errorf("make dataset %s: %w", p.Parent, err)
			}
			made = true
		}
		return made, nil
	}
	return false, fmt.Errorf("storage pool of provider %s takes no devices (a directory)", provider)
}

// exists runs a lookup and reports whether it succeeded (the object is there).
func exists(ctx context.Context, exec execx.Executor, argv ...string) bool {
	_, err := exec.Run(ctx, argv, execx.Options{})
	return err == nil
}

// refuseSignatures probes every device (blkid -p: exit 2 means nothing found) and
// refuses the first that carries a signature, or that cannot be probed.
func refuseSignatures(ctx context.Context, exec execx.Executor, devices []string) error {
	if len(devices) == 0 {
		return fmt.Errorf("no devices to make the pool on")
	}
	for _, d := range devices {
		out, err := exec.Run(ctx, []string{"blkid", "-p", "-o", "export", d}, execx.Options{})
		switch {
		case execx.ExitCode(err) == 2:
			continue
		case err != nil:
			return fmt.Errorf("probe %s for signatures: %w", d, err)
		}
		var what []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && (k == "TYPE" || k == "PTTYPE" || k == "LABEL") {
				what = append(what, k+"="+v)
			}
		}
		return fmt.Errorf("device %s carries a signature (%s): Cairn never makes a pool over data; wipe it (wipefs -a) if it holds nothing", d, strings.Join(what, " "))
	}
	return nil
}
