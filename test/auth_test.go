package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/natsauth"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// `cairn serve --auth` with `cairn agent --creds`: the operator's commands need the
// control credentials, a node's agent runs on credentials from `cairn auth node-creds`
// and its heartbeat arrives; credentials for one node do not serve another.
func TestServeAuthAgentCreds(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "--auth", "--heartbeat-timeout", "1s")
	control := filepath.Join(data, "auth", "cairn.creds")
	fi, err := os.Stat(control)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL(), "--timeout", "2s")
	require.Equal(t, 2, code, "a command without credentials got an answer")
	_, code = run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL(), "--creds", control)
	require.Equal(t, 0, code)
	_, code = run(t, "cmd", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "--nats", s.natsURL(), "--creds", control)
	require.Equal(t, 0, code)
	out, code := run(t, "views", "at", "--seq", "2", "--nats", s.natsURL(), "--creds", control)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"seq": 2`)

	n1creds := filepath.Join(t.TempDir(), "n1.creds")
	_, code = run(t, "auth", "node-creds", "n1", "--data", data, "-o", n1creds)
	require.Equal(t, 0, code)
	fi, err = os.Stat(n1creds)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	// A node's credentials may send no command: refused at once, not after the timeout.
	began := time.Now()
	_, stderr, code := runAll(t, "cmd", "node.remove", `{"name":"n1"}`, "--nats", s.natsURL(), "--creds", n1creds)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "refused these credentials")
	require.Less(t, time.Since(began), 10*time.Second, "waited for the 30 s timeout")
	stdout, code := run(t, "auth", "node-creds", "n1", "--data", data)
	require.Equal(t, 0, code)
	file, err := os.ReadFile(n1creds)
	require.NoError(t, err)
	require.Equal(t, string(file), stdout, "node credentials are deterministic")

	// The test watches heartbeats as the control user.
	opts, err := natsauth.ConnectOptions(control)
	require.NoError(t, err)
	nc, err := nats.Connect(s.natsURL(), opts...)
	require.NoError(t, err)
	defer nc.Close()
	beats, err := nc.SubscribeSync("cairn.status.*.node.*")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	startAgent(t, s, agentOpts{extra: []string{"--creds", n1creds, "--heartbeat-interval", "200ms"}})
	m, err := beats.NextMsg(15 * time.Second)
	require.NoError(t, err, "no heartbeat from the agent")
	require.Equal(t, "cairn.status.n1.node.n1", m.Subject)
	require.Contains(t, string(m.Data), `"node":"n1"`)
	require.Eventually(t, func() bool { return nodeState(t, s, "n1") == "online" }, 10*time.Second, 50*time.Millisecond, "n1 never online")
	stayedOnline(t, s, "n1")

	// n1's credentials cannot run n2's agent: its consumer on cairn.node.n2.> is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wrong := exec.CommandContext(ctx, cairnBin, "agent", "--node", "n2", "--nats", s.natsURL(), "--creds", n1creds, "--revision-dir", t.TempDir())
	wout, err := wrong.CombinedOutput()
	require.Error(t, err, "agent n2 ran on n1's credentials:\n%s", wout)
	require.NoError(t, ctx.Err(), "agent n2 did not give up")
	require.Contains(t, string(wout), "cairn.node.n2.>")

	// The nats CLI: the control user with --nkey; a node's user with --user and --nkey.
	if natsCLI, err := exec.LookPath("nats"); err == nil {
		out, err := exec.Command(natsCLI, "--server", s.natsURL(), "--nkey", control, "req", "cairn.cmd.node.set-state", `{"name":"n1","state":"online"}`, "--raw").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), `"ok":true`)
		out, err = exec.Command(natsCLI, "--server", s.natsURL(), "--user", "n1", "--nkey", n1creds, "pub", "cairn.status.n1.drbd.r1", "{}").CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(natsCLI, "--server", s.natsURL(), "--nkey", n1creds, "pub", "cairn.status.n1.drbd.r1", "{}").CombinedOutput()
		require.Error(t, err, "a node key without its name connected: %s", out)
	}

	// Without credentials the agent cannot connect at all.
	aout, err := exec.Command(cairnBin, "agent", "--node", "n1", "--nats", s.natsURL()).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(aout), "Authorization Violation")
}
