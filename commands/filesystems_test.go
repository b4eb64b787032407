package commands_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/projections/dispatch"
)

// ordersOf returns the filesystem orders of every replica of rd, by node.
func ordersOf(t *testing.T, s *server.Server, name string) map[string][]drbd.FilesystemOrder {
	t.Helper()
	rd := definition(t, s, name)
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	var group *projections.ResourceGroup
	if rd.ResourceGroup != "" {
		g, _, err := v.ResourceGroup(rd.ResourceGroup)
		require.NoError(t, err)
		group = &g
	}
	out := map[string][]drbd.FilesystemOrder{}
	for _, r := range rd.Replicas {
		if o := dispatch.FilesystemOrders(rd, group, r.Node); len(o) > 0 {
			out[r.Node] = o
		}
	}
	return out
}

// TestFilesystemOnFirstCreationOnly: FileSystem/Type in force when a definition's first
// replica is placed (the group's, the definition's or the volume's; the nearest wins)
// orders the filesystem from the node of the first disk only, until a node's report is
// recorded; a type set on a definition that already holds data, or a restored one,
// orders nothing; a type Cairn does not make is refused naming the key.
func TestFilesystemOnFirstCreationOnly(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 3, 1<<30)
	must(t, s, "rg.create", `{"name":"g","place_count":2,"storage_pool":"thin","properties":{"FileSystem/Type":"xfs","FileSystem/MkfsParams":"-m crc=1"}}`)
	refused(t, s, "rg.modify", `{"name":"g","properties":{"FileSystem/Type":"btrfs"}}`, "invalid_argument", "FileSystem/Type")

	must(t, s, "rg.spawn", `{"resource_group":"g","name":"r1","size_kib":8192}`)
	orders := ordersOf(t, s, "r1")
	require.Len(t, orders, 1, "one node makes it: %v", orders)
	var maker string
	for n, o := range orders {
		maker = n
		assert.Equal(t, []drbd.FilesystemOrder{{Volume: 0, Type: "xfs", Params: "-m crc=1"}}, o)
	}
	refused(t, s, "vd.filesystem-made", `{"resource":"r1","volume":0,"node":"nope","type":"xfs"}`, "not_found", "no disk")
	must(t, s, "vd.filesystem-made", `{"resource":"r1","volume":0,"node":"`+maker+`","type":"xfs"}`)
	assert.Empty(t, ordersOf(t, s, "r1"), "recorded: nobody makes it again")
	r := must(t, s, "vd.filesystem-made", `{"resource":"r1","volume":0,"node":"`+maker+`","type":"xfs"}`)
	assert.Empty(t, r.Events, "a second report records nothing")

	// The definition's own type wins over the group's; the volume's over both.
	must(t, s, "rd.create", `{"name":"r2","resource_group":"g","properties":{"FileSystem/Type":"ext4"}}`)
	must(t, s, "vd.create", `{"resource":"r2","size_kib":8192,"properties":{"FileSystem/Type":"ext4","FileSystem/User":"0"}}`)
	must(t, s, "vd.create", `{"resource":"r2","size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r2","place_count":2,"storage_pool":"thin"}`)
	r2 := ordersOf(t, s, "r2")
	require.Len(t, r2, 1)
	for _, o := range r2 {
		assert.Equal(t, []drbd.FilesystemOrder{{Volume: 0, Type: "ext4", Params: "-m crc=1", User: "0"}, {Volume: 1, Type: "ext4", Params: "-m crc=1"}}, o)
	}

	// Set after the first replica: never over the data it may hold.
	must(t, s, "rd.create", `{"name":"r3"}`)
	must(t, s, "vd.create", `{"resource":"r3","size_kib":8192}`)
	must(t, s, "replica.add", `{"resource":"r3","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rd.modify", `{"name":"r3","properties":{"FileSystem/Type":"ext4"}}`)
	must(t, s, "vd.modify", `{"resource":"r3","volume":0,"properties":{"FileSystem/Type":"ext4"}}`)
	assert.Empty(t, ordersOf(t, s, "r3"))

	// A restored definition holds the snapshot's data: no filesystem, even in a group
	// that asks for one.
	must(t, s, "rd.snapshot", `{"resource":"r1","name":"s1"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"take"}`)
	must(t, s, "rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`)
	must(t, s, "rd.restore", `{"resource":"r1","snapshot":"s1","target":"r4"}`)
	assert.Empty(t, ordersOf(t, s, "r4"))
}
