package agents

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRevisionsAdmit(t *testing.T) {
	dir := t.TempDir()
	r, err := openRevisions(dir)
	require.NoError(t, err)
	const s = "cairn.node.n1.zpool.tank"
	admit := func(epoch string, rev uint64, body string, holding bool) (verdict, string) {
		t.Helper()
		v, m, err := r.admit(s, epoch, 0, rev, []byte(body), holding)
		require.NoError(t, err)
		return v, string(m.body)
	}
	v, _ := admit("e1", 0, "legacy", false)
	assert.Equal(t, accept, v, "no revision, no mark: accepted (a serve older than revisions)")
	v, _ = admit("e1", 20, "grant 20", false)
	assert.Equal(t, accept, v)
	v, _ = admit("e1", 20, "grant 20", true)
	assert.Equal(t, accept, v, "the same revision again (redelivery)")
	v, m := admit("e1", 10, "grant 10", true)
	assert.Equal(t, stale, v, "older: dropped")
	assert.Equal(t, "grant 20", m)
	v, _ = admit("e1", 0, "legacy", true)
	assert.Equal(t, stale, v, "no revision once a mark exists: dropped")
	v, m = admit("e1", 10, "grant 10", false)
	assert.Equal(t, restore, v, "older while holding nothing: the mark's body instead")
	assert.Equal(t, "grant 20", m)
	v, _ = admit("e1", 30, "", true) // a removal: a tombstone
	assert.Equal(t, accept, v)

	// The marks survive a restart, tombstones included.
	r, err = openRevisions(dir)
	require.NoError(t, err)
	v, m = admit("e1", 25, "grant 25", false)
	assert.Equal(t, restore, v)
	assert.Equal(t, "", m, "the tombstone's empty body")

	// Another epoch (the control plane set up anew): the marks are forgotten.
	v, _ = admit("e2", 3, "grant 3", true)
	assert.Equal(t, accept, v)
	r, err = openRevisions(dir)
	require.NoError(t, err)
	assert.Equal(t, "e2", r.epoch)
	v, _ = admit("e2", 2, "grant 2", true)
	assert.Equal(t, stale, v)

	// A damaged mark fails closed: the agent does not start.
	require.NoError(t, os.WriteFile(filepath.Join(dir, s), []byte("x\n"), 0o640))
	_, err = openRevisions(dir)
	require.ErrorContains(t, err, "damaged")
}

// The lease fence: a message under an older lease token than one seen on any subject is
// dropped whatever its revision (a deposed leader's late publish), a newer token moves
// the fence, the fence survives a restart, and a new epoch forgets it.
func TestRevisionsLeaseFence(t *testing.T) {
	dir := t.TempDir()
	r, err := openRevisions(dir)
	require.NoError(t, err)
	admit := func(subject string, token, rev uint64, holding bool) verdict {
		t.Helper()
		v, _, err := r.admit(subject, "e1", token, rev, []byte("body"), holding)
		require.NoError(t, err)
		return v
	}
	const a, b = "cairn.node.n1.drbd.r1", "cairn.node.n1.zpool.tank"
	assert.Equal(t, accept, admit(a, 5, 100, false))
	assert.Equal(t, accept, admit(b, 9, 101, false), "a newer token moves the fence")
	assert.Equal(t, fenced, admit(a, 5, 200, true), "the older token on another subject: dropped, though its revision is newer")
	assert.Equal(t, restore, admit(a, 5, 200, false), "holding nothing: the mark's body instead")
	assert.Equal(t, accept, admit(a, 0, 300, true), "no token (a serve without a lease) is not fenced")
	r, err = openRevisions(dir)
	require.NoError(t, err)
	assert.Equal(t, uint64(9), r.lease, "the fence survives a restart")
	assert.Equal(t, fenced, admit("cairn.node.n1.drbd.r2", 8, 400, false), "a new subject under an older token")
	v, _, err := r.admit(a, "e2", 1, 1, []byte("x"), true)
	require.NoError(t, err)
	assert.Equal(t, accept, v, "a new epoch forgets the fence")
}
