package volume

// Making a pool's back end needs devices and a kernel (LVM's device mapper, ZFS): the
// tests run Prepare against execx.Recorder and assert the exact commands it sends, and
// what it does not send when a device carries a signature or the back end exists.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
)

func TestPrepare(t *testing.T) {
	devs := []string{"/dev/sdx", "/dev/sdy"}
	tests := []struct {
		name     string
		provider backing.Provider
		pool     string
		script   func(r *execx.Recorder)
		want     []string
		made     bool
		err      string
	}{
		{name: "lvm_thin on blank devices", provider: backing.ProviderLVMThin, pool: "linstor_data/data",
			script: func(r *execx.Recorder) {
				r.On("vgs").Fail(5, "  Volume group \"linstor_data\" not found\n").Times(1)
				r.On("lvs").Fail(5, "  Failed to find logical volume\n").Times(1)
				r.On("blkid").Fail(2, "")
			},
			want: []string{"vgs --noheadings -o vg_name linstor_data", "blkid -p -o export /dev/sdx", "blkid -p -o export /dev/sdy",
				"vgcreate --yes linstor_data /dev/sdx /dev/sdy", "lvs --noheadings -o lv_name linstor_data/data",
				"lvcreate --yes --extents 100%FREE --thinpool data linstor_data"},
			made: true},
		{name: "lvm_thin made already: nothing again", provider: backing.ProviderLVMThin, pool: "linstor_data/data",
			want: []string{"vgs --noheadings -o vg_name linstor_data", "lvs --noheadings -o lv_name linstor_data/data"}},
		{name: "a device with a filesystem refuses the pool", provider: backing.ProviderLVM, pool: "vg1",
			script: func(r *execx.Recorder) {
				r.On("vgs").Fail(5, "not found")
				r.On("blkid", "-p", "-o", "export", "/dev/sdx").Fail(2, "")
				r.On("blkid", "-p", "-o", "export", "/dev/sdy").Stdout("DEVNAME=/dev/sdy\nLABEL=home\nTYPE=ext4\n")
			},
			want: []string{"vgs --noheadings -o vg_name vg1", "blkid -p -o export /dev/sdx", "blkid -p -o export /dev/sdy"},
			err:  "device /dev/sdy carries a signature (LABEL=home TYPE=ext4): Cairn never makes a pool over data"},
		{name: "zfs_thin with a dataset", provider: backing.ProviderZFSThin, pool: "tank/cairn",
			script: func(r *execx.Recorder) {
				r.On("zpool", "list").Fail(1, "cannot open 'tank': no such pool")
				r.On("zfs", "list").Fail(1, "dataset does not exist")
				r.On("blkid").Fail(2, "")
			},
			want: []string{"zpool list -H -o name tank", "blkid -p -o export /dev/sdx", "blkid -p -o export /dev/sdy",
				"zpool create tank /dev/sdx /dev/sdy", "zfs list -H -o name tank/cairn", "zfs create -p tank/cairn"},
			made: true},
		{name: "a device blkid cannot open refuses", provider: backing.ProviderZFS, pool: "tank",
			script: func(r *execx.Recorder) {
				r.On("zpool", "list").Fail(1, "no such pool")
				r.On("blkid").Fail(4, "blkid: error: /dev/sdx: No such file or directory")
			},
			want: []string{"zpool list -H -o name tank", "blkid -p -o export /dev/sdx"},
			err:  "probe /dev/sdx for signatures"},
		{name: "file pools take no devices", provider: backing.ProviderFileThin, pool: "/var/lib/cairn/thin",
			want: []string{}, err: "takes no devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &execx.Recorder{}
			if tt.script != nil {
				tt.script(rec)
			}
			made, err := Prepare(context.Background(), tt.provider, tt.pool, devs, rec)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.made, made)
			assert.Equal(t, tt.want, rec.Commands())
		})
	}
}
