package test

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// `cairn get` and `cairn describe` (issue 30) against a serve with three sim agents,
// finding it by $CAIRN_HTTP-style --http: tables with a header and a row per object,
// -o json/yaml that decode, wide columns, no colour when not on a terminal, and
// `get events --watch` printing each new event as it is stored.
func TestCLIGetTables(t *testing.T) {
	c := startSimCluster(t, 3)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	get := func(args ...string) string {
		t.Helper()
		out, code := run(t, append(append([]string{}, args...), "--http", c.s.url(""))...)
		require.Equal(t, 0, code, out)
		return out
	}
	lines := func(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

	nodes := lines(get("get", "nodes"))
	require.Len(t, nodes, 4, "a header and three rows")
	assert.Regexp(t, `^NAME\s+HOST\s+DOMAIN\s+STATE\s+FOR\s+FLAGS$`, nodes[0])
	assert.Regexp(t, `^n1\s+h1\s+online\s+`, nodes[1])
	assert.NotContains(t, strings.Join(nodes, "\n"), "\x1b[", "colour without a terminal")
	wide := lines(get("get", "nodes", "-o", "wide"))
	assert.Contains(t, wide[0], "ADDRESS")
	assert.Contains(t, wide[1], "10.0.0.1")

	var asJSON struct {
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(get("get", "nodes", "-o", "json")), &asJSON))
	assert.Len(t, asJSON.Nodes, 3)
	var asYAML map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(get("get", "nodes", "-o", "yaml")), &asYAML))
	assert.Len(t, asYAML["nodes"], 3)

	res := lines(get("get", "resources"))
	require.Len(t, res, 2)
	assert.Regexp(t, `^r1\s+rg2\s+4096 KiB\s+2/2\s+`, res[1])
	assert.Equal(t, 2, strings.Count(res[1], ":UpToDate"), res[1])
	assert.Contains(t, get("get", "domains"), "failure domains are off")

	c.cmd("node.add", `{"name":"n9","host":"h9","address":"10.0.0.9"}`)
	events := lines(get("get", "events", "--limit", "3"))
	require.Len(t, events, 4)
	assert.Contains(t, events[3], "node.added")
	assert.Contains(t, events[3], "cairn.ev.node.n9")

	desc := get("describe", "resource", "r1")
	for _, want := range []string{"Name:        r1", "Replicas:", "UpToDate", "History:", "rd.created", "replica.added"} {
		assert.Contains(t, desc, want)
	}
	_, stderr, code := runAll(t, "get", "widgets", "--http", c.s.url(""))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, `unknown kind "widgets"`)

	// --watch: every event as a row as it is stored.
	w := exec.Command(cairnBin, "get", "events", "--watch", "--limit", "1", "--http", c.s.url(""))
	stdout, err := w.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
	rows := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			rows <- sc.Text()
		}
		close(rows)
	}()
	seen := func(want string) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case line := <-rows:
				if strings.Contains(line, want) {
					return
				}
			case <-deadline:
				t.Fatalf("--watch never printed %q", want)
			}
		}
	}
	seen("cairn.ev.node.n9") // the last event, printed first
	c.cmd("node.add", `{"name":"n10","host":"h10","address":"10.0.0.10"}`)
	seen("cairn.ev.node.n10")
}
