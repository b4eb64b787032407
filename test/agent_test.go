package test

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `cairn agent` heartbeats keep a node online; when the agent dies the watchdog in
// `cairn serve` marks it offline, and back online when the agent returns.
func TestAgentHeartbeatsDriveNodeState(t *testing.T) {
	s := startServe(t, t.TempDir(), "--heartbeat-timeout", "1s")
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)
	_, code = run(t, "cmd", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)

	start := func() *exec.Cmd {
		return startAgent(t, s, agentOpts{extra: []string{"--heartbeat-interval", "200ms"}})
	}
	state := func() string { return nodeState(t, s, "n1") }
	waitFor := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return state() == want }, 10*time.Second, 50*time.Millisecond, "node n1 never %s", want)
	}

	agent := start()
	waitFor("online")
	stayedOnline(t, s, "n1")
	_ = agent.Process.Signal(syscall.SIGKILL)
	_ = agent.Wait()
	waitFor("offline")
	start()
	waitFor("online")

	out, _ := run(t, "audit", "--nats", s.natsURL(), "--type", "node.state-changed", "--actor", "watchdog", "--json")
	require.Contains(t, out, `"state":"offline"`)
	require.Contains(t, out, `"state":"online"`)
}

// An agent started with a --node the cluster does not have says so (its attach reply
// carries the warning) instead of running silently.
func TestAgentOfAnUnknownNodeSaysSo(t *testing.T) {
	s := startServe(t, t.TempDir())
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)
	log := &syncBuffer{}
	a := exec.Command(cairnBin, "agent", "--node", "ghost", "--nats", s.natsURL(), "--revision-dir", t.TempDir())
	a.Stdout, a.Stderr = log, log
	require.NoError(t, a.Start())
	t.Cleanup(func() { _ = a.Process.Kill(); _ = a.Wait() })
	require.Eventually(t, func() bool {
		return strings.Contains(log.String(), "node ghost is not in the cluster: nothing is meant for it until node.add")
	}, 15*time.Second, 50*time.Millisecond, "agent log:\n%s", log.String())
}
