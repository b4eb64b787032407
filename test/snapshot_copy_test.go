package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Snapshots on a file pool whose file system has no reflinks (issue 29): the copy is a
// full copy while I/O is suspended, so a definition larger than 64 MiB is refused with
// the reason, up front, instead of suspending I/O for the bound and failing; a small one
// is taken, with the longest names LINSTOR allows (48 characters each: the ids of the
// phases the serve records are hashed to fit a command id; they were refused before, and
// every such snapshot stayed under way for good). The agent probes its pool (LINSTOR's storage-pool props show Cairn/Reflink)
// and coreutils is the oracle: `cp --reflink=always` works exactly where reflinks do.
func TestSnapshotsWithoutReflinksAreRefusedWhenTooLarge(t *testing.T) {
	c := startSimCluster(t, 3)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"big","size_kib":131072}`)
	small, snap := "pvc-"+strings.Repeat("s", 44), "snapshot-"+strings.Repeat("x", 39)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"`+small+`","size_kib":4096}`)
	c.waitUpToDate("big", 2, 60*time.Second)
	c.waitUpToDate(small, 2, 60*time.Second)

	dir := filepath.Join(c.root("n1"), "var/lib/cairn/thin")
	probe := filepath.Join(dir, "probe")
	require.NoError(t, os.WriteFile(probe, make([]byte, 4096), 0o644))
	reflinks := exec.Command("cp", "--reflink=always", probe, probe+".copy").Run() == nil
	require.NoError(t, os.Remove(probe))
	_ = os.Remove(probe + ".copy")

	require.Eventually(t, func() bool {
		code, body := httpJSON(t, "GET", c.s.url("/v1/nodes/n1/storage-pools/thin"), "")
		return code == 200 && strings.Contains(body, `"Cairn/Reflink"`)
	}, 30*time.Second, 100*time.Millisecond, "the agent never reported whether its pool has reflinks")
	_, body := httpJSON(t, "GET", c.s.url("/v1/nodes/n1/storage-pools/thin"), "")
	assert.Contains(t, body, `"Cairn/Reflink":"`+map[bool]string{true: "true", false: "false"}[reflinks]+`"`)

	out, code := run(t, "cmd", "rd.snapshot", `{"resource":"big","name":"s1"}`, "--nats", c.s.natsURL())
	if reflinks {
		require.Equal(t, 0, code, out)
	} else {
		require.NotEqual(t, 0, code, "a 128 MiB snapshot without reflinks was accepted: %s", out)
		assert.Contains(t, out, "file systems without reflinks")
		assert.Contains(t, out, "full copy of 128 MiB")
		assert.Contains(t, out, "up to 64 MiB")
	}
	c.cmd("rd.snapshot", `{"resource":"`+small+`","name":"`+snap+`"}`)
	require.Eventually(t, func() bool {
		code, body := httpJSON(t, "GET", c.s.url("/cairn/v1/resources/"+small+"/snapshots/"+snap), "")
		return code == 200 && strings.Contains(body, `"phase":"taken"`)
	}, 30*time.Second, 100*time.Millisecond, "the small snapshot was not taken")
	t.Logf("pool file system has reflinks: %v", reflinks)
}
