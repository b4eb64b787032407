package test

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOperatorFlowThroughCLIAndHTTP(t *testing.T) {
	s := startServe(t, t.TempDir())
	nats := []string{"--nats", s.natsURL()}
	cmd := func(verb, body string, extra ...string) (reply, int) {
		out, code := run(t, append(append([]string{"cmd", verb, body}, nats...), extra...)...)
		return decode[reply](t, out), code
	}

	r, code := cmd("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":2,"parity_chunks":1}`, "--actor", "alice")
	require.Equal(t, 0, code)
	require.True(t, r.OK)
	for i, n := range []string{"n1", "n2", "n3"} {
		body := fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d","failure_domain":"RACK%d","role":"storage"}`, n, i+1, i+1, i%2+1)
		r, code = cmd("node.add", body, "--actor", "alice", "--command-id", "add-"+n)
		require.Equal(t, 0, code, "%+v", r.Error)
		assert.Equal(t, "add-"+n, r.CommandID)
	}
	// a refusal exits 1 and says why
	r, code = cmd("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1","failure_domain":"RACK1"}`)
	assert.Equal(t, 1, code)
	assert.Equal(t, "already_exists", r.Error.Code)

	// commands over HTTP, with the actor from the header
	status, body := httpJSON(t, "POST", s.url("/cairn/v1/commands/node.add"), `{"name":"n4","host":"h4","address":"10.0.0.4","failure_domain":"RACK2"}`,
		"Cairn-Actor", "bob", "Cairn-Command-Id", "add-n4")
	require.Equal(t, 200, status, body)
	status, body = httpJSON(t, "POST", s.url("/cairn/v1/commands/node.add"), `{"name":"n5","host":"h5","address":"nowhere"}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `"field":"address"`)
	status, _ = httpJSON(t, "POST", s.url("/cairn/v1/commands/node.add"), `{"name":"n1","host":"h1","address":"10.0.0.1","failure_domain":"RACK1"}`)
	assert.Equal(t, 409, status)
	status, _ = httpJSON(t, "POST", s.url("/cairn/v1/commands/node.fly"), `{}`)
	assert.Equal(t, 404, status)
	status, _ = httpJSON(t, "POST", s.url("/cairn/v1/commands/node.remove"), `{"name":"ghost"}`)
	assert.Equal(t, 404, status)

	// reads
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/nodes"), "")
	require.Equal(t, 200, status)
	nodes := decode[struct {
		Nodes []struct {
			Name string `json:"name"`
			Spec struct {
				Host          string `json:"host"`
				FailureDomain string `json:"failure_domain"`
			} `json:"spec"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"nodes"`
	}](t, body)
	require.Len(t, nodes.Nodes, 4)
	assert.Equal(t, "n2", nodes.Nodes[1].Name)
	assert.Equal(t, "h2", nodes.Nodes[1].Spec.Host)
	assert.Equal(t, "RACK2", nodes.Nodes[1].Spec.FailureDomain)
	assert.Equal(t, "online", nodes.Nodes[1].Status.State)
	status, _ = httpJSON(t, "GET", s.url("/cairn/v1/nodes/n3"), "")
	assert.Equal(t, 200, status)
	status, _ = httpJSON(t, "GET", s.url("/cairn/v1/nodes/zz"), "")
	assert.Equal(t, 404, status)
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/cluster"), "")
	assert.Equal(t, 200, status)
	assert.Contains(t, body, `"data_chunks":2`)
	status, body = httpJSON(t, "GET", s.url("/metrics"), "")
	assert.Equal(t, 200, status)
	assert.Contains(t, body, `cairn_commands_total{outcome="already_exists",verb="node.add"}`)

	// the audit shows every event with its command id and actor
	out, code := run(t, append([]string{"audit", "--json"}, nats...)...)
	require.Equal(t, 0, code)
	type rec struct {
		Seq       uint64 `json:"seq"`
		Type      string `json:"type"`
		Actor     string `json:"actor"`
		CommandID string `json:"command_id"`
		Subject   string `json:"subject"`
	}
	var recs []rec
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		recs = append(recs, decode[rec](t, sc.Text()))
	}
	// Each node.add of a failure-domain cluster: node.added, the claim on its host and
	// command.checked carrying its read of the cluster (docs/commands.md).
	require.Len(t, recs, 13)
	assert.Equal(t, rec{1, "cluster.created", "alice", recs[0].CommandID, "cairn.ev.cluster.c1"}, recs[0])
	assert.Equal(t, rec{2, "node.added", "alice", "add-n1", "cairn.ev.node.n1"}, recs[1])
	assert.Equal(t, rec{3, "host.changed", "alice", "add-n1", "cairn.ev.host.h1"}, recs[2])
	assert.Equal(t, rec{4, "command.checked", "alice", "add-n1", "cairn.ev.command.checked"}, recs[3])
	assert.Equal(t, rec{11, "node.added", "bob", "add-n4", "cairn.ev.node.n4"}, recs[10])

	out, _ = run(t, append([]string{"audit", "--actor", "bob"}, nats...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out) // header + bob's node.add
	assert.Contains(t, lines[1], "add-n4")
	out, _ = run(t, append([]string{"audit", "--json", "--from-seq", "2", "--to-seq", "3"}, nats...)...)
	assert.Equal(t, 2, strings.Count(out, "\n"))
	out, _ = run(t, append([]string{"audit", "--json", "--subject", "cairn.ev.node.n2"}, nats...)...)
	assert.Equal(t, 1, strings.Count(out, "\n"))
	assert.Contains(t, out, "add-n2")
	out, code = run(t, append([]string{"audit", "--from-seq", "x"}, nats...)...)
	assert.Equal(t, 2, code)

	status, body = httpJSON(t, "GET", s.url("/cairn/v1/events?type=node.added&command_id=add-n3"), "")
	require.Equal(t, 200, status)
	assert.Equal(t, 1, strings.Count(body, `"seq"`), body)
	status, _ = httpJSON(t, "GET", s.url("/cairn/v1/events?from_seq=abc"), "")
	assert.Equal(t, 400, status)

	// Pages of the audit: a full page names where the next one starts.
	type page struct {
		Events []rec   `json:"events"`
		Next   *uint64 `json:"next"`
	}
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/events?limit=5&from_seq=3"), "")
	require.Equal(t, 200, status, body)
	p := decode[page](t, body)
	require.Len(t, p.Events, 5)
	require.NotNil(t, p.Next)
	assert.Equal(t, uint64(8), *p.Next)
	status, body = httpJSON(t, "GET", s.url(fmt.Sprintf("/cairn/v1/events?limit=10&from_seq=%d", *p.Next)), "")
	require.Equal(t, 200, status, body)
	p = decode[page](t, body)
	require.Len(t, p.Events, 6, "8..13, the rest")
	assert.Nil(t, p.Next, "the last page")
	// A command's events by its id, read from the sequences the views index; within a
	// sequence range it does not cover, none.
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/events?command_id=add-n4"), "")
	require.Equal(t, 200, status, body)
	assert.Equal(t, []uint64{11, 12, 13}, []uint64{decode[page](t, body).Events[0].Seq, decode[page](t, body).Events[1].Seq, decode[page](t, body).Events[2].Seq})
	status, body = httpJSON(t, "GET", s.url("/cairn/v1/events?command_id=add-n4&to_seq=10"), "")
	require.Equal(t, 200, status, body)
	assert.Empty(t, decode[page](t, body).Events)
}

func TestNatsCLIGetsTheSameReply(t *testing.T) {
	natsCLI := testtools.Path(t, "nats")
	s := startServe(t, t.TempDir())
	req := func(subject, body string, extra ...string) reply {
		args := append([]string{"--server", s.natsURL(), "req", subject, body, "--raw"}, extra...)
		out, err := exec.Command(natsCLI, args...).Output()
		require.NoError(t, err)
		return decode[reply](t, string(out))
	}
	require.True(t, req("cairn.cmd.cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	r := req("cairn.cmd.node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "-H", "Cairn-Command-Id:nats-1", "-H", "Cairn-Actor:ops")
	require.True(t, r.OK)
	assert.Equal(t, "nats-1", r.CommandID)
	again := req("cairn.cmd.node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "-H", "Cairn-Command-Id:nats-1")
	assert.Equal(t, r, again)
	bad := req("cairn.cmd.node.add", `{"name":"n1"`)
	assert.Equal(t, "invalid_argument", bad.Error.Code)
	out, _ := run(t, "audit", "--nats", s.natsURL(), "--actor", "ops", "--json")
	assert.Contains(t, out, `"command_id":"nats-1"`)
}

func TestDomainsTolerance(t *testing.T) {
	out, code := run(t, "domains", "tolerance", "--scheme", "4+1", "--domains", "4")
	require.Equal(t, 0, code)
	assert.Equal(t, "4+1 on 4 domains: 1 node total (at most 2 chunk(s) of a stripe per domain)\n", out)
	out, code = run(t, "domains", "tolerance", "--scheme", "4+2", "--domains", "6", "--json")
	require.Equal(t, 0, code)
	tol := decode[struct {
		Verdict      string `json:"verdict"`
		WholeDomains int    `json:"whole_domains"`
		CanActivate  bool   `json:"can_activate"`
	}](t, out)
	assert.Equal(t, "2 whole domains", tol.Verdict)
	assert.Equal(t, 2, tol.WholeDomains)
	out, _ = run(t, "domains", "tolerance", "--scheme", "1+2", "--domains", "3")
	assert.Contains(t, out, "cannot activate (needs at least 4 domains)")
	_, code = run(t, "domains", "tolerance", "--scheme", "3+1", "--domains", "4")
	assert.Equal(t, 2, code)
}
