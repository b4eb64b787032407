package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// `cairn agent --kernel sim` is killed with SIGKILL while it creates and seeds 20
// resources, wherever it happens to be, and started again. Every resource ends up
// applied with exactly the metadata its seeding plan gives (get-gi with the real
// drbdmeta for all 32 node ids), as after one uninterrupted run.
func TestSimAgentKilledWhileSeeding(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	s := startServe(t, t.TempDir())
	root := filepath.Join(t.TempDir(), "n1")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/cairn/thin"), 0o755))
	cmd := func(verb, body string) {
		t.Helper()
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL())
		require.Equal(t, 0, code, "%s %s: %s", verb, body, out)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	cmd("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	cmd("sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`)
	cmd("rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thin"}`)
	const n = 20
	for i := range n {
		cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg1","name":"r%d","size_kib":4096}`, i))
	}
	nc, err := nats.Connect(s.natsURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	last := func(stream, subject string) []byte {
		st, err := js.Stream(context.Background(), stream)
		require.NoError(t, err)
		m, err := st.GetLastMsgForSubject(context.Background(), subject)
		if err != nil {
			return nil
		}
		return m.Data
	}
	applied := func() int {
		c := 0
		for i := range n {
			var st drbd.Status
			if b := last("CAIRN_STATUS", fmt.Sprintf("cairn.status.n1.drbd.r%d", i)); b != nil && json.Unmarshal(b, &st) == nil && st.Phase == drbd.PhaseApplied {
				c++
			}
		}
		return c
	}
	start := func() *exec.Cmd {
		return startAgent(t, s, agentOpts{root: root, kernel: "sim", extra: []string{"--workers", "4"}})
	}
	a := start()
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(root, "etc/drbd.d/*.res"))
		return len(m) >= 3
	}, 60*time.Second, 5*time.Millisecond, "the agent got going")
	// kill it as soon as one resource is through: the others are somewhere mid-way
	require.Eventually(t, func() bool { return applied() >= 1 }, 60*time.Second, 2*time.Millisecond, "a first resource applied")
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_ = a.Wait()
	require.Less(t, applied(), n, "killed too late: everything was done already")
	start()
	require.Eventually(t, func() bool { return applied() == n }, 120*time.Second, 100*time.Millisecond, "all applied after the restart")

	for i := range n {
		var d drbd.Desired
		require.NoError(t, json.Unmarshal(last("CAIRN_NODES", fmt.Sprintf("cairn.node.n1.drbd.r%d", i)), &d))
		want := drbd.NewMetadata()
		require.NoError(t, want.Apply(d.Local.Seeds, 0))
		img := filepath.Join(root, "var/lib/cairn/thin", fmt.Sprintf("r%d_00000.img", i))
		minor := d.Replicas[0].Minors[0]
		for id := 0; id <= drbd.MaxNodeID; id++ {
			c := exec.Command("drbdmeta", "--force", "--node-id", strconv.Itoa(id), strconv.Itoa(minor), "v09", img, "internal", "get-gi")
			c.Env = append(os.Environ(), "DRBD_DRIVER_VERSION_OVERRIDE=9.2.0")
			out, err := c.Output()
			require.NoError(t, err, "get-gi r%d node id %d", i, id)
			gi, err := drbdutils.ParseGetGI(out)
			require.NoError(t, err)
			require.Equal(t, want.GI(id).String(), gi.String(), "r%d node id %d", i, id)
		}
	}
}
