package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/zpoolagent/zpoolfake"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildFakeZpool builds the FAKE zpool program (agents/zpoolagent/zpoolfake/zpool): the
// real zpool needs the ZFS kernel module. It works on the real leaf images.
func buildFakeZpool(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "zpool")
	build := exec.Command("go", "build", "-o", bin, "../agents/zpoolagent/zpoolfake/zpool")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fake zpool: %v\n%s", err, out)
	}
	return bin
}

type poolView struct {
	Name     string                  `json:"name"`
	Owner    string                  `json:"owner"`
	GrantSeq uint64                  `json:"grant_seq"`
	Observed map[string]zpool.Status `json:"observed"`
}

// TestZpoolAgentImportsOnGrant runs `cairn serve` and `cairn agent --zpool-bin <fake>`
// on a real OpenZFS image (single-fast: left active by host-c, 100 ms MMP interval, so
// the activity check lasts 2-2.5 s of real time): pool.import through `cairn cmd`
// grants n1, the agent checks, imports with -f and reports imported, which GET
// /cairn/v1/pools/tank shows; pool.import to n2 is refused while n1 is online; pool.export
// makes the agent export.
func TestZpoolAgentImportsOnGrant(t *testing.T) {
	dir := t.TempDir()
	fake := buildFakeZpool(t, dir)
	dev := gunzipFixture(t, dir, "single-fast", "disk0")
	require.NoError(t, zpoolfake.Relabel([]string{dev}, map[string]any{"name": "tank"}))

	s := startServe(t, t.TempDir())
	cmd := func(verb, body string) reply {
		t.Helper()
		out, _ := run(t, "cmd", verb, body, "--nats", s.natsURL())
		return decode[reply](t, out)
	}
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`},
		{"pool.create", fmt.Sprintf(`{"name":"tank","devices":[%q],"nodes":["n1","n2"]}`, dev)},
	} {
		r := cmd(c[0], c[1])
		require.True(t, r.OK, "%s: %+v", c[0], r.Error)
	}

	zlog := startZpoolAgent(t, s, dir, fake, "0x44444444", "--zpool-watch-interval", "100ms")

	pool := func() poolView {
		status, body := httpJSON(t, "GET", s.url("/cairn/v1/pools/tank"), "")
		require.Equal(t, 200, status, body)
		return decode[poolView](t, body)
	}
	waitPhase := func(phase string) zpool.Status {
		t.Helper()
		var st zpool.Status
		require.Eventually(t, func() bool {
			st = pool().Observed["n1"]
			return st.Phase == phase
		}, 30*time.Second, 50*time.Millisecond, "n1 never reported %s", phase)
		return st
	}

	r := cmd("pool.import", `{"pool":"tank","node":"n1"}`)
	require.True(t, r.OK, "%+v", r.Error)
	st := waitPhase(zpool.PhaseImported)
	require.Equal(t, r.Events[0].Seq, st.GrantSeq)
	require.True(t, st.Forced, "left active by host-c: imported with -f after the check")
	require.False(t, st.CheckStartedAt.IsZero())
	v, _ := json.Marshal(st.Verdict)
	require.Contains(t, string(v), `"code":"no_activity"`)
	require.Contains(t, string(v), `"duration_case":"fail_intervals"`)

	// One grant at a time: n2 is refused while n1 is online.
	r2 := cmd("pool.import", `{"pool":"tank","node":"n2"}`)
	require.False(t, r2.OK)
	require.Equal(t, "precondition_failed", r2.Error.Code)
	require.Contains(t, r2.Error.Message, "which is online")
	_, hasN2 := pool().Observed["n2"]
	require.False(t, hasN2)

	r = cmd("pool.export", `{"pool":"tank","node":"n1"}`)
	require.True(t, r.OK, "%+v", r.Error)
	waitPhase(zpool.PhaseExported)

	calls, err := os.ReadFile(zlog)
	require.NoError(t, err)
	var lines []string // without the health reads the agent makes every second while imported
	for _, l := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		if l != "list -H -o health tank" && l != "status tank" {
			lines = append(lines, l)
		}
	}
	require.Equal(t, []string{
		"list -H -o name tank",
		"import -d " + dev + " -N -o cachefile=none -f tank",
		"export tank",
	}, lines)
}

// TestZpoolAgentLiveWriter: real OpenZFS writers (userspace libzpool, no kernel module)
// against `cairn agent` with the fake zpool. A live writer holds tank when the grant
// arrives: the check sees it, refused, zpool import never runs. The writer is killed -9:
// the retried check finds the pool idle, import -f. Another live writer then takes the
// leaf: the watcher sees its hostid, the agent fences (export -F) and reports contested.
// Needs $CAIRN_ZFS_TOOLS (test/zfsimages/fetch-zfs.sh) and gcc; skips otherwise.
func TestZpoolAgentLiveWriter(t *testing.T) {
	dir, gen := liveMMPGen(t, "live agent")
	fake := buildFakeZpool(t, dir)
	vdev := newVdev(t, filepath.Join(dir, "vdev0.img"))
	writerA := startWriter(t, gen, dir, vdev, "tank", "0xaaaa0001", "writer-a")

	s := startServe(t, t.TempDir())
	cmd := func(verb, body string) reply {
		t.Helper()
		out, _ := run(t, "cmd", verb, body, "--nats", s.natsURL())
		return decode[reply](t, out)
	}
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"pool.create", fmt.Sprintf(`{"name":"tank","devices":[%q],"nodes":["n1"]}`, vdev)},
	} {
		require.True(t, cmd(c[0], c[1]).OK, c[0])
	}
	zlog := startZpoolAgent(t, s, dir, fake, "0xbbbb0002", "--zpool-retry", "1s")
	observed := func() zpool.Status {
		status, body := httpJSON(t, "GET", s.url("/cairn/v1/pools/tank"), "")
		require.Equal(t, 200, status, body)
		return decode[poolView](t, body).Observed["n1"]
	}
	wait := func(what string, ok func(zpool.Status) bool) zpool.Status {
		t.Helper()
		var st zpool.Status
		if !assert.Eventually(t, func() bool { st = observed(); return ok(st) }, 60*time.Second, 50*time.Millisecond, "n1 never %s", what) {
			t.Fatalf("n1 never %s; last status %+v", what, observed())
		}
		return st
	}
	calls := func() string { b, _ := os.ReadFile(zlog); return string(b) }

	require.True(t, cmd("pool.import", `{"pool":"tank","node":"n1"}`).OK)
	st := wait("refused", func(st zpool.Status) bool { return st.Phase == zpool.PhaseRefused })
	require.Equal(t, "activity_detected", st.Code, st.Error)
	require.Equal(t, "0xaaaa0001", st.ForeignHostID)
	require.Equal(t, "writer-a", st.ForeignHost)
	require.NotContains(t, calls(), "import", "a refused check never runs zpool import")

	require.NoError(t, writerA.Process.Signal(os.Kill))
	_ = writerA.Wait()
	st = wait("imported", func(st zpool.Status) bool { return st.Phase == zpool.PhaseImported })
	require.True(t, st.Forced)
	require.Contains(t, calls(), "import -d "+vdev+" -N -o cachefile=none -f tank")

	startWriter(t, gen, dir, vdev, "tank", "0xcccc0003", "writer-c")
	// Fenced: the agent reports contested and fenced, and once cairn serve has turned that
	// into pool.contest (which withdraws the grant) exported since the fence.
	st = wait("fenced", func(st zpool.Status) bool {
		return st.Phase == zpool.PhaseContested && st.Fenced || st.Phase == zpool.PhaseExported && st.Code == "fenced"
	})
	require.Equal(t, "0xcccc0003", st.ForeignHostID, st.Error)
	require.Equal(t, "writer-c", st.ForeignHost)
	require.Contains(t, calls(), "export -F tank")
}

// startZpoolAgent runs `cairn agent --node n1` with the fake zpool (its state, call log
// and hostid under dir) until the test ends, printing its log when the test failed, and
// returns the path of the fake's call log. extra are more agent flags.
func startZpoolAgent(t *testing.T, s *serve, dir, fake, hostid string, extra ...string) string {
	t.Helper()
	zlog := filepath.Join(dir, "zpool-calls.log")
	startAgent(t, s, agentOpts{
		extra: append([]string{"--heartbeat-interval", "200ms",
			"--zpool-bin", fake, "--hostid", hostid, "--zpool-state-dir", filepath.Join(dir, "state")}, extra...),
		env: []string{"ZPOOL_FAKE_STATE=" + filepath.Join(dir, "zpool-state.json"), "ZPOOL_FAKE_HOSTID=" + hostid,
			"ZPOOL_FAKE_HOSTNAME=h1", "ZPOOL_FAKE_LOG=" + zlog},
	})
	return zlog
}
