package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
)

// A client that deletes a clone and then its source at once (linstor-csi under
// csi-sanity, stop 37) finds the source deletable: the clone's snapshot, restored into a
// target that is gone, goes with the source in the same append. While the target exists
// the snapshot may be what its disks are made from, and blocks; a user's snapshot always
// blocks; a failed clone snapshot never does.
func TestDeletingACloneSourceTakesItsLeftoverCloneSnapshots(t *testing.T) {
	s := servertest.Start(t)
	ok := func(verb, body string) []string {
		t.Helper()
		r := servertest.Submit(s, verb, body)
		require.True(t, r.OK, "%s %s: %+v", verb, body, r.Error)
		var types []string
		for _, e := range r.Events {
			types = append(types, e.Type)
		}
		return types
	}
	refused := func(verb, body string) *cairn.Error {
		t.Helper()
		r := servertest.Submit(s, verb, body)
		require.False(t, r.OK, "%s %s must be refused", verb, body)
		return r.Error
	}
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`},
		{"sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1048576}`},
		{"sp.create", `{"node":"n2","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1048576}`},
	} {
		ok(c[0], c[1])
	}
	source := func(name string) {
		ok("rd.create", `{"name":"`+name+`"}`)
		ok("vd.create", `{"resource":"`+name+`","volume":0,"size_kib":4096}`)
		ok("replica.add", `{"resource":"`+name+`","place_count":2,"storage_pool":"thin"}`)
	}

	// A clone restored into its target: the snapshot blocks while the target exists.
	source("src")
	ok("rd.clone", `{"resource":"src","target":"dst"}`)
	ok("rd.snapshot-progress", `{"resource":"src","name":"clone-dst","phase":"take"}`)
	ok("rd.snapshot-progress", `{"resource":"src","name":"clone-dst","phase":"taken"}`)
	ok("rd.restore", `{"resource":"src","snapshot":"clone-dst","target":"dst"}`)
	e := refused("rd.delete", `{"name":"src"}`)
	assert.Equal(t, cairn.CodePreconditionFailed, e.Code)
	assert.Contains(t, e.Message, "clone-dst")
	ok("rd.delete", `{"name":"dst"}`)
	types := ok("rd.delete", `{"name":"src"}`)
	assert.Equal(t, "rd.snapshot-deleted", types[0], "the leftover clone snapshot goes first, in the same append: %v", types)
	assert.Equal(t, "rd.deleted", types[len(types)-1], "%v", types)

	// A failed clone snapshot never blocks; a user's snapshot always does.
	source("src2")
	ok("rd.clone", `{"resource":"src2","target":"dst2"}`)
	ok("rd.snapshot-progress", `{"resource":"src2","name":"clone-dst2","phase":"failed","reason":"node n2: aborted: suspended for the whole bound"}`)
	ok("rd.snapshot", `{"resource":"src2","name":"mine"}`)
	e = refused("rd.delete", `{"name":"src2"}`)
	assert.Contains(t, e.Message, "(mine)", "only the user's snapshot is named")
	ok("rd.snapshot-delete", `{"resource":"src2","name":"mine"}`)
	types = ok("rd.delete", `{"name":"src2"}`)
	assert.Contains(t, types, "rd.snapshot-deleted")
}
