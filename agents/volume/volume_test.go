package volume

import (
	"testing"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/stretchr/testify/require"
)

// Every name backing.VolumeName makes is one every provider accepts.
func TestVolumeNamesAreValid(t *testing.T) {
	require.NoError(t, checkName(backing.VolumeName("a-long_resource-name", 99999)))
}

func TestFor(t *testing.T) {
	rec := &execx.Recorder{}
	tests := []struct {
		provider backing.Provider
		pool     string
		root     string
		exec     execx.Executor
		want     Provider
		err      string
	}{
		{provider: backing.ProviderFile, pool: "/srv/cairn", want: &File{Dir: "/srv/cairn"}},
		{provider: backing.ProviderFileThin, pool: "/srv/cairn/", root: "/tmp/sim/n1", want: &File{Dir: "/tmp/sim/n1/srv/cairn", Thin: true}},
		{provider: backing.ProviderFile, pool: "", root: "/tmp/sim/n1", want: &File{Dir: "/tmp/sim/n1/var/lib/cairn/volumes"}},
		{provider: backing.ProviderFileThin, pool: "pool1", want: &File{Dir: "/var/lib/cairn/pool1", Thin: true}},
		{provider: backing.ProviderFile, pool: "", root: "/", want: &File{Dir: "/var/lib/cairn/volumes"}},
		{provider: backing.ProviderFile, pool: "../etc", err: `local.pool "../etc": provider file needs a directory without '..'`},
		{provider: backing.ProviderFile, pool: "/srv/../etc", err: `local.pool "/srv/../etc": provider file needs a directory without '..'`},
		{provider: backing.ProviderLVM, pool: "vg0", exec: rec, want: &LVM{VG: "vg0", Exec: rec}},
		{provider: backing.ProviderLVM, pool: "", exec: rec, err: `local.pool "": provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')`},
		{provider: backing.ProviderLVM, pool: "vg0/thin", exec: rec, err: `local.pool "vg0/thin": provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')`},
		{provider: backing.ProviderLVM, pool: "-vg", exec: rec, err: `local.pool "-vg": provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')`},
		{provider: backing.ProviderLVMThin, pool: "vg0/thinpool", exec: rec, want: &LVM{VG: "vg0", ThinPool: "thinpool", Exec: rec}},
		{provider: backing.ProviderLVMThin, pool: "vg0", exec: rec, err: `local.pool "vg0": provider lvm_thin needs VG/THINPOOL (e.g. vg0/thinpool)`},
		{provider: backing.ProviderLVMThin, pool: "vg0/a/b", exec: rec, err: `local.pool "vg0/a/b": provider lvm_thin needs VG/THINPOOL (e.g. vg0/thinpool)`},
		{provider: backing.ProviderZFS, pool: "tank", exec: rec, want: &ZFS{Parent: "tank", Exec: rec}},
		{provider: backing.ProviderZFSThin, pool: "tank/cairn", exec: rec, want: &ZFS{Parent: "tank/cairn", Thin: true, Exec: rec}},
		{provider: backing.ProviderZFS, pool: "tank/", exec: rec, err: `local.pool "tank/": provider zfs needs a zpool or dataset name (tank, tank/cairn)`},
		{provider: backing.ProviderZFSThin, pool: "", exec: rec, err: `local.pool "": provider zfs_thin needs a zpool or dataset name (tank, tank/cairn)`},
		{provider: backing.ProviderZFS, pool: "tank", err: "volume: provider zfs needs an executor to run its tools"},
		{provider: backing.ProviderLVMThin, pool: "vg/tp", err: "volume: provider lvm_thin needs an executor to run its tools"},
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
	for _, p := range backing.Providers {
		_, err := For(p, map[bool]string{true: "vg/tp", false: "tank"}[p == backing.ProviderLVMThin], "", rec)
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
