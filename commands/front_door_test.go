package commands_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
)

// The front door (issue 30): a DRBD-only cluster needs a name alone; vd.create without
// a number takes the lowest free one, as LINSTOR does; rd.delete and rd.modify take the
// definition as resource, as the other resource verbs name it, or as name, not both.
func TestVerbsTakeWhatANewUserSends(t *testing.T) {
	s := servertest.Start(t)
	ok := func(verb, body string) {
		t.Helper()
		r := servertest.Submit(s, verb, body)
		require.True(t, r.OK, "%s %s: %+v", verb, body, r.Error)
	}
	ok("cluster.create", `{"name":"c1"}`)
	v, err := s.DB.Read()
	require.NoError(t, err)
	cl, _, _ := v.Cluster()
	v.Close()
	assert.False(t, cl.FailureDomains)
	assert.Equal(t, 1, cl.DataChunks)
	assert.Equal(t, 1, cl.ParityChunks)

	ok("rd.create", `{"name":"r1"}`)
	ok("vd.create", `{"resource":"r1","size_kib":4096}`)
	ok("vd.create", `{"resource":"r1","volume":2,"size_kib":4096}`)
	ok("vd.create", `{"resource":"r1","size_kib":4096}`)
	v, err = s.DB.Read()
	require.NoError(t, err)
	rd, _, _ := v.ResourceDefinition("r1")
	v.Close()
	var nums []int
	for _, vd := range rd.Volumes {
		nums = append(nums, vd.Volume)
	}
	assert.ElementsMatch(t, []int{0, 1, 2}, nums, "0, then 2 as asked, then the lowest free: 1")

	ok("rd.modify", `{"resource":"r1","properties":{"Aux/a":"b"}}`)
	r := servertest.Submit(s, "rd.delete", `{"name":"r1","resource":"r2"}`)
	require.False(t, r.OK, "two names for one definition are refused")
	assert.Contains(t, r.Error.Error(), `name "r1" and resource "r2": give the definition once`)
	r = servertest.Submit(s, "rd.delete", `{}`)
	require.False(t, r.OK, "no definition named")
	ok("rd.delete", `{"resource":"r1"}`)
	v, err = s.DB.Read()
	require.NoError(t, err)
	_, exists, _ := v.ResourceDefinition("r1")
	v.Close()
	assert.False(t, exists)
}
