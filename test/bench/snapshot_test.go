package bench

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
)

// BenchmarkSnapshot100: one resource with three file_thin disks (in-process agents on
// the simulated kernel, real drbdadm/drbdmeta, real reflink/sparse copies), 100
// rd.snapshot one after another over loopback TCP. Measured per snapshot: from the
// accepted reply until all three replicas report it taken (suspend on all, the leading
// serve records the order to take, each snapshots and resumes, reports). Reports p50,
// p99 and the longest I/O suspension any replica reported.
func BenchmarkSnapshot100(b *testing.B) {
	testtools.Need(b, "drbdadm", "drbdmeta")
	const n = 100
	for range b.N {
		s := servertest.Start(b, benchServer)
		nc := servertest.Client(b, s)
		request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
		base := b.TempDir()
		var mu sync.Mutex
		adjusted := map[string]bool{}
		taken := map[string]map[string]time.Time{} // snapshot -> node -> first report taken
		var longest float64
		for i := 1; i <= 3; i++ {
			node := fmt.Sprintf("n%d", i)
			request(b, nc, "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, node, i, i))
			request(b, nc, "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1073741824}`, node))
			simAgent(b, s.NATSAddr, node, filepath.Join(base, node), func(rd, step string) bool {
				if step == "adjusted" {
					mu.Lock()
					adjusted[node] = true
					mu.Unlock()
				}
				return false
			})
			_, err := nc.Subscribe(events.NewNames("").Status(node, "drbd", "r1"), func(m *nats.Msg) {
				var st drbd.Status
				if json.Unmarshal(m.Data, &st) != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, ss := range st.Snapshots {
					longest = max(longest, ss.SuspendedMs)
					if ss.Phase != drbd.SnapTaken {
						continue
					}
					if taken[ss.Name] == nil {
						taken[ss.Name] = map[string]time.Time{}
					}
					if _, seen := taken[ss.Name][node]; !seen {
						taken[ss.Name][node] = time.Now()
					}
				}
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		request(b, nc, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
		request(b, nc, "rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`)
		waitFor(b, 5*time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(adjusted) == 3 })
		time.Sleep(time.Second) // let the three connect
		lat, recorded := make([]time.Duration, n), make([]time.Duration, n)
		start := time.Now()
		for i := range n {
			name := fmt.Sprintf("s%d", i)
			request(b, nc, "rd.snapshot", fmt.Sprintf(`{"resource":"r1","name":%q}`, name))
			accepted := time.Now()
			waitFor(b, time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(taken[name]) == 3 })
			mu.Lock()
			var last time.Time
			for _, at := range taken[name] {
				if at.After(last) {
					last = at
				}
			}
			mu.Unlock()
			lat[i] = last.Sub(accepted)
			waitFor(b, time.Minute, func() bool { // recorded taken: the next may start
				v, err := s.DB.Read()
				if err != nil {
					return false
				}
				defer v.Close()
				rd, _, _ := v.ResourceDefinition("r1")
				snap, ok := rd.Snapshot(name)
				recorded[i] = time.Since(accepted)
				return ok && snap.Phase == projections.SnapshotTaken
			})
		}
		all := time.Since(start)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		sort.Slice(recorded, func(i, j int) bool { return recorded[i] < recorded[j] })
		mu.Lock()
		worst := longest
		mu.Unlock()
		b.ReportMetric(float64(lat[n/2].Milliseconds()), "p50_ms")
		b.ReportMetric(float64(lat[n*99/100].Milliseconds()), "p99_ms")
		b.ReportMetric(worst, "max_suspended_ms")
		b.Logf("%d snapshots of a 3-replica resource: accepted -> all replicas report it taken p50 %s, p99 %s (-> recorded taken p50 %s, p99 %s); longest I/O suspension %.1f ms; all in %s",
			n, lat[n/2].Round(time.Millisecond), lat[n*99/100].Round(time.Millisecond), recorded[n/2].Round(time.Millisecond),
			recorded[n*99/100].Round(time.Millisecond), worst, all.Round(time.Millisecond))
		nc.Close()
	}
}
