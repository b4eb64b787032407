package commands_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/pools"
	"github.com/cairn-io/cairn/projections"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecidePoolImport(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	node := func(name, state string, since time.Duration) *projections.Node {
		return &projections.Node{Spec: projections.NodeSpec{Name: name}, Status: projections.NodeStatus{State: state, Since: now.Add(-since)}}
	}
	pool := func(owner string) *projections.Pool {
		return &projections.Pool{Name: "tank", Nodes: []string{"n1", "n2"}, Owner: owner}
	}
	contested := pool("n1")
	contested.Contested, contested.ContestReason = true, "hostid 0x2 wrote"
	cases := []struct {
		name     string
		pool     *projections.Pool
		target   *projections.Node
		owner    *projections.Node
		code     string
		msg      string
		previous string
		noop     bool
	}{
		{"free pool", pool(""), node("n2", "online", 0), nil, "", "", "", false},
		{"owner online", pool("n1"), node("n2", "online", 0), node("n1", "online", time.Hour), cairn.CodePreconditionFailed, "imported by n1, which is online", "", false},
		{"owner offline too briefly", pool("n1"), node("n2", "online", 0), node("n1", "offline", 10*time.Second), cairn.CodePreconditionFailed, "offline for 10s only; the grant moves after 30s offline (in 20s)", "", false},
		{"owner offline past the timeout", pool("n1"), node("n2", "online", 0), node("n1", "offline", 31*time.Second), "", "", "n1", false},
		{"exactly at the timeout", pool("n1"), node("n2", "online", 0), node("n1", "offline", 30*time.Second), "", "", "n1", false},
		{"owner left the cluster", pool("n1"), node("n2", "online", 0), nil, "", "", "n1", false},
		{"same owner again", pool("n2"), node("n2", "online", 0), node("n2", "online", 0), "", "", "", true},
		{"target offline", pool(""), node("n2", "offline", 0), nil, cairn.CodePreconditionFailed, "n2 is offline", "", false},
		{"target cannot reach the devices", &projections.Pool{Name: "tank", Nodes: []string{"n1"}}, node("n2", "online", 0), nil, cairn.CodePreconditionFailed, "cannot reach pool tank's devices", "", false},
		{"contested", contested, node("n2", "online", 0), node("n1", "offline", time.Hour), cairn.CodePreconditionFailed, "contested (hostid 0x2 wrote)", "", false},
		{"unknown pool", nil, node("n2", "online", 0), nil, cairn.CodeNotFound, "pool tank does not exist", "", false},
		{"unknown node", pool(""), nil, nil, cairn.CodeNotFound, "node n2 is not in the cluster", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, warnings, err := pools.DecidePoolImport(c.pool, c.target, c.owner, pools.PoolImport{Pool: "tank", Node: "n2"}, now, 30*time.Second)
			if c.code != "" {
				require.Error(t, err)
				assert.Equal(t, c.code, cairn.ErrorCode(err))
				assert.Contains(t, err.Error(), c.msg)
				return
			}
			require.NoError(t, err)
			if c.noop {
				assert.Nil(t, ev)
				assert.NotEmpty(t, warnings)
				return
			}
			require.NotNil(t, ev)
			assert.Equal(t, "n2", ev.Node)
			assert.Equal(t, c.previous, ev.PreviousOwner)
			if c.previous != "" {
				assert.Contains(t, ev.Reason, "previous owner "+c.previous)
			}
		})
	}
}

func TestConcurrentPoolImportsGrantOne(t *testing.T) {
	s := servertest.Start(t)
	must(t, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	must(t, s, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	must(t, s, "node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`)
	must(t, s, "pool.create", `{"name":"tank","devices":["/dev/disk/by-id/a","/dev/disk/by-id/b"],"nodes":["n1","n2"]}`)
	refused(t, s, "pool.create", `{"name":"tank2","devices":["/dev/x"],"nodes":["ghost"]}`, cairn.CodeNotFound, "ghost")
	nc := servertest.Client(t, s)
	for round := range 5 {
		var wg sync.WaitGroup
		replies := make([]admission.Reply, 2)
		for i, n := range []string{"n1", "n2"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = servertest.SendAnswered(t, nc, "pool.import", `{"pool":"tank","node":"`+n+`"}`)
			}()
		}
		wg.Wait()
		ok := 0
		for _, r := range replies {
			if r.OK && len(r.Events) > 0 && r.Events[0].Type == "pool.import-granted" {
				ok++
			} else if !r.OK {
				assert.Equal(t, cairn.CodePreconditionFailed, r.Error.Code)
				assert.Contains(t, r.Error.Message, "which is online")
			}
		}
		assert.Equal(t, 1, ok, "round %d: exactly one import granted: %+v", round, replies)
		must(t, s, "pool.export", `{"pool":"tank"}`)
	}
	// a grant moves only once the owner is offline past the timeout
	must(t, s, "pool.import", `{"pool":"tank","node":"n1"}`)
	must(t, s, "node.set-state", `{"name":"n1","state":"offline"}`)
	refused(t, s, "pool.import", `{"pool":"tank","node":"n2"}`, cairn.CodePreconditionFailed, "the grant moves after 30s offline")
	// contested: the owner's agent reported a foreign writer; no new grant until exported
	must(t, s, "node.set-state", `{"name":"n1","state":"online"}`)
	must(t, s, "pool.contest", `{"pool":"tank","node":"n1","foreign_hostid":"0x2","reason":"hostid 0x2 wrote uberblock txg 12"}`)
	v, err := s.DB.Read()
	require.NoError(t, err)
	p, _, _ := v.Pool("tank")
	v.Close()
	assert.True(t, p.Contested)
	refused(t, s, "pool.import", `{"pool":"tank","node":"n2"}`, cairn.CodePreconditionFailed, "contested")
	refused(t, s, "pool.export", `{"pool":"tank","node":"n2"}`, cairn.CodePreconditionFailed, "granted to n1, not n2")
	must(t, s, "pool.export", `{"pool":"tank","reason":"operator checked: only h1 had it"}`)
	r := must(t, s, "pool.import", `{"pool":"tank","node":"n2"}`)
	assert.Equal(t, "pool.import-granted", r.Events[0].Type)
}
