package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Capacity the back ends report, end to end with the real binaries: a file pool created
// without a capacity is measured by its node's agent (statfs of the real directory) and
// recorded by serve (sp.capacity-reported); the native API shows the report; autoplace
// then places on it, and refuses a disk larger than what statfs says is free.
func TestAgentReportsPoolCapacity(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	s := startServe(t, t.TempDir())
	cmd := func(verb, body string) (string, int) {
		t.Helper()
		return run(t, "cmd", verb, body, "--nats", s.natsURL())
	}
	_, code := cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	require.Equal(t, 0, code)
	_, code = cmd("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	require.Equal(t, 0, code)
	root := filepath.Join(t.TempDir(), "n1")
	dir := filepath.Join(root, "var/lib/cairn/thick")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	startAgent(t, s, agentOpts{node: "n1", root: root, kernel: "sim", extra: []string{"--capacity-interval", "300ms"}})
	_, code = cmd("sp.create", `{"node":"n1","name":"thick","provider":"file","pool":"/var/lib/cairn/thick"}`)
	require.Equal(t, 0, code)

	type pool struct {
		Name     string `json:"name"`
		Reported *struct {
			TotalKiB uint64 `json:"total_kib"`
			FreeKiB  uint64 `json:"free_kib"`
		} `json:"reported"`
	}
	var got pool
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.url("/cairn/v1/storage-pools"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var page struct {
			Pools []pool `json:"storage_pools"`
		}
		if json.NewDecoder(resp.Body).Decode(&page) != nil || len(page.Pools) != 1 {
			return false
		}
		got = page.Pools[0]
		return got.Reported != nil
	}, 20*time.Second, 100*time.Millisecond, "the agent's report never reached the views")
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	require.Equal(t, st.Blocks*uint64(st.Bsize)/1024, got.Reported.TotalKiB, "total is the directory's file system")
	require.InDelta(t, float64(st.Bavail*uint64(st.Bsize)/1024), float64(got.Reported.FreeKiB), float64(got.Reported.TotalKiB)/50)

	// Autoplace places on it now; a disk larger than its free space is refused.
	_, code = cmd("rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thick"}`)
	require.Equal(t, 0, code)
	out, code := cmd("rg.spawn", `{"resource_group":"rg1","name":"r1","size_kib":4096}`)
	require.Equal(t, 0, code, out)
	tooBig := got.Reported.FreeKiB + 1<<20
	out, code = cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg1","name":"r2","size_kib":%d}`, tooBig))
	require.NotEqual(t, 0, code)
	require.True(t, strings.Contains(out, "precondition_failed") && strings.Contains(out, "KiB free"), out)
}
