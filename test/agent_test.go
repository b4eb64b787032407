package test

import (
	"os/exec"
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
	state := func() string {
		status, body := httpJSON(t, "GET", s.url("/cairn/v1/nodes/n1"), "")
		require.Equal(t, 200, status)
		return decode[struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}](t, body).Status.State
	}
	waitFor := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return state() == want }, 10*time.Second, 50*time.Millisecond, "node n1 never %s", want)
	}

	agent := start()
	time.Sleep(1500 * time.Millisecond) // longer than the timeout: heartbeats keep it online
	require.Equal(t, "online", state())
	_ = agent.Process.Signal(syscall.SIGKILL)
	_ = agent.Wait()
	waitFor("offline")
	start()
	waitFor("online")

	out, _ := run(t, "audit", "--nats", s.natsURL(), "--type", "node.state-changed", "--actor", "watchdog", "--json")
	require.Contains(t, out, `"state":"offline"`)
	require.Contains(t, out, `"state":"online"`)
}
