package spagent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/test/testtools"
)

// lsblkOf is lsblk's JSON for a host with a free SSD, a rotating disk without anything
// on it (as an older lsblk prints it: numbers and flags as strings), a disk with a
// partition, a disk holding an LVM signature, a mounted disk, a read-only disk, a loop
// device, a DRBD device, an empty drive and one of 1 GiB (LINSTOR wants more). It stands in for lsblk, which reads the
// kernel's view of the host's devices.
const lsblkOf = `{"blockdevices": [
 {"name":"nvme0n1","path":"/dev/nvme0n1","size":1000204886016,"rota":false,"type":"disk","ro":false,"fstype":null,"mountpoint":null,"model":"Samsung SSD 980 ","serial":"S64DNX0R","wwn":"eui.0025385b11b0"},
 {"name":"sdb","size":"4000787030016","rota":"1","type":"disk","ro":"0","fstype":null,"mountpoint":null,"model":"WDC WD40","serial":"WD-1","wwn":null},
 {"name":"sda","path":"/dev/sda","size":500107862016,"rota":false,"type":"disk","ro":false,"fstype":null,"mountpoint":null,
  "children":[{"name":"sda1","path":"/dev/sda1","size":500106813440,"rota":false,"type":"part","ro":false,"fstype":"ext4","mountpoint":"/"}]},
 {"name":"sdc","path":"/dev/sdc","size":1000204886016,"rota":true,"type":"disk","ro":false,"fstype":"LVM2_member","mountpoint":null},
 {"name":"sdd","path":"/dev/sdd","size":1000204886016,"rota":true,"type":"disk","ro":false,"fstype":null,"mountpoint":"/srv"},
 {"name":"sde","path":"/dev/sde","size":1000204886016,"rota":true,"type":"disk","ro":true,"fstype":null,"mountpoint":null},
 {"name":"loop0","path":"/dev/loop0","size":1073741824,"rota":false,"type":"loop","ro":false,"fstype":null,"mountpoint":null},
 {"name":"drbd1000","path":"/dev/drbd1000","size":1073741824,"rota":false,"type":"disk","ro":false,"fstype":null,"mountpoint":null},
 {"name":"sdf","path":"/dev/sdf","size":0,"rota":true,"type":"disk","ro":false,"fstype":null,"mountpoint":null},
 {"name":"sdg","path":"/dev/sdg","size":1073741824,"rota":true,"type":"disk","ro":false,"fstype":null,"mountpoint":null}
]}`

// fakeLsblk answers lsblk with fixed output (see lsblkOf).
type fakeLsblk []byte

func (f fakeLsblk) Run(ctx context.Context, argv []string, opts execx.Options) ([]byte, error) {
	return f, nil
}

// TestUnusedDevicesAreWholeEmptyDisks: only whole, writable disks over 1 GiB holding
// nothing are listed, with their model, serial and WWN, in both lsblk JSON dialects;
// the report goes out on the node's devices status subject.
func TestUnusedDevicesAreWholeEmptyDisks(t *testing.T) {
	want := []backing.Device{
		{Path: "/dev/nvme0n1", SizeBytes: 1000204886016, Model: "Samsung SSD 980", Serial: "S64DNX0R", WWN: "eui.0025385b11b0"},
		{Path: "/dev/sdb", SizeBytes: 4000787030016, Rotational: true, Model: "WDC WD40", Serial: "WD-1"},
	}
	got, err := UnusedDevices([]byte(lsblkOf))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = UnusedDevices([]byte(`{"blockdevices":[{"name":"sdx","size":"big","type":"disk"}]}`))
	assert.ErrorContains(t, err, "not a size")

	p := &pubs{raw: map[string][][]byte{}}
	names := events.NewNames("")
	r := New(Config{Node: "n1", Names: names, Exec: fakeLsblk(lsblkOf), Pub: p, Log: zerolog.Nop()})
	r.reportDevices(context.Background())
	msgs := p.raw[names.Status("n1", backing.DevicesKind, "n1")]
	require.Len(t, msgs, 1)
	var rep backing.DeviceReport
	require.NoError(t, json.Unmarshal(msgs[0], &rep))
	assert.Equal(t, "n1", rep.Node)
	assert.Empty(t, rep.Error)
	assert.Equal(t, want, rep.Devices)
}

// TestUnusedDevicesOfThisHost runs the real lsblk: its output parses, and no device
// listed is mounted or holds anything (this machine's root disk is never listed).
func TestUnusedDevicesOfThisHost(t *testing.T) {
	testtools.Need(t, "lsblk", "findmnt")
	out, err := (&execx.Runner{Log: zerolog.Nop()}).Run(context.Background(), LsblkArgv, execx.Options{})
	require.NoError(t, err)
	got, err := UnusedDevices(out)
	require.NoError(t, err)
	mounts, err := (&execx.Runner{Log: zerolog.Nop()}).Run(context.Background(), []string{"findmnt", "-rno", "SOURCE"}, execx.Options{})
	require.NoError(t, err)
	for _, d := range got {
		assert.NotContains(t, string(mounts), d.Path+"\n", "%s is mounted", d.Path)
	}
}
