package test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cluster as it was (issue 30): GET /cairn/v1/at/{seq}/… answers the reads on the
// views right after the event at seq, rebuilt from the stream; …/diff compares that
// moment with now or with another one.
func TestViewsAsTheyWereAtASequence(t *testing.T) {
	s := startServe(t, t.TempDir())
	cmd := func(verb, body string) {
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL())
		require.Equal(t, 0, code, out)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	cmd("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	cmd("node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`)
	_, body := httpJSON(t, "GET", s.url("/cairn/v1/health"), "")
	then := decode[struct {
		Seq uint64 `json:"seq"`
	}](t, body).Seq
	cmd("node.remove", `{"name":"n2"}`)
	cmd("node.add", `{"name":"n3","host":"h3","address":"10.0.0.3"}`)
	cmd("node.modify", `{"name":"n1","properties":{"Aux/rack":"r7"}}`)

	names := func(path string) []string {
		t.Helper()
		code, body := httpJSON(t, "GET", s.url(path), "")
		require.Equal(t, 200, code, body)
		var out struct {
			Nodes []struct {
				Name string `json:"name"`
			} `json:"nodes"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &out))
		var n []string
		for _, x := range out.Nodes {
			n = append(n, x.Name)
		}
		return n
	}
	assert.Equal(t, []string{"n1", "n2"}, names(fmt.Sprintf("/cairn/v1/at/%d/nodes", then)))
	assert.Equal(t, []string{"n1", "n3"}, names("/cairn/v1/nodes"))
	code, body := httpJSON(t, "GET", s.url(fmt.Sprintf("/cairn/v1/at/%d/nodes/n2", then)), "")
	assert.Equal(t, 200, code, body)

	code, body = httpJSON(t, "GET", s.url(fmt.Sprintf("/cairn/v1/at/%d/diff?with=now", then)), "")
	require.Equal(t, 200, code, body)
	var diff struct {
		Nodes map[string][]string `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &diff))
	assert.Equal(t, []string{"n3"}, diff.Nodes["added"])
	assert.Equal(t, []string{"n2"}, diff.Nodes["removed"])
	assert.Equal(t, []string{"n1"}, diff.Nodes["changed"])

	code, body = httpJSON(t, "GET", s.url("/cairn/v1/at/999999/nodes"), "")
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "holds events up to sequence")
	code, _ = httpJSON(t, "GET", s.url(fmt.Sprintf("/cairn/v1/at/%d/widgets", then)), "")
	assert.Equal(t, 404, code)
}
