package commands_test

import (
	"fmt"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVolumesSnapshotsAndRemovalRules(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", cluster).OK) // 2+1 with failure domains
	// three domains of three hosts, and a dedicated secondary
	for i := 1; i <= 9; i++ {
		require.True(t, addHost(t, s, fmt.Sprintf("n%d", i), fmt.Sprintf("h%d", i), fmt.Sprintf("RACK%d", (i-1)/3+1)).OK)
	}
	require.True(t, servertest.Submit(s, "node.add", `{"name":"sec","host":"hs","address":"10.0.0.9","failure_domain":"RACK1","role":"secondary"}`).OK)
	require.True(t, servertest.Submit(s, "cluster.activate", `{}`).OK)

	code := func(verb, body string) string {
		r := servertest.Submit(s, verb, body)
		if r.OK {
			return "ok"
		}
		return r.Error.Code + ": " + r.Error.Message
	}
	assert.Equal(t, "ok", code("lvol.create", `{"name":"v1","node":"n1","size_kib":1048576}`))
	assert.Contains(t, code("lvol.create", `{"name":"v1","node":"n2","size_kib":1}`), cairn.CodeAlreadyExists)
	assert.Contains(t, code("lvol.create", `{"name":"v2","node":"ghost","size_kib":1}`), cairn.CodeNotFound)
	assert.Contains(t, code("lvol.create", `{"name":"v2","node":"sec","size_kib":1}`), "dedicated secondary")
	assert.Contains(t, code("lvol.create", `{"name":"v2","node":"n1","size_kib":0}`), "size_kib")
	assert.Equal(t, "ok", code("snapshot.create", `{"name":"s1","lvol":"v1"}`))
	assert.Contains(t, code("snapshot.create", `{"name":"s2","lvol":"nope"}`), cairn.CodeNotFound)

	// rule 1: a node that holds volumes or snapshots cannot go
	assert.Contains(t, code("node.remove", `{"name":"n1"}`), "holds 1 logical volume(s) and 1 snapshot(s)")
	assert.Contains(t, code("lvol.delete", `{"name":"v1"}`), "has 1 snapshot(s); delete them first")
	assert.Equal(t, "ok", code("snapshot.delete", `{"name":"s1"}`))
	assert.Equal(t, "ok", code("lvol.delete", `{"name":"v1"}`))
	assert.Contains(t, code("lvol.delete", `{"name":"v1"}`), cairn.CodeNotFound)

	// the cluster holds data again (on n9); the dead-host sequence in RACK2:
	assert.Equal(t, "ok", code("lvol.create", `{"name":"v9","node":"n9","size_kib":4096}`))
	assert.Equal(t, "ok", code("node.set-state", `{"name":"n4","state":"offline"}`))
	assert.Equal(t, "ok", code("node.set-state", `{"name":"n5","state":"offline"}`))
	assert.Equal(t, "ok", code("node.remove", `{"name":"n4"}`), "the first dead host in a domain can go")
	got := code("node.remove", `{"name":"n5"}`)
	assert.Contains(t, got, cairn.CodeDomainUnbalanced)
	assert.Contains(t, got, "hosts have to be added to RACK2 first")

	// adding a replacement in RACK2 opens the door again
	require.True(t, addHost(t, s, "n10", "h10", "RACK2").OK)
	assert.Equal(t, "ok", code("node.remove", `{"name":"n5"}`))
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	holds, err := v.HoldsData()
	require.NoError(t, err)
	assert.True(t, holds)
}

// Removal keeps enough online hosts above k + m, counting hosts already offline.
func TestRemovalNeedsHeadroomAboveTheScheme(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", cluster).OK) // 2+1: needs 4 online hosts after a removal
	for i := 1; i <= 6; i++ {
		require.True(t, addHost(t, s, fmt.Sprintf("n%d", i), fmt.Sprintf("h%d", i), fmt.Sprintf("RACK%d", (i-1)/2+1)).OK)
	}
	require.True(t, servertest.Submit(s, "cluster.activate", `{}`).OK)
	require.True(t, servertest.Submit(s, "node.set-state", `{"name":"n2","state":"offline"}`).OK)
	require.True(t, servertest.Submit(s, "node.set-state", `{"name":"n4","state":"offline"}`).OK)
	r := servertest.Submit(s, "node.remove", `{"name":"n6"}`)
	require.False(t, r.OK)
	assert.Equal(t, cairn.CodePreconditionFailed, r.Error.Code)
	assert.Contains(t, r.Error.Message, "leaves 3 online storage host(s); scheme 2+1 needs at least 4")
	require.True(t, servertest.Submit(s, "node.set-state", `{"name":"n4","state":"online"}`).OK)
	assert.True(t, servertest.Submit(s, "node.remove", `{"name":"n6"}`).OK)
}
