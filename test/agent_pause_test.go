package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SIGSTOP of a node agent while its definition changes several times, then SIGCONT
// (issue 29's pause scenarios): the agent catches up to the latest desired state and
// never carries out an older one after a newer (the revisions it reports never go back),
// its disk ends at the last size, and the data on both disks is the same.
func TestAgentPausedWhileItsDefinitionChanges(t *testing.T) {
	c := startSimCluster(t, 3)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	disks := diskfulNodes(rv)
	paused := disks[1]

	nc, err := nats.Connect(c.s.natsURL())
	require.NoError(t, err)
	defer nc.Close()
	var mu sync.Mutex
	var revisions []uint64
	var last drbd.Status
	sub, err := nc.Subscribe(fmt.Sprintf("cairn.status.%s.drbd.r1", paused), func(m *nats.Msg) {
		var st drbd.Status
		if json.Unmarshal(m.Data, &st) == nil && st.Phase == drbd.PhaseApplied {
			mu.Lock()
			revisions = append(revisions, st.Revision)
			last = st
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()

	agent := c.agents[paused]
	require.NoError(t, agent.Process.Signal(syscall.SIGSTOP))
	for _, size := range []int{8192, 12288, 16384} {
		c.cmd("vd.resize", fmt.Sprintf(`{"resource":"r1","volume":0,"size_kib":%d}`, size))
	}
	c.cmd("rd.modify", `{"name":"r1","drbd_options":{"max_buffers":8000}}`)
	time.Sleep(time.Second) // the changes queue up for the frozen agent
	require.NoError(t, agent.Process.Signal(syscall.SIGCONT))

	require.Eventually(t, func() bool {
		rv := c.resource("r1")
		for _, r := range rv.Replicas {
			if r.Node == paused && r.Observed != nil && len(r.Observed.Volumes) == 1 && r.Observed.Volumes[0].SizeKiB >= 16384 {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "the paused agent never grew its disk to the last size: %+v", c.resource("r1").Replicas)
	require.NoError(t, c.write("r1", disks[0], 16))
	require.Eventually(t, func() bool {
		a, errA := os.ReadFile(filepath.Join(c.root(disks[0]), "var/lib/cairn/thin", "r1_00000.img"))
		b, errB := os.ReadFile(filepath.Join(c.root(disks[1]), "var/lib/cairn/thin", "r1_00000.img"))
		return errA == nil && errB == nil && len(a) >= 16384*1024 && len(b) >= 16384*1024 && bytes.Equal(a[:16384*1024], b[:16384*1024])
	}, 30*time.Second, 100*time.Millisecond, "the two disks never held the same data: %s", func() string { b, _ := json.Marshal(c.resource("r1").Replicas); return string(b) }())
	out, code := run(t, "sim", "check", "--sim-dir", filepath.Join(c.base, "sim"))
	assert.Equal(t, 0, code, "the data oracle found disks declared in sync with different data:\n%s", out)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, revisions)
	for i := 1; i < len(revisions); i++ {
		assert.GreaterOrEqual(t, revisions[i], revisions[i-1], "the agent carried out revision %d after %d: %v", revisions[i], revisions[i-1], revisions)
	}
	t.Logf("revisions the paused agent reported applied: %v (last %d)", revisions, last.Revision)
}
