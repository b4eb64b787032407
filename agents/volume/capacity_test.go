package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A file pool's capacity is the real statfs of its directory, compared with df's view
// computed independently here (blocks and available blocks of the same file system).
func TestMeasureFilePool(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pool"), 0o755))
	c, err := Measure(context.Background(), backing.ProviderFileThin, "/pool", root, nil)
	require.NoError(t, err)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(root, &st))
	require.Equal(t, st.Blocks*uint64(st.Bsize)/1024, c.TotalKiB)
	require.InDelta(t, float64(st.Bavail*uint64(st.Bsize)/1024), float64(c.FreeKiB), 64*1024, "free moved by more than 64 MiB meanwhile")
	require.Less(t, c.FreeKiB, c.TotalKiB)

	_, err = Measure(context.Background(), backing.ProviderFile, "/missing", root, nil)
	require.ErrorContains(t, err, "storage pool directory")
}

// LVM and ZFS pools through the recorder: the exact commands and how their output is read.
func TestMeasureLVMAndZFS(t *testing.T) {
	tests := []struct {
		name     string
		provider backing.Provider
		pool     string
		on       []string
		out      string
		want     backing.Capacity
		cmd      string
		err      string
	}{
		{name: "lvm", provider: backing.ProviderLVM, pool: "vg0", on: []string{"vgs"}, out: "  10737418240  4294967296\n",
			want: backing.Capacity{TotalKiB: 10485760, FreeKiB: 4194304}, cmd: "vgs --noheadings --nosuffix --units b -o vg_size,vg_free vg0"},
		{name: "lvm_thin", provider: backing.ProviderLVMThin, pool: "vg0/thin", on: []string{"lvs"}, out: "  10737418240 25.00\n",
			want: backing.Capacity{TotalKiB: 10485760, FreeKiB: 7864320}, cmd: "lvs --noheadings --nosuffix --units b -o lv_size,data_percent vg0/thin"},
		{name: "zfs", provider: backing.ProviderZFSThin, pool: "tank/cairn", on: []string{"zfs", "list"}, out: "1073741824\t9663676416\n",
			want: backing.Capacity{TotalKiB: 10485760, FreeKiB: 9437184}, cmd: "zfs list -H -p -o used,available tank/cairn"},
		{name: "garbage", provider: backing.ProviderLVMThin, pool: "vg0/thin", on: []string{"lvs"}, out: "  10737418240 n/a\n",
			cmd: "lvs --noheadings --nosuffix --units b -o lv_size,data_percent vg0/thin", err: "unexpected lvs output"},
		{name: "nothing", provider: backing.ProviderLVM, pool: "vg0", on: []string{"vgs"}, out: "\n",
			cmd: "vgs --noheadings --nosuffix --units b -o vg_size,vg_free vg0", err: "vgs printed nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execx.Recorder{Strict: true}
			rec.On(tt.on...).Stdout(tt.out)
			c, err := Measure(context.Background(), tt.provider, tt.pool, "", rec)
			require.Equal(t, []string{tt.cmd}, rec.Commands())
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c)
		})
	}
	rec := &execx.Recorder{Strict: true}
	rec.On("vgs").Fail(5, "  Volume group \"vg9\" not found\n")
	_, err := Measure(context.Background(), backing.ProviderLVM, "vg9", "", rec)
	require.True(t, err != nil && strings.Contains(err.Error(), "not found"), "%v", err)
}
