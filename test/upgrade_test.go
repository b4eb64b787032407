package test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/projections"
)

// setViewsFormat rewrites the views format a stopped serve's store records ("": none,
// as every store before formats were recorded).
func setViewsFormat(t *testing.T, data, format string) {
	raw, err := pebble.Open(filepath.Join(data, "views"), &pebble.Options{})
	require.NoError(t, err)
	if format == "" {
		require.NoError(t, raw.Delete([]byte("m/format"), pebble.Sync))
	} else {
		require.NoError(t, raw.Set([]byte("m/format"), []byte(format), pebble.Sync))
	}
	require.NoError(t, raw.Close())
}

// Views of an older format are rebuilt from the stream when serve starts, before it
// serves anything, with no manual step: the same digest as before, every lookup there.
// Views of a newer format refuse to start, naming both formats, and are left as they
// are.
func TestServeRebuildsViewsOfAnOlderFormat(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data)
	cmd := func(verb, body string) {
		out, code := run(t, "cmd", verb, body, "--nats", s.natsURL())
		require.Equal(t, 0, code, out)
	}
	cmd("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	cmd("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	cmd("sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`)
	cmd("rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thin"}`)
	cmd("rg.spawn", `{"resource_group":"rg1","name":"r1","size_kib":4096}`)
	_, before := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
	s.stop()

	setViewsFormat(t, data, "") // as a store written before formats were recorded
	s.start()
	assert.Contains(t, s.log.String(), "views of an older format: rebuilding them")
	_, after := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
	assert.JSONEq(t, before, after, "rebuilt from the stream: the same views")
	status, _ := httpJSON(t, "GET", s.url("/cairn/v1/resources/r1"), "")
	assert.Equal(t, 200, status)
	s.stop()
	s.start()
	assert.NotContains(t, s.log.String(), "rebuilding them", "a store of this format is not rebuilt again")
	s.stop()

	setViewsFormat(t, data, strconv.Itoa(projections.ViewsFormat+1))
	out, err := exec.Command(cairnBin, s.args...).CombinedOutput()
	require.Error(t, err, "a serve started on views of a newer format:\n%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("the store is format %d, this cairn reads format %d", projections.ViewsFormat+1, projections.ViewsFormat))
}
