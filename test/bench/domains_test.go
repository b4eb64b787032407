package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/domains"
)

// submit sends a command straight to admission and fails unless it is accepted.
func submit(tb testing.TB, s *server.Server, verb, body string) {
	if r := servertest.Submit(s, verb, body); !r.OK {
		tb.Fatalf("%s %s: %s", verb, body, r.Error.Message)
	}
}

// topologyLatency builds an activated failure-domain cluster of hosts over nDomains with
// volumesPerHost volumes each, then measures node.add and node.remove (decision plus
// conditional append, in process) of a host that comes and goes.
func topologyLatency(tb testing.TB, hosts, nDomains, volumesPerHost, rounds int, noSync bool) (addP99, removeP99 time.Duration) {
	s := servertest.Start(tb, benchServer, func(c *server.Config) { c.NoSyncAlways = noSync })
	defer s.Close() // now, not when the benchmark ends: two servers a round
	submit(tb, s, "cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":2,"parity_chunks":1}`)
	for i := range hosts {
		submit(tb, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.1","failure_domain":"D%02d"}`, i, i, i%nDomains))
	}
	submit(tb, s, "cluster.activate", `{}`)
	for i := range hosts * volumesPerHost {
		submit(tb, s, "lvol.create", fmt.Sprintf(`{"name":"v%d","node":"n%d","size_kib":1024}`, i, i%hosts))
	}
	var adds, removes []time.Duration
	for r := range rounds {
		t0 := time.Now()
		submit(tb, s, "node.add", fmt.Sprintf(`{"name":"x%d","host":"hx%d","address":"10.0.0.2","failure_domain":"D%02d"}`, r, r, r%nDomains))
		adds = append(adds, time.Since(t0))
		t0 = time.Now()
		submit(tb, s, "node.remove", fmt.Sprintf(`{"name":"x%d"}`, r))
		removes = append(removes, time.Since(t0))
	}
	return p99(adds), p99(removes)
}

func p99(d []time.Duration) time.Duration { return percentile(d, 99) }

// BenchmarkTopologyAdmission: node.add and node.remove on a 1,000-host, 10-domain
// cluster with 10,000 volumes against a 12-host cluster (10 volumes a host). Asked: p99
// ratio <= 2. Run with fsync on every write (as serve) and without (the decision's own
// scaling, free of the disk's fsync jitter).
func BenchmarkTopologyAdmission(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%t", !noSync), func(b *testing.B) {
			for range b.N {
				sa, sr := topologyLatency(b, 12, 4, 10, 300, noSync)
				la, lr := topologyLatency(b, 1000, 10, 10, 300, noSync)
				b.ReportMetric(float64(la)/float64(sa), "add_ratio")
				b.ReportMetric(float64(lr)/float64(sr), "remove_ratio")
				b.Logf("fsync=%t p99 node.add: 12 hosts %s, 1000 hosts %s (ratio %.2f); node.remove: %s, %s (ratio %.2f)",
					!noSync, sa, la, float64(la)/float64(sa), sr, lr, float64(lr)/float64(sr))
			}
		})
	}
}

// BenchmarkActivationPlacement1000Hosts: the placement of a full activation (rotation,
// volume stores, invariant check, journal sets) for 1,000 hosts in 10 domains.
func BenchmarkActivationPlacement1000Hosts(b *testing.B) {
	var ms []domains.Member
	for i := range 1000 {
		ms = append(ms, domains.Member{Name: fmt.Sprint(i), Host: fmt.Sprintf("h%d", i), Domain: fmt.Sprintf("D%02d", i%10), Role: "storage"})
	}
	for b.Loop() {
		rot := domains.Rotation(domains.BuildTopology(ms))
		stores := domains.PlaceVolumeStores(rot, 2)
		if err := domains.CheckFailoverInvariant(stores); err != nil {
			b.Fatal(err)
		}
		for i := range rot {
			domains.PlaceJournal(rot, i, 4, true)
		}
	}
}
