package test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `cairn wait` as a new user meets it: waiting for a clone right after rd.clone was
// accepted waits (the target exists only once its snapshot is taken) and settles with
// the data on both disks; a name that is nothing says so at once; a pool whose import
// fails is reported failed at once on stderr, and the timeout says what it was still
// waiting for, not only "not settled".
func TestWaitSaysWhatItWaitsFor(t *testing.T) {
	c := startSimCluster(t, 2)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 100))

	c.cmd("rd.clone", `{"resource":"r1","target":"r1c"}`)
	out, errOut, code := runAll(t, "wait", "resource", "r1c", "--timeout", "90s", "--nats", c.s.natsURL())
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Contains(t, out, "r1c: settled")
	assert.NotContains(t, errOut, "no resource definition")
	c.sameData("r1c", 4096, []string{"n1", "n2"})

	out, errOut, code = runAll(t, "wait", "resource", "nothing", "--timeout", "5s", "--nats", c.s.natsURL())
	assert.Equal(t, 1, code)
	assert.Contains(t, out+errOut, "no resource definition nothing")

	// n1's agent has no zpool here: its import fails, which the wait reports as soon as the
	// agent does, and goes on waiting (the agent retries) until the timeout names it.
	c.cmd("pool.create", `{"name":"tank","devices":["/dev/sdb"],"nodes":["n1","n2"]}`)
	c.cmd("pool.import", `{"pool":"tank","node":"n1"}`)
	began := time.Now()
	out, errOut, code = runAll(t, "wait", "pool", "tank", "--timeout", "8s", "--nats", c.s.natsURL())
	assert.Equal(t, 1, code, out+errOut)
	assert.Contains(t, errOut, "tank: waiting: n1: failed [", "the failure is reported while waiting")
	assert.Contains(t, errOut, "(the agent retries)")
	last := strings.TrimSpace(errOut[strings.LastIndex(strings.TrimSpace(errOut), "\n")+1:])
	assert.Regexp(t, `^cairn: tank: not settled after 8s: n1: failed \[[a-z_]+\]: .+ \(the agent retries\)$`, last, "the timeout says what it was waiting for")
	assert.Less(t, time.Since(began), 20*time.Second)
}
