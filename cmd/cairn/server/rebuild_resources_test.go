package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRebuildReproducesResourceAndPoolViews: replaying the stream from sequence 1
// produces exactly the views incremental application built, for every resource and
// pool event (allocations, frees, tiebreakers, port reallocation, grants, contests).
func TestRebuildReproducesResourceAndPoolViews(t *testing.T) {
	dir := t.TempDir()
	s := servertest.Start(t, func(c *server.Config) { c.DataDir = dir })
	submit := func(verb, body string) {
		t.Helper()
		r := servertest.Submit(s, verb, body)
		require.True(t, r.OK, "%s %s: %+v", verb, body, r.Error)
	}
	submit("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 5; i++ {
		submit("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"R%d"}`, i, i, i, i%3))
		submit("sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"zfs_thin","pool":"tank","capacity_kib":10485760}`, i))
	}
	submit("rg.create", `{"name":"rg","place_count":2,"replicas_on_different":["failure_domain"]}`)
	for i := range 6 {
		submit("rg.spawn", fmt.Sprintf(`{"resource_group":"rg","name":"r%d","size_kib":[4096,8192]}`, i))
	}
	submit("replica.toggle-disk", `{"resource":"r0","node":"`+tiebreaker(t, s, "r0")+`","diskless":false}`)
	submit("replica.remove", `{"resource":"r1","node":"`+firstDiskful(t, s, "r1")+`"}`)
	submit("resource.activate", `{"resource":"r2","reallocate_port":true}`)
	submit("resource.deactivate", `{"resource":"r3"}`)
	for len(definitionOf(t, s, "r4").Replicas) > 0 {
		submit("replica.remove", `{"resource":"r4","node":"`+definitionOf(t, s, "r4").Replicas[0].Node+`"}`)
	}
	submit("rd.delete", `{"name":"r4"}`)
	submit("rd.create", `{"name":"r6"}`) // takes r4's freed port
	submit("pool.create", `{"name":"tank","devices":["/dev/sdb"],"nodes":["n1","n2"]}`)
	submit("pool.import", `{"pool":"tank","node":"n1"}`)
	submit("pool.contest", `{"pool":"tank","node":"n1","reason":"test"}`)
	submit("pool.export", `{"pool":"tank"}`)

	live, err := s.DB.Digest()
	require.NoError(t, err)
	require.NoError(t, s.Close())

	off, err := server.OpenData(dir, "")
	require.NoError(t, err)
	defer off.Close()
	rebuilt, err := off.Rebuild(context.Background(), zerolog.Nop())
	require.NoError(t, err)
	assert.Equal(t, live, rebuilt)
}

func definitionOf(t *testing.T, s *server.Server, rd string) projections.ResourceDefinition {
	t.Helper()
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	d, ok, err := v.ResourceDefinition(rd)
	require.NoError(t, err)
	require.True(t, ok, "no definition %s", rd)
	return d
}

// replicaWhere returns the node of rd's first replica (by node id) that match accepts.
func replicaWhere(t *testing.T, s *server.Server, rd, what string, match func(projections.Replica) bool) string {
	t.Helper()
	for _, r := range definitionOf(t, s, rd).Replicas {
		if match(r) {
			return r.Node
		}
	}
	t.Fatalf("%s has no %s", rd, what)
	return ""
}

func firstDiskful(t *testing.T, s *server.Server, rd string) string {
	return replicaWhere(t, s, rd, "diskful replica", func(r projections.Replica) bool { return !r.Diskless })
}

func tiebreaker(t *testing.T, s *server.Server, rd string) string {
	return replicaWhere(t, s, rd, "tiebreaker", func(r projections.Replica) bool { return r.Tiebreaker })
}
