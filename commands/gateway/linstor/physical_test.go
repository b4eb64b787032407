package linstor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-io/cairn/storage/backing"
)

// TestGroupDevicesLargestFirst: devices of one size and kind group across nodes; the
// largest group comes first, solid-state before rotating among equal sizes.
func TestGroupDevicesLargestFirst(t *testing.T) {
	got := groupDevices(map[string]backing.DeviceReport{
		"n1": {Devices: []backing.Device{{Path: "/dev/sda", SizeBytes: 4 << 30, Rotational: true}, {Path: "/dev/nvme0n1", SizeBytes: 2 << 30}}},
		"n2": {Devices: []backing.Device{{Path: "/dev/sdb", SizeBytes: 4 << 30, Rotational: true}, {Path: "/dev/nvme1n1", SizeBytes: 4 << 30}}},
	})
	assert.Equal(t, []PhysicalStorage{
		{Size: 4 << 30, Nodes: map[string][]PhysicalStorageDevice{"n2": {{Device: "/dev/nvme1n1"}}}},
		{Size: 4 << 30, Rotational: true, Nodes: map[string][]PhysicalStorageDevice{"n1": {{Device: "/dev/sda"}}, "n2": {{Device: "/dev/sdb"}}}},
		{Size: 2 << 30, Nodes: map[string][]PhysicalStorageDevice{"n1": {{Device: "/dev/nvme0n1"}}}},
	}, got)
}
