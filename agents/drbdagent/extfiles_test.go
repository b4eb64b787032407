package drbdagent

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
)

func extFile(path, content string) drbd.File {
	sum := sha256.Sum256([]byte(content))
	return drbd.File{Path: path, Content: []byte(content), SHA256: hex.EncodeToString(sum[:])}
}

// TestExtFilesSharedAndAcrossRestarts: a file two resources deploy stays until neither
// does; what one resource stopped deploying while the agent was down is removed at its
// next reconcile after a restart (the record on disk); a file outside the allowed
// paths is never written and the error names the flag.
func TestExtFilesSharedAndAcrossRestarts(t *testing.T) {
	p := NewPaths(t.TempDir())
	host := func(path string) string { return filepath.Join(p.Root, path) }
	read := func(path string) (string, bool) {
		b, err := os.ReadFile(host(path))
		return string(b), err == nil
	}
	x := newExtFiles(p, []string{"/etc/drbd-reactor.d", "/etc/extra/"})
	var last events.FilesReport
	x.publish = func(rep events.FilesReport) { last = rep }
	shared := "/etc/drbd-reactor.d/shared.toml"
	own := "/etc/extra/r2.conf"
	require.NoError(t, x.sync("r1", []drbd.File{extFile(shared, "a")}))
	require.NoError(t, x.sync("r2", []drbd.File{extFile(shared, "a"), extFile(own, "x")}))
	got, ok := read(shared)
	assert.True(t, ok)
	assert.Equal(t, "a", got)
	assert.Equal(t, map[string]string{shared: extFile(shared, "a").SHA256, own: extFile(own, "x").SHA256}, last.Files,
		"the report has what is on disk")

	require.NoError(t, x.sync("r1", nil)) // r2 still deploys it
	got, ok = read(shared)
	assert.True(t, ok, "a file another resource deploys stays")
	assert.Equal(t, "a", got)

	require.NoError(t, x.sync("r2", []drbd.File{extFile(shared, "b"), extFile(own, "x")}))
	got, _ = read(shared)
	assert.Equal(t, "b", got, "new content is written")

	// The agent restarts; r2 was undeployed from both files meanwhile.
	x = newExtFiles(p, []string{"/etc/drbd-reactor.d", "/etc/extra"})
	require.NoError(t, x.sync("r2", nil))
	_, ok = read(shared)
	assert.False(t, ok, "removed after the restart: the record knew r2 wrote it")
	_, ok = read(own)
	assert.False(t, ok)

	err := x.sync("r3", []drbd.File{extFile("/etc/passwd", "root::0:0::/:/bin/sh\n"), extFile("/etc/drbd-reactor.d/../passwd", "x")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--allow-ext-files /etc to allow it")
	_, ok = read("/etc/passwd")
	assert.False(t, ok, "nothing is written outside the allowed paths")
	assert.Contains(t, err.Error(), "/etc/drbd-reactor.d/../passwd")

	err = x.sync("r4", []drbd.File{{Path: "/etc/drbd-reactor.d/bad.toml", Content: []byte("x"), SHA256: "00"}})
	assert.ErrorContains(t, err, "does not match its digest")
}
