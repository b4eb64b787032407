package test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The front door's papercuts: a mistyped subcommand is an error with a suggestion (not
// help and exit 0), `cairn version` prints the version, and client commands take the
// NATS URL from $CAIRN_NATS.
func TestCLIFrontDoor(t *testing.T) {
	_, stderr, code := runAll(t, "auth", "tokn", "list")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown command "tokn" for "cairn auth"; did you mean token?`)
	_, stderr, code = runAll(t, "domain", "status")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "did you mean domains?")
	out, _, code := runAll(t, "auth")
	assert.Equal(t, 0, code, "a group without a subcommand shows its help")
	assert.Contains(t, out, "token")
	out, _, code = runAll(t, "version")
	require.Equal(t, 0, code)
	assert.Regexp(t, `^cairn \S+\n$`, out)

	s := startServe(t, t.TempDir())
	cmd := exec.Command(cairnBin, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	cmd.Env = append(os.Environ(), "CAIRN_NATS="+s.natsURL())
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	require.NoError(t, cmd.Run(), outb.String())
	assert.Contains(t, outb.String(), `"ok": true`)

	// A wrong method on a known path is 405 with Allow; an unknown path 404.
	req, err := http.NewRequest("DELETE", s.url("/cairn/v1/nodes"), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET", resp.Header.Get("Allow"))
	status, _ := httpJSON(t, "GET", s.url("/cairn/v1/commands/node.add"), "")
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	status, _ = httpJSON(t, "GET", s.url("/cairn/v1/nowhere"), "")
	assert.Equal(t, http.StatusNotFound, status)
	// A mistyped verb gets a suggestion.
	out, _ = run(t, "cmd", "node.ad", `{}`, "--nats", s.natsURL())
	assert.Contains(t, out, "did you mean node.add?")
}

// `cairn sim check` prints the data oracle's findings and exits 1 when there is one, 0
// when every pair of disks declared in sync held the same data.
func TestSimCheck(t *testing.T) {
	dir := t.TempDir()
	out, code := run(t, "sim", "check", "--sim-dir", dir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "held the same data")
	line := "r1 volume 0: n1 and n2: declared in sync (no resync) but the data differ at byte 4096"
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".divergences"), []byte(line+"\n"), 0o644))
	out, code = run(t, "sim", "check", "--sim-dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, line)
	_, _, code = runAll(t, "sim", "check")
	require.Equal(t, 2, code)
}
