package volume

// LVM and ZFS need a kernel with a real volume group or zpool, which test machines do
// not have: these tests run the providers against execx.Recorder and assert the exact
// commands they send and how they read the tools' answers.

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/stretchr/testify/require"
)

const (
	lvsVG0  = "lvs --noheadings --nosuffix --units b --separator , -o lv_name,lv_size,vg_extent_size,pool_lv --select lv_name=r1_00000 vg0"
	zfsTank = "zfs list -H -p -t volume -d 1 -o name,volsize,volblocksize,refreservation tank/cairn"
)

func TestLVMCreate(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name     string
		thinPool string
		sizeKiB  uint64
		lvs      string // lvs output ("" = no such LV)
		lvsFail  bool
		want     []string // commands after the lvs lookup
		err      string
		mismatch bool
	}{
		{name: "thick new", sizeKiB: 1048576, want: []string{"lvcreate --yes --wipesignatures y --size 1048576k --name r1_00000 vg0"}},
		{name: "thin new", thinPool: "tp", sizeKiB: 1000, want: []string{"lvcreate --yes --virtualsize 1000k --thin --name r1_00000 vg0/tp"}},
		{name: "thick exists, rounded to an extent", sizeKiB: 1000, lvs: "  r1_00000,4194304,4194304,\n"},
		{name: "thin exists exact", thinPool: "tp", sizeKiB: 8192, lvs: "  other,1,4194304,tp\n  r1_00000,8388608,4194304,tp\n"},
		{name: "exists larger", sizeKiB: 1024, lvs: "  r1_00000,8388608,4194304,\n", mismatch: true,
			err: "volume r1_00000: exists with 8192 KiB, want 1024 KiB: existing volume does not fit (resize or remove it by hand)"},
		{name: "exists smaller", sizeKiB: 16384, lvs: "  r1_00000,8388608,4194304,\n", mismatch: true,
			err: "volume r1_00000: exists with 8192 KiB, want 16384 KiB: existing volume does not fit (resize or remove it by hand)"},
		{name: "thick wanted, thin found", sizeKiB: 4096, lvs: "  r1_00000,4194304,4194304,tp\n", mismatch: true,
			err: "volume r1_00000: exists in vg0 as a thin LV of pool tp, want a thick LV: existing volume does not fit"},
		{name: "thin wanted, thick found", thinPool: "tp", sizeKiB: 4096, lvs: "  r1_00000,4194304,4194304,\n", mismatch: true,
			err: "volume r1_00000: exists in vg0 as a thick LV, want a thin LV of pool tp: existing volume does not fit"},
		{name: "thin wanted, other pool", thinPool: "tp", sizeKiB: 4096, lvs: "  r1_00000,4194304,4194304,tp2\n", mismatch: true,
			err: "volume r1_00000: exists in vg0 as a thin LV of pool tp2, want a thin LV of pool tp: existing volume does not fit"},
		{name: "garbage", sizeKiB: 4096, lvs: "  r1_00000,4.00,4194304,\n", err: `volume r1_00000: unexpected lvs output "  r1_00000,4.00,4194304,"`},
		{name: "no VG", sizeKiB: 4096, lvsFail: true, err: `volume r1_00000: ` + lvsVG0 + `: exit 5: Volume group "vg0" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execx.Recorder{Strict: true}
			if tt.lvsFail {
				rec.On("lvs").Fail(5, "  Volume group \"vg0\" not found\n  Cannot process volume group vg0\n")
			} else {
				rec.On("lvs").Stdout(tt.lvs)
			}
			rec.On("lvcreate")
			l := &LVM{VG: "vg0", ThinPool: tt.thinPool, Exec: rec}
			path, err := l.Create(context.Background(), "r1_00000", tt.sizeKiB)
			if tt.err != "" {
				require.Error(t, err)
				if tt.mismatch {
					require.ErrorIs(t, err, ErrMismatch)
					require.ErrorContains(t, err, tt.err)
				} else {
					require.NotErrorIs(t, err, ErrMismatch)
					require.ErrorContains(t, err, tt.err)
				}
				require.Equal(t, []string{lvsVG0}, rec.Commands(), "nothing created")
				return
			}
			require.NoError(t, err)
			require.Equal(t, "/dev/vg0/r1_00000", path)
			require.Equal(t, append([]string{lvsVG0}, tt.want...), rec.Commands())
		})
	}
}

func TestLVMCreateFails(t *testing.T) {
	rec := &execx.Recorder{}
	rec.On("lvcreate").Fail(5, `  Volume group "vg0" has insufficient free space (10 extents): 256 required.`)
	_, err := (&LVM{VG: "vg0", Exec: rec}).Create(context.Background(), "r1_00000", 1048576)
	require.EqualError(t, err, `volume r1_00000: lvcreate --yes --wipesignatures y --size 1048576k --name r1_00000 vg0: exit 5: Volume group "vg0" has insufficient free space (10 extents): 256 required.`)
	require.Equal(t, 5, execx.ExitCode(err))
}

func TestLVMRemoveExists(t *testing.T) {
	ctx := context.Background()
	rec := &execx.Recorder{Strict: true}
	rec.On("lvs").Stdout("  r1_00000,4194304,4194304,tp\n").Times(2)
	rec.On("lvs").Stdout("")
	rec.On("lvremove")
	l := &LVM{VG: "vg0", ThinPool: "tp", Exec: rec}
	ok, err := l.Exists(ctx, "r1_00000")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Remove(ctx, "r1_00000"))
	require.NoError(t, l.Remove(ctx, "r1_00000"), "already gone")
	ok, err = l.Exists(ctx, "r1_00000")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, []string{lvsVG0, lvsVG0, "lvremove -f vg0/r1_00000", lvsVG0, lvsVG0}, rec.Commands())
	require.Error(t, l.Remove(ctx, "../x"))
}

func TestZFSCreate(t *testing.T) {
	tests := []struct {
		name     string
		thin     bool
		sizeKiB  uint64
		list     string
		want     []string
		err      string
		mismatch bool
	}{
		{name: "thick new, rounded", sizeKiB: 1000, want: []string{"zfs create -V 1024K tank/cairn/r1_00000"}},
		{name: "thin new", thin: true, sizeKiB: 1048576, want: []string{"zfs create -V 1048576K -s tank/cairn/r1_00000"}},
		{name: "other zvols only", sizeKiB: 128, list: "tank/cairn/r2_00000\t131072\t16384\t139264\n", want: []string{"zfs create -V 128K tank/cairn/r1_00000"}},
		{name: "thick exists", sizeKiB: 1000, list: "tank/cairn/r1_00000\t1048576\t16384\t1114112\n"},
		{name: "thin exists", thin: true, sizeKiB: 1048576, list: "tank/cairn/r1_00000\t1073741824\t16384\t0\n"},
		{name: "thin exists, none spelled out", thin: true, sizeKiB: 128, list: "tank/cairn/r1_00000\t131072\t16384\tnone\n"},
		{name: "exists larger", sizeKiB: 1024, list: "tank/cairn/r1_00000\t2097152\t16384\t2162688\n", mismatch: true,
			err: "volume r1_00000: exists with 2048 KiB, want 1024 KiB: existing volume does not fit"},
		{name: "thin wanted, thick found", thin: true, sizeKiB: 1024, list: "tank/cairn/r1_00000\t1048576\t16384\t1114112\n", mismatch: true,
			err: "volume r1_00000: exists as a thick zvol (refreservation set), want a sparse one: existing volume does not fit"},
		{name: "thick wanted, thin found", sizeKiB: 1024, list: "tank/cairn/r1_00000\t1048576\t16384\t0\n", mismatch: true,
			err: "volume r1_00000: exists as a sparse zvol (no refreservation), want a thick one: existing volume does not fit"},
		{name: "garbage", sizeKiB: 1024, list: "tank/cairn/r1_00000\t1M\t16384\t0\n", err: "unexpected zfs list output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execx.Recorder{Strict: true}
			rec.On("zfs", "list").Stdout(tt.list)
			rec.On("zfs", "create")
			z := &ZFS{Parent: "tank/cairn", Thin: tt.thin, Exec: rec}
			path, err := z.Create(context.Background(), "r1_00000", tt.sizeKiB)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				require.Equal(t, tt.mismatch, errors.Is(err, ErrMismatch))
				require.Equal(t, []string{zfsTank}, rec.Commands())
				return
			}
			require.NoError(t, err)
			require.Equal(t, "/dev/zvol/tank/cairn/r1_00000", path)
			require.Equal(t, append([]string{zfsTank}, tt.want...), rec.Commands())
		})
	}
}

func TestZFSRemoveExists(t *testing.T) {
	ctx := context.Background()
	rec := &execx.Recorder{Strict: true}
	rec.On("zfs", "list").Stdout("tank/cairn/r1_00000\t1048576\t16384\t0\n").Times(2)
	rec.On("zfs", "list").Stdout("")
	rec.On("zfs", "destroy")
	z := &ZFS{Parent: "tank/cairn", Thin: true, Exec: rec}
	ok, err := z.Exists(ctx, "r1_00000")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, z.Remove(ctx, "r1_00000"))
	require.NoError(t, z.Remove(ctx, "r1_00000"))
	require.Equal(t, []string{zfsTank, zfsTank, "zfs destroy tank/cairn/r1_00000", zfsTank}, rec.Commands())

	busy := &execx.Recorder{}
	busy.On("zfs", "list").Stdout("tank/cairn/r1_00000\t1048576\t16384\t0\n")
	busy.On("zfs", "destroy").Fail(1, "cannot destroy 'tank/cairn/r1_00000': dataset is busy")
	err = (&ZFS{Parent: "tank/cairn", Exec: busy}).Remove(ctx, "r1_00000")
	require.EqualError(t, err, "volume r1_00000: zfs destroy tank/cairn/r1_00000: exit 1: cannot destroy 'tank/cairn/r1_00000': dataset is busy")

	nopool := &execx.Recorder{}
	nopool.On("zfs", "list").Fail(1, "cannot open 'tank/cairn': dataset does not exist")
	_, err = (&ZFS{Parent: "tank/cairn", Exec: nopool}).Exists(ctx, "r1_00000")
	require.ErrorContains(t, err, "dataset does not exist")
}

func TestLVMGrow(t *testing.T) {
	tests := []struct {
		name, lvs string
		want      []string
		err       error
	}{
		{name: "smaller", lvs: "  r1_00000,4194304,4194304,\n", want: []string{lvsVG0, "lvextend --yes --size 8192k vg0/r1_00000"}},
		{name: "already large enough", lvs: "  r1_00000,8388608,4194304,\n", want: []string{lvsVG0}},
		{name: "missing", lvs: "", want: []string{lvsVG0}, err: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execx.Recorder{Strict: true}
			rec.On("lvs").Stdout(tt.lvs)
			rec.On("lvextend")
			err := (&LVM{VG: "vg0", Exec: rec}).Grow(context.Background(), "r1_00000", 8192)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, rec.Commands())
		})
	}
	rec := &execx.Recorder{Strict: true}
	rec.On("lvs").Stdout("  r1_00000,4194304,4194304,\n")
	rec.On("lvextend").Fail(5, "  Insufficient free space: 1 extents needed, but only 0 available\n")
	require.ErrorContains(t, (&LVM{VG: "vg0", Exec: rec}).Grow(context.Background(), "r1_00000", 8192), "Insufficient free space")
}

func TestZFSGrow(t *testing.T) {
	tests := []struct {
		name, list string
		want       []string
		err        error
	}{
		{name: "smaller, rounded to the granule", list: "tank/cairn/r1_00000\t1048576\t16384\t0\n",
			want: []string{zfsTank, "zfs set volsize=8320K tank/cairn/r1_00000"}},
		{name: "already large enough", list: "tank/cairn/r1_00000\t8519680\t16384\t0\n", want: []string{zfsTank}},
		{name: "missing", list: "tank/cairn/r2_00000\t1048576\t16384\t0\n", want: []string{zfsTank}, err: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execx.Recorder{Strict: true}
			rec.On("zfs", "list").Stdout(tt.list)
			rec.On("zfs", "set")
			err := (&ZFS{Parent: "tank/cairn", Thin: true, Exec: rec}).Grow(context.Background(), "r1_00000", 8200)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, rec.Commands())
		})
	}
}
