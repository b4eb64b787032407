package test

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/require"
)

// TestJunkAndNewerEventsInTheStream (issue 11): messages published around admission
// with the nats CLI. A message on an event subject that is not an event is recorded as
// rejected (INVALID in the audit, counted in a metric) and does not jam its subject: the
// next node.add of that node is accepted at once (it failed `unavailable` after 5 s,
// forever). An event of a version this binary cannot read stops the views before it:
// /readyz fails and every command is refused `unavailable`, both naming the event, and
// a restarted serve stays so (it was skipped silently, so serves could diverge).
func TestJunkAndNewerEventsInTheStream(t *testing.T) {
	natsCLI := testtools.Path(t, "nats")
	data := t.TempDir()
	s := startServe(t, data)
	pub := func(subject, body string) {
		t.Helper()
		out, err := exec.Command(natsCLI, "--server", s.natsURL(), "pub", subject, body).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	cmd := func(verb, body string) (reply, int) {
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL(), "--timeout", "10s")
		return decode[reply](t, out), code
	}
	_, code := cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	require.Equal(t, 0, code)

	pub("cairn.ev.node.n5", "not an event")
	start := time.Now()
	r, code := cmd("node.add", `{"name":"n5","host":"h5","address":"10.0.0.5"}`)
	require.Equal(t, 0, code, "%+v", r.Error)
	require.Less(t, time.Since(start), 3*time.Second)
	out, _ := run(t, "audit", "--nats", s.natsURL(), "--subject", "cairn.ev.node.n5")
	require.Contains(t, out, "INVALID: event at seq 2: envelope is not valid JSON")
	require.Contains(t, out, "node.added.v2")
	_, metrics := httpJSON(t, "GET", s.url("/metrics"), "")
	require.Contains(t, metrics, "cairn_projector_events_rejected_total 1")

	// An event a newer cairn wrote: a well-formed envelope, node.added v99.
	pub("cairn.ev.node.n6", `{"id":"0194f0c2-1111-7000-8000-000000000001","type":"node.added","schema_version":99,"subject":"cairn.ev.node.n6",`+
		`"occurred_at":"2026-12-02T00:00:00Z","command_id":"future-1","actor":"cairn-v9","payload":{"name":"n6"}}`)
	// notReady waits for /readyz to answer 503 with want in its reason (a serve that is
	// starting says first that it catches up, then why it stopped).
	notReady := func(want string) string {
		var body string
		require.Eventually(t, func() bool {
			resp, err := http.Get(s.url("/readyz")) // refused while the serve starts
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, want)
		}, 20*time.Second, 50*time.Millisecond, "last: %s", body)
		return body
	}
	body := notReady("node.added v99")
	require.Contains(t, body, "node.added v99 is newer than this binary knows (v2)")
	require.Contains(t, body, "seq 4")
	r, code = cmd("node.add", `{"name":"n7","host":"h7","address":"10.0.0.7"}`)
	require.Equal(t, 1, code)
	require.Equal(t, "unavailable", r.Error.Code)
	require.Contains(t, r.Error.Message, "node.added v99")
	_, metrics = httpJSON(t, "GET", s.url("/metrics"), "")
	require.Contains(t, metrics, "cairn_projector_upgrade_needed 1")
	// It led (the only serve); with views that stopped it may not: it releases the lease
	// and does not take it again (the rolling-upgrade rule, docs/operations.md#upgrades).
	require.Eventually(t, func() bool {
		_, leader := httpJSON(t, "GET", s.url("/cairn/v1/leader"), "")
		_, metrics := httpJSON(t, "GET", s.url("/metrics"), "")
		return !strings.Contains(leader, `"holder"`) && strings.Contains(metrics, "cairn_leader 0")
	}, 10*time.Second, 50*time.Millisecond, "the serve whose views stopped still holds the lease")
	require.Contains(t, s.log.String(), "this serve may not lead: releasing the lease")

	// A restarted serve starts, serves the reason, and stays not ready.
	s.stop()
	s.log.Reset()
	s.cmd = exec.Command(cairnBin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(t, s.cmd.Start())
	body = notReady("node.added v99")
	require.Contains(t, body, "newer than this binary knows")
	// /readyz can answer before the projector's error is logged: wait for the line.
	require.Eventually(t, func() bool { return strings.Contains(s.log.String(), "serving, not ready") }, 10*time.Second, 20*time.Millisecond, "%s", s.log)
}
