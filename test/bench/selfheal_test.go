package bench

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/test/testtools"
)

// healCluster is a serve with four in-process sim agents (n1..n4) and 100 definitions
// of three disks each on n1, n2 and n3 (n4 was added afterwards: the only target),
// every disk UpToDate.
func healCluster(b *testing.B, mod func(*server.Config)) (*server.Server, map[string]func()) {
	testtools.Need(b, "drbdadm", "drbdmeta")
	mods := []func(*server.Config){benchServer}
	if mod != nil {
		mods = append(mods, mod)
	}
	s := servertest.Start(b, mods...)
	nc := servertest.Client(b, s)
	request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	base := b.TempDir()
	stops := map[string]func(){}
	add := func(i int) {
		node := fmt.Sprintf("n%d", i)
		request(b, nc, "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, node, i, i))
		request(b, nc, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1073741824}`, node))
		stops[node] = simAgent(b, s.NATSAddr, node, filepath.Join(base, node), nil)
	}
	for i := 1; i <= 3; i++ {
		add(i)
	}
	request(b, nc, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	for i := range healDefs {
		request(b, nc, "rg.spawn", fmt.Sprintf(`{"resource_group":"rg3","name":"r%d","size_kib":4096}`, i))
	}
	waitFor(b, 10*time.Minute, func() bool { return minUpToDate(b, s) == 3 })
	add(4)
	return s, stops
}

const healDefs = 100

// minUpToDate is the fewest disks UpToDate (projections.ReplicaUpToDate, on online
// nodes) over the definitions.
func minUpToDate(b *testing.B, s *server.Server) int {
	v, err := s.DB.Read()
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	fewest := 1 << 30
	for i := range healDefs {
		name := fmt.Sprintf("r%d", i)
		rd, ok, err := v.ResourceDefinition(name)
		if err != nil || !ok {
			b.Fatalf("r%d: %v", i, err)
		}
		st, err := v.ResourceStatus(name)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, r := range rd.Replicas {
			node, _, err := v.Node(r.Node)
			if err != nil {
				b.Fatal(err)
			}
			if !r.Diskless && node.Status.State == "online" && projections.ReplicaUpToDate(rd, r, st) {
				n++
			}
		}
		fewest = min(fewest, n)
	}
	return fewest
}

// onNode counts the definitions with a replica on node.
func onNode(b *testing.B, s *server.Server, node string) int {
	v, err := s.DB.Read()
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	rds, err := v.NodeResources(node)
	if err != nil {
		b.Fatal(err)
	}
	return len(rds)
}

// BenchmarkEvacuate100: n1 holds a disk of each of 100 definitions (three disks each);
// node.evacuate n1 moves them all to n4 (in-process sim agents: real drbdadm and
// drbdmeta, simulated syncs). Reports the time from node.evacuate to n1 empty and every
// definition back at three UpToDate disks, the peak of replacements syncing at once
// (never above the limit, 8) and the fewest UpToDate disks of any definition at any
// sample (every 50 ms; never below the starting three).
func BenchmarkEvacuate100(b *testing.B) {
	for range b.N {
		s, _ := healCluster(b, nil)
		nc := servertest.Client(b, s)
		peak, fewest := 0, 3
		start := time.Now()
		request(b, nc, "node.evacuate", `{"name":"n1"}`)
		for onNode(b, s, "n1") > 0 || minUpToDate(b, s) < 3 {
			if time.Since(start) > 10*time.Minute {
				b.Fatal("the evacuation did not finish in 10 minutes")
			}
			syncing := 0
			for _, m := range s.Evacuator.Status().Moves {
				if m.Action == policy.MoveWait && m.Replacement != "" {
					syncing++
				}
			}
			peak, fewest = max(peak, syncing), min(fewest, minUpToDate(b, s))
			time.Sleep(50 * time.Millisecond)
		}
		b.ReportMetric(time.Since(start).Seconds(), "evacuate_s")
		b.ReportMetric(float64(peak), "peak_syncing")
		b.ReportMetric(float64(fewest), "fewest_uptodate")
		if peak > policy.DefaultMaxSyncing || fewest < 3 {
			b.Fatalf("peak %d syncing (limit %d), fewest %d UpToDate (start 3)", peak, policy.DefaultMaxSyncing, fewest)
		}
	}
}

// BenchmarkAutoEvict100: n1's agent stops (its host gone) while it holds a disk of each
// of 100 definitions; with a 2 s heartbeat timeout and AutoEvictAfterTime 0.05 min (3 s)
// it is evicted. Reports the time from the eviction (its node.maintenance-changed) to
// every definition back at three UpToDate disks, none on n1.
func BenchmarkAutoEvict100(b *testing.B) {
	for range b.N {
		s, stops := healCluster(b, func(c *server.Config) { c.HeartbeatTimeout = 2 * time.Second })
		nc := servertest.Client(b, s)
		request(b, nc, "controller.modify", `{"properties":{"DrbdOptions/AutoEvictAfterTime":"0.05"}}`)
		killed := time.Now()
		stops["n1"]()
		evicted := func() bool {
			v, err := s.DB.Read()
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			n, _, err := v.Node("n1")
			if err != nil {
				b.Fatal(err)
			}
			return n.Spec.Maintenance == "evicted"
		}
		waitFor(b, time.Minute, evicted)
		at := time.Now()
		waitFor(b, 10*time.Minute, func() bool { return onNode(b, s, "n1") == 0 && minUpToDate(b, s) == 3 })
		b.ReportMetric(at.Sub(killed).Seconds(), "kill_to_evicted_s")
		b.ReportMetric(time.Since(at).Seconds(), "evicted_to_replaced_s")
	}
}
