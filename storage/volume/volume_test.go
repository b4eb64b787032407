package volume

import (
	"testing"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/internal/execx"
	"github.com/stretchr/testify/require"
)

func TestName(t *testing.T) {
	require.Equal(t, "pvc-1_00000", Name("pvc-1", 0))
	require.Equal(t, "r1_00012", Name("r1", 12))
	require.Equal(t, "r1_123456", Name("r1", 123456))
	require.NoError(t, checkName(Name("a-long_resource-name", 99999)))
}

func TestFor(t *testing.T) {
	rec := &execx.Recorder{}
	tests := []struct {
		provider drbd.Provider
		pool     string
		root     string
		exec     execx.Executor
		want     Provider
		err      string
	}{
		{provider: drbd.ProviderFile, pool: "/srv/cairn", want: &File{Dir: "/srv/cairn"}},
		{provider: drbd.ProviderFileThin, pool: "/srv/cairn/", root: "/tmp/sim/n1", want: &File{Dir: "/tmp/sim/n1/srv/cairn", Thin: true}},
		{provider: drbd.ProviderFile, pool: "", root: "/tmp/sim/n1", want: &File{Dir: "/tmp/sim/n1/var/lib/cairn/volumes"}},
		{provider: drbd.ProviderFileThin, pool: "pool1", want: &File{Dir: "/var/lib/cairn/pool1", Thin: true}},
		{provider: drbd.ProviderFile, pool: "", root: "/", want: &File{Dir: "/var/lib/cairn/volumes"}},
		{provider: drbd.ProviderFile, pool: "../etc", err: `local.pool "../etc": provider file needs a directory without '..'`},
		{provider: drbd.ProviderFile, pool: "/srv/../etc", err: `local.pool "/srv/../etc": provider file needs a directory without '..'`},
		{provider: drbd.ProviderLVM, pool: "vg0", exec: rec, want: &LVM{VG: "vg0", Exec: rec}},
		{provider: drbd.ProviderLVM, pool: "", exec: rec, err: `local.pool "": provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')`},
		{provider: drbd.ProviderLVM, pool: "vg0/thin", exec: rec, err: `local.pool "vg0/thin": provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')`},
		{provider: drbd.ProviderLVM, pool: "-vg", exec: rec, err: `local.pool "-vg": provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')`},
		{provider: drbd.ProviderLVMThin, pool: "vg0/thinpool", exec: rec, want: &LVM{VG: "vg0", ThinPool: "thinpool", Exec: rec}},
		{provider: drbd.ProviderLVMThin, pool: "vg0", exec: rec, err: `local.pool "vg0": provider lvm_thin needs VG/THINPOOL (e.g. vg0/thinpool)`},
		{provider: drbd.ProviderLVMThin, pool: "vg0/a/b", exec: rec, err: `local.pool "vg0/a/b": provider lvm_thin needs VG/THINPOOL (e.g. vg0/thinpool)`},
		{provider: drbd.ProviderZFS, pool: "tank", exec: rec, want: &ZFS{Parent: "tank", Exec: rec}},
		{provider: drbd.ProviderZFSThin, pool: "tank/cairn", exec: rec, want: &ZFS{Parent: "tank/cairn", Thin: true, Exec: rec}},
		{provider: drbd.ProviderZFS, pool: "tank/", exec: rec, err: `local.pool "tank/": provider zfs needs a zpool or dataset name (tank, tank/cairn)`},
		{provider: drbd.ProviderZFSThin, pool: "", exec: rec, err: `local.pool "": provider zfs_thin needs a zpool or dataset name (tank, tank/cairn)`},
		{provider: drbd.ProviderZFS, pool: "tank", err: "volume: provider zfs needs an executor to run its tools"},
		{provider: drbd.ProviderLVMThin, pool: "vg/tp", err: "volume: provider lvm_thin needs an executor to run its tools"},
		{provider: "", pool: "tank", exec: rec, err: "local.provider: empty; must be one of lvm, lvm_thin, zfs, zfs_thin, file, file_thin"},
		{provider: "ceph", pool: "tank", exec: rec, err: `local.provider "ceph": unknown; must be one of lvm, lvm_thin, zfs, zfs_thin, file, file_thin`},
	}
	for _, tt := range tests {
		t.Run(string(tt.provider)+":"+tt.pool, func(t *testing.T) {
			p, err := For(tt.provider, tt.pool, tt.root, tt.exec)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, p)
		})
	}
	// Every known provider has an implementation.
	for _, p := range drbd.Providers {
		_, err := For(p, map[bool]string{true: "vg/tp", false: "tank"}[p == drbd.ProviderLVMThin], "", rec)
		require.NoError(t, err, p)
	}
}

func TestFits(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		have, want, granule uint64
		ok                  bool
	}{
		{have: 1024, want: 1024, granule: 1, ok: true},
		{have: 2048, want: 1024, granule: 1, ok: false},
		{have: 1023, want: 1024, granule: 0, ok: false},
		{have: 4 * mib, want: 1 * mib, granule: 4 * mib, ok: true}, // LVM rounded up to one extent
		{have: 8 * mib, want: 1 * mib, granule: 4 * mib, ok: false},
		{have: 8 * mib, want: 5 * mib, granule: 4 * mib, ok: true},
		{have: 4 * mib, want: 5 * mib, granule: 4 * mib, ok: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.ok, fits(tt.have, tt.want, tt.granule), "%+v", tt)
	}
}

func TestBadNames(t *testing.T) {
	for _, name := range []string{"", "../x", "a/b", "-a", "a..b", "a b", "_x", string(make([]byte, 129))} {
		require.Error(t, checkName(name), "%q", name)
	}
}
