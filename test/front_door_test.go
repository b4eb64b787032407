package test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a newcomer meets first (issue 30's front door): `make build` stamps the version
// (`cairn version` printed "dev"), the serve's address in a browser is the dashboard (it
// was a JSON 404), and /metrics has a gauge of nodes by state to alert on.
func TestFrontDoor(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cairn")
	out, err := exec.Command("make", "-s", "-C", "..", "build", "BIN="+bin).CombinedOutput()
	require.NoError(t, err, string(out))
	describe, err := exec.Command("git", "-C", "..", "describe", "--tags", "--always", "--dirty").Output()
	require.NoError(t, err)
	version, err := exec.Command(bin, "version").Output()
	require.NoError(t, err)
	assert.Equal(t, "cairn "+strings.TrimSpace(string(describe)), strings.TrimSpace(string(version)))

	s := startServe(t, t.TempDir())
	code, body := httpJSON(t, "GET", s.url("/"), "")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "<title>Cairn</title>", "GET / does not lead to the dashboard")
	resp, err := http.Get(s.url("/ui/app.js"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'", resp.Header.Get("Content-Security-Policy"),
		"the dashboard's files carry the policy docs/dashboard.md states")

	_, c := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, c)
	_, c = run(t, "cmd", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "--nats", s.natsURL())
	require.Equal(t, 0, c)
	code, body = httpJSON(t, "GET", s.url("/metrics"), "")
	require.Equal(t, 200, code)
	assert.Contains(t, body, `cairn_nodes{state="online"} 1`)
	assert.Contains(t, body, `cairn_nodes{state="offline"} 0`)
	assert.NotContains(t, body, "cairn_agent_", "the serve exports no agent series (always 0 there)")
	assert.NotContains(t, body, "cairn_zpool_")

	// The agent's own /metrics: its series and the process's, none of the serve's.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/cairn"), 0o755))
	startAgent(t, s, agentOpts{node: "n1", root: root, kernel: "sim", extra: []string{"--metrics", addr}})
	var agentMetrics string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false // not listening yet
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		agentMetrics = string(b)
		return resp.StatusCode == 200 && strings.Contains(agentMetrics, "cairn_agent_reconcile_queue")
	}, 10*time.Second, 100*time.Millisecond)
	assert.Contains(t, agentMetrics, "process_cpu_seconds_total")
	assert.NotContains(t, agentMetrics, "cairn_commands_total")
	assert.NotContains(t, agentMetrics, "cairn_nodes")
}

// Every duration a log line carries says its unit in its name (docs: "every duration
// ends in _ms"; zerolog writes them as milliseconds): a Dur field named otherwise fails.
func TestLoggedDurationsSayMilliseconds(t *testing.T) {
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			if d != nil && d.IsDir() && err == nil {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Dur" {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					name, _ := strconv.Unquote(lit.Value)
					if !regexp.MustCompile(`_ms$`).MatchString(name) {
						bad = append(bad, fset.Position(call.Pos()).String()+": "+name)
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, bad, "logged durations without _ms")
}

// `cairn cmd VERB --help` shows the verb's fields from its schema (it showed only the
// flags); `cairn cmd --help` lists every verb.
func TestCmdHelpShowsTheVerbsFields(t *testing.T) {
	out, code := run(t, "cmd", "rd.create", "--help")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "rd.create: a resource definition")
	assert.Regexp(t, `(?m)^\s+name\s+name \(required\)$`, out)
	assert.Regexp(t, `(?m)^\s+resource_group\s+name$`, out)
	assert.NotContains(t, out, "command_id")
	// A verb that takes one of several fields says so; a field's description follows it.
	out, code = run(t, "cmd", "rd.delete", "--help")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `(?m)^\s+at least one of: name, resource$`, out)
	assert.Regexp(t, `(?m)^\s+resource\s+name: the definition, as the other resource verbs name it`, out)
	out, code = run(t, "cmd", "--help")
	require.Equal(t, 0, code, out)
	for _, verb := range []string{"cluster.create", "rd.snapshot-multi", "rd.restore-volumes", "vd.resize"} {
		assert.Contains(t, out, "\n  "+verb+"\n")
	}
}
