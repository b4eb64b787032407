package test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A six-host, three-domain cluster built and activated with the real binary; the
// domain balance over HTTP; an unbalancing add refused.
func TestFailureDomainClusterEndToEnd(t *testing.T) {
	s := startServe(t, t.TempDir())
	cmd := func(verb, body string) (reply, int) {
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL())
		return decode[reply](t, out), code
	}
	_, code := cmd("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":2,"parity_chunks":1}`)
	require.Equal(t, 0, code)
	for i := 1; i <= 6; i++ {
		r, code := cmd("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.1.%d","failure_domain":"AZ%d"}`, i, i, i, (i+1)%3+1))
		require.Equal(t, 0, code, "%+v", r.Error)
	}
	r, code := cmd("cluster.activate", `{}`)
	require.Equal(t, 0, code, "%+v", r.Error)

	status, body := httpJSON(t, "GET", s.url("/cairn/v1/domains"), "")
	require.Equal(t, 200, status)
	dv := decode[struct {
		Activated bool   `json:"activated"`
		Verdict   string `json:"verdict"`
		Domains   []struct {
			Label string   `json:"label"`
			ID    int      `json:"id"`
			Hosts []string `json:"hosts"`
		} `json:"domains"`
	}](t, body)
	assert.True(t, dv.Activated)
	assert.Equal(t, "balanced", dv.Verdict)
	require.Len(t, dv.Domains, 3)
	assert.Equal(t, "AZ1", dv.Domains[0].Label)
	assert.Equal(t, []string{"h2", "h5"}, dv.Domains[0].Hosts)
	assert.Equal(t, 2, dv.Domains[0].ID, "AZ1 first appeared with the second node")

	status, body = httpJSON(t, "GET", s.url("/cairn/v1/placement"), "")
	require.Equal(t, 200, status)
	plan := decode[struct {
		VolumeStores []struct {
			Primary   struct{ Host, Domain string } `json:"primary"`
			Secondary struct{ Host, Domain string } `json:"secondary"`
		} `json:"volume_stores"`
		Invariant string `json:"failover_invariant"`
		Tolerance struct {
			Verdict string `json:"verdict"`
		} `json:"tolerance"`
		JournalCopies int `json:"journal_copies"`
	}](t, body)
	require.Len(t, plan.VolumeStores, 6)
	for _, vs := range plan.VolumeStores {
		assert.NotEqual(t, vs.Primary.Domain, vs.Secondary.Domain, "secondary of %s", vs.Primary.Host)
	}
	assert.Equal(t, "ok", plan.Invariant)
	assert.Equal(t, "1 whole domain", plan.Tolerance.Verdict)
	assert.Equal(t, 4, plan.JournalCopies)

	status, body = httpJSON(t, "GET", s.url("/cairn/v1/volume-stores"), "")
	require.Equal(t, 200, status)
	rec := decode[struct {
		VolumeStores []struct{ Primary, Secondary string } `json:"volume_stores"`
		JournalSets  []struct {
			Owner   string   `json:"owner"`
			Members []string `json:"members"`
		} `json:"journal_sets"`
	}](t, body)
	require.Len(t, rec.VolumeStores, 6)
	require.Len(t, rec.JournalSets, 6)

	out, code := run(t, "domains", "status", "--http", "http://"+s.httpAddr)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"verdict": "balanced"`)
	out, code = run(t, "domains", "stores", "--http", "http://"+s.httpAddr)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"journal_sets"`)
	out, code = run(t, "domains", "health", "--http", "http://"+s.httpAddr)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"status": "ok"`)
	_, code = run(t, "domains", "plan", "--http", "http://"+s.httpAddr)
	require.Equal(t, 0, code)

	health := func() (string, []string) {
		status, body := httpJSON(t, "GET", s.url("/cairn/v1/health"), "")
		require.Equal(t, 200, status)
		h := decode[struct {
			Health struct {
				Status  string   `json:"status"`
				Reasons []string `json:"reasons"`
			} `json:"health"`
		}](t, body)
		return h.Health.Status, h.Health.Reasons
	}
	st, _ := health()
	assert.Equal(t, "ok", st)
	for _, n := range []string{"n2", "n5"} { // the whole of AZ1
		_, code := cmd("node.set-state", fmt.Sprintf(`{"name":%q,"state":"offline"}`, n))
		require.Equal(t, 0, code)
	}
	st, reasons := health()
	assert.Equal(t, "degraded", st, "%v", reasons)
	// a failed device in another domain is one outage too much for 2+1
	_, code = cmd("node.set-state", `{"name":"n1","devices_failed":1}`)
	require.Equal(t, 0, code)
	st, _ = health()
	assert.Equal(t, "suspended", st)
	_, code = cmd("node.set-state", `{"name":"n1","devices_failed":0}`)
	require.Equal(t, 0, code)
	_, code = cmd("node.set-state", `{"name":"n1","state":"offline"}`)
	require.Equal(t, 0, code)
	st, _ = health()
	assert.Equal(t, "suspended", st)
	for _, n := range []string{"n1", "n2", "n5"} {
		_, code := cmd("node.set-state", fmt.Sprintf(`{"name":%q,"state":"online"}`, n))
		require.Equal(t, 0, code)
	}

	r, code = cmd("node.add", `{"name":"n7","host":"h7","address":"10.0.1.7","failure_domain":"AZ1"}`)
	require.Equal(t, 0, code)
	r, code = cmd("node.add", `{"name":"n8","host":"h8","address":"10.0.1.8","failure_domain":"AZ1"}`)
	assert.Equal(t, 1, code)
	assert.Equal(t, "domain_unbalanced", r.Error.Code)
	status, _ = httpJSON(t, "POST", s.url("/cairn/v1/commands/node.add"), `{"name":"n8","host":"h8","address":"10.0.1.8","failure_domain":"AZ1"}`)
	assert.Equal(t, 422, status)
}

// The same cluster driven entirely with the nats CLI: built, activated, loaded with
// volumes, a removal refused (the node holds a volume) and one accepted.
func TestFailureDomainClusterWithTheNatsCLI(t *testing.T) {
	natsCLI := testtools.Path(t, "nats")
	s := startServe(t, t.TempDir())
	req := func(verb, body string) reply {
		out, err := exec.Command(natsCLI, "--server", s.natsURL(), "req", "cairn.cmd."+verb, body, "--raw").Output()
		require.NoError(t, err)
		return decode[reply](t, string(out))
	}
	require.True(t, req("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":2,"parity_chunks":1}`).OK)
	for i := 1; i <= 6; i++ {
		r := req("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.2.%d","failure_domain":"RACK%d"}`, i, i, i, (i-1)/2+1))
		require.True(t, r.OK, "%+v", r.Error)
	}
	require.True(t, req("cluster.activate", `{}`).OK)
	for i := 1; i <= 6; i++ {
		require.True(t, req("lvol.create", fmt.Sprintf(`{"name":"v%d","node":"n%d","size_kib":1048576}`, i, i)).OK)
	}
	require.True(t, req("node.add", `{"name":"n7","host":"h7","address":"10.0.2.7","failure_domain":"RACK1"}`).OK)
	r := req("node.remove", `{"name":"n1"}`)
	require.False(t, r.OK)
	assert.Equal(t, "precondition_failed", r.Error.Code)
	assert.Contains(t, r.Error.Message, "holds 1 logical volume(s)")
	r = req("node.remove", `{"name":"n7"}`)
	require.True(t, r.OK, "%+v", r.Error)
	assert.Equal(t, "placement.updated", r.Events[1].Type)
}
