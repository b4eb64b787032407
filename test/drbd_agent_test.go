package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The three-agent demo of the README with the real binaries: `cairn serve` and three
// `cairn agent --kernel sim` (real drbdadm and drbdmeta on file_thin disks). Two
// replicas, 100 blocks written, a third replica added: it resyncs exactly those blocks
// (bitmap), and get-gi (real drbdmeta) on every metadata file shows one current UUID.
func TestThreeSimAgentsEndToEnd(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	s := startServe(t, t.TempDir())
	base := t.TempDir()
	cmd := func(verb, body string) {
		t.Helper()
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL())
		require.Equal(t, 0, code, "%s %s: %s", verb, body, out)
	}
	simAgent := func(node string) {
		root := filepath.Join(base, node)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/cairn/thin"), 0o755))
		startAgent(t, s, agentOpts{node: node, root: root, kernel: "sim", extra: []string{"--heartbeat-interval", "500ms"}})
	}
	addNode := func(i int) {
		n := fmt.Sprintf("n%d", i)
		cmd("node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, n, i, i))
		cmd("sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`, n))
		simAgent(n)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	addNode(1)
	addNode(2)
	cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)

	nc, err := nats.Connect(s.natsURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	status := func(node string) drbd.Status {
		st, err := js.Stream(context.Background(), "CAIRN_STATUS")
		require.NoError(t, err)
		m, err := st.GetLastMsgForSubject(context.Background(), "cairn.status."+node+".drbd.r1")
		if err != nil {
			return drbd.Status{}
		}
		var s drbd.Status
		require.NoError(t, json.Unmarshal(m.Data, &s))
		return s
	}
	established := func(st drbd.Status, peers int) bool {
		n := 0
		for _, p := range st.Peers {
			if len(p.Volumes) == 1 && p.Volumes[0].Replication == "Established" {
				n++
			}
		}
		return st.Phase == drbd.PhaseApplied && n == peers
	}
	for _, n := range []string{"n1", "n2"} {
		require.Eventually(t, func() bool { return established(status(n), 1) }, 60*time.Second, 100*time.Millisecond, "r1 on %s: %+v", n, status(n))
	}
	out, code := run(t, "sim", "write", "--root", filepath.Join(base, "n1"), "r1", "100")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "100 blocks written since day 0")

	addNode(3)
	cmd("replica.add", `{"resource":"r1","node":"n3"}`)
	require.Eventually(t, func() bool { return established(status("n3"), 2) }, 60*time.Second, 100*time.Millisecond, "r1 on n3: %+v", status("n3"))
	var kinds []string
	for _, p := range status("n3").Peers {
		k := p.Volumes[0].SyncKind
		if p.Volumes[0].LastSyncKiB != nil {
			k += fmt.Sprintf("/%d", *p.Volumes[0].LastSyncKiB)
		}
		kinds = append(kinds, k)
	}
	require.ElementsMatch(t, []string{"bitmap/400", "none"}, kinds, "the new replica resyncs the 400 KiB written since day 0 from one peer")

	currents := map[string]bool{}
	for _, n := range []string{"n1", "n2", "n3"} {
		img := filepath.Join(base, n, "var/lib/cairn/thin/r1_00000.img")
		st := status(n)
		minor := st.Volumes[0].Minor
		var me int
		for _, p := range []int{0, 1, 2} {
			found := false
			for _, q := range st.Peers {
				found = found || q.NodeID == p
			}
			if !found {
				me = p
			}
		}
		c := exec.Command("drbdmeta", "--force", "--node-id", fmt.Sprint(me), fmt.Sprint(minor), "v09", img, "internal", "get-gi")
		c.Env = append(os.Environ(), "DRBD_DRIVER_VERSION_OVERRIDE=9.2.0")
		b, err := c.Output()
		require.NoError(t, err, "get-gi on %s", img)
		gi, err := drbdutils.ParseGetGI(b)
		require.NoError(t, err)
		currents[gi.Current().String()] = true
		require.Equal(t, gi.Current().String(), st.Volumes[0].CurrentGI, "%s: status current GI", n)
	}
	require.Len(t, currents, 1, "all replicas hold the same current UUID after the syncs: %v", currents)
}
