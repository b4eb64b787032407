package test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/projections"
)

// setViewsFormat rewrites the views format a stopped serve's store records ("": none,
// as every store before formats were recorded).
func setViewsFormat(t *testing.T, data, format string) {
	raw, err := pebble.Open(filepath.Join(data, "views"), &pebble.Options{})
	require.NoError(t, err)
	if format == "" {
		require.NoError(t, raw.Delete([]byte("m/format"), pebble.Sync))
	} else {
		require.NoError(t, raw.Set([]byte("m/format"), []byte(format), pebble.Sync))
	}
	require.NoError(t, raw.Close())
}

// Views of an older format are rebuilt from the stream when serve starts, before it
// serves anything, with no manual step: the same digest as before, every lookup there.
// Views of a newer format refuse to start, naming both formats, and are left as they
// are.
func TestServeRebuildsViewsOfAnOlderFormat(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data)
	cmd := func(verb, body string) {
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL())
		require.Equal(t, 0, code, out)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	cmd("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	cmd("sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`)
	cmd("rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thin"}`)
	cmd("rg.spawn", `{"resource_group":"rg1","name":"r1","size_kib":4096}`)
	_, before := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
	s.stop()

	setViewsFormat(t, data, "") // as a store written before formats were recorded
	s.start()
	assert.Contains(t, s.log.String(), "views of an older format: rebuilding them")
	_, after := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
	assert.JSONEq(t, before, after, "rebuilt from the stream: the same views")
	status, _ := httpJSON(t, "GET", s.url("/cairn/v1/resources/r1"), "")
	assert.Equal(t, 200, status)
	s.stop()
	s.start()
	assert.NotContains(t, s.log.String(), "rebuilding them", "a store of this format is not rebuilt again")
	s.stop()

	setViewsFormat(t, data, strconv.Itoa(projections.ViewsFormat+1))
	out, err := exec.Command(cairnBin, s.args...).CombinedOutput()
	require.Error(t, err, "a serve started on views of a newer format:\n%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("the store is format %d, this cairn reads format %d", projections.ViewsFormat+1, projections.ViewsFormat))
}

// node.remove deletes the node's desired-state consumer (before, it lived on for an
// hour), and --agent-consumer-idle sets how long one outlives its agent's last pull.
func TestRemovedNodesConsumerIsDeleted(t *testing.T) {
	s := startServe(t, t.TempDir(), "--agent-consumer-idle", "45s", "--heartbeat-timeout", "2s")
	out, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code, out)
	out, code = run(t, "cmd", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "--nats", s.natsURL())
	require.Equal(t, 0, code, out)
	agent := startAgent(t, s, agentOpts{node: "n1", extra: []string{"--heartbeat-interval", "300ms"}})
	nc, err := nats.Connect(s.natsURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var info *jetstream.ConsumerInfo
	require.Eventually(t, func() bool {
		c, err := js.Consumer(context.Background(), "CAIRN_NODES", "agent-n1")
		if err != nil {
			return false
		}
		info, err = c.Info(context.Background())
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the agent attached")
	assert.Equal(t, 45*time.Second, info.Config.InactiveThreshold)
	require.NoError(t, agent.Process.Kill())
	_, _ = agent.Process.Wait()
	out, code = run(t, "cmd", "node.remove", `{"name":"n1"}`, "--nats", s.natsURL())
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool {
		_, err := js.Consumer(context.Background(), "CAIRN_NODES", "agent-n1")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	}, 15*time.Second, 100*time.Millisecond, "the removed node's consumer is deleted")

	// An agent that runs before its node is added keeps its consumer (it pulls).
	startAgent(t, s, agentOpts{node: "n2", extra: []string{"--heartbeat-interval", "300ms"}})
	require.Eventually(t, func() bool {
		_, err := js.Consumer(context.Background(), "CAIRN_NODES", "agent-n2")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "n2's agent attached")
	assert.Never(t, func() bool {
		_, err := js.Consumer(context.Background(), "CAIRN_NODES", "agent-n2")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	}, 6*time.Second, 200*time.Millisecond, "a running agent's consumer is never reaped")
}
