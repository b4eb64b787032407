package bench

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/replicas"
)

// spawnCluster makes the cluster the spawn benchmarks fill: 12 nodes in three racks,
// each with a thin pool too large to run out, and group rg3 placing three disks.
func spawnCluster(b *testing.B, s *server.Server) {
	submit(b, s, "cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for i := range 12 {
		submit(b, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"RACK%d"}`, i, i, i+1, i%3))
		submit(b, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":%d}`, i, uint64(1)<<50))
	}
	submit(b, s, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
}

// BenchmarkSpawnDefinitions creates 10,000 resource definitions with three diskful
// replicas each (rg.spawn: rd.created, vd.created and three replica.added in one atomic
// batch, with port, node ids and minors allocated) through admission on a 12-node
// cluster in three racks, as `cairn serve` runs it (fsync on every write, dispatcher
// publishing desired state). Asked: the last 1,000's rate over the first 1,000's >= 0.8
// (allocation must not slow down as the cluster fills). CAIRN_BENCH_DEFINITIONS
// overrides the count; CAIRN_BENCH_NOSYNC=1 turns fsync off.
func BenchmarkSpawnDefinitions(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_DEFINITIONS")); err == nil && v > 2000 {
		n = v
	}
	for range b.N {
		s := servertest.Start(b, benchServer, func(c *server.Config) {
			c.NoSyncAlways = os.Getenv("CAIRN_BENCH_NOSYNC") != ""
			c.Admission = commands.Options{Ports: replicas.Range{Min: 7000, Max: 7000 + n}}
		})
		spawnCluster(b, s)
		start := time.Now()
		var first, last time.Duration
		t0, tk := start, start
		for i := range n {
			submit(b, s, "rg.spawn", fmt.Sprintf(`{"resource_group":"rg3","name":"pvc-%d","size_kib":1048576}`, i))
			if (i+1)%1000 == 0 {
				b.Logf("definitions %d-%d: %.0f commands/s", i-998, i+1, 1000/time.Since(tk).Seconds())
				tk = time.Now()
			}
			if i+1 == 1000 {
				first = time.Since(t0)
			}
			if i+1 == n-1000 {
				t0 = time.Now()
			}
			if i+1 == n {
				last = time.Since(t0)
			}
		}
		total := time.Since(start)
		ratio := first.Seconds() / last.Seconds()
		b.ReportMetric(float64(n)/total.Seconds(), "commands/s")
		b.ReportMetric(ratio, "last_over_first")
		b.Logf("%d definitions x 3 replicas: %.0f commands/s overall; first 1,000 %.0f/s, last 1,000 %.0f/s, ratio %.2f",
			n, float64(n)/total.Seconds(), 1000/first.Seconds(), 1000/last.Seconds(), ratio)
		s.Close()
	}
}
