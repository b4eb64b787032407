package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContestFromStatus(t *testing.T) {
	c := zpool.Status{Pool: "tank", Node: "n1", Phase: zpool.PhaseContested, GrantSeq: 7, ForeignHostID: "0x2"}
	req, ok := policy.ContestFromStatus("n1", c)
	require.True(t, ok)
	assert.Equal(t, "pool.contest", req.Verb)
	assert.Equal(t, "pool-contest-tank-n1-7", req.CommandID)
	assert.Contains(t, string(req.Body), `"foreign_hostid":"0x2"`)
	_, ok = policy.ContestFromStatus("n2", c) // published for another node
	assert.False(t, ok)
	c.Phase = zpool.PhaseImported
	_, ok = policy.ContestFromStatus("n1", c)
	assert.False(t, ok)
}

func TestContestedReportMarksThePool(t *testing.T) {
	s := servertest.Start(t)
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"pool.create", `{"name":"tank","devices":["/dev/sdb"],"nodes":["n1"]}`},
		{"pool.import", `{"pool":"tank","node":"n1"}`},
		{"pool.create", `{"name":"mark","devices":["/dev/sdc"],"nodes":["n1"]}`},
		{"pool.import", `{"pool":"mark","node":"n1"}`},
	} {
		r := servertest.Submit(s, c[0], c[1])
		require.True(t, r.OK, "%s: %+v", c[0], r.Error)
	}
	body, _ := json.Marshal(zpool.Status{Pool: "tank", Node: "n1", Phase: zpool.PhaseContested, GrantSeq: 4,
		ForeignHostID: "0x2", Error: "hostid 0x2 wrote txg 40"})
	nc := servertest.Client(t, s)
	for range 2 { // a repeated report records the contest once
		require.NoError(t, nc.Publish("cairn.status.n1.zpool.tank", body))
	}
	// A report on another pool after them: reports are folded in order, so once its
	// contest is in, both of tank's were handled.
	mark, _ := json.Marshal(zpool.Status{Pool: "mark", Node: "n1", Phase: zpool.PhaseContested, GrantSeq: 6,
		ForeignHostID: "0x3", Error: "hostid 0x3 wrote txg 7"})
	require.NoError(t, nc.Publish("cairn.status.n1.zpool.mark", mark))
	contested := func(name, hostID string) bool {
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		p, _, _ := v.Pool(name)
		return p.Contested && p.ForeignHostID == hostID
	}
	require.Eventually(t, func() bool { return contested("mark", "0x3") }, 5*time.Second, 20*time.Millisecond)
	assert.True(t, contested("tank", "0x2"))
	assert.Equal(t, uint64(8), servertest.LastSeq(t, s), "one pool.contested event per pool after six setup events")
}
