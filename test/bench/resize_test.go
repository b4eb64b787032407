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
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
)

// BenchmarkResize100: 100 resources with two file_thin disks each (nodes n1 and n2,
// in-process agents on the simulated kernel: real drbdadm, real drbdmeta, real files);
// 100 vd.resize commands (4 MiB -> 8 MiB) are sent at once over loopback TCP. Measured
// per resource: from the command's accepted reply until both replicas' statuses report
// the device at the new size (each agent grew its file, then DRBD's resize of the one
// that grew last grew both). Reports p50, p99 and the time until all 100 are done.
func BenchmarkResize100(b *testing.B) {
	testtools.Need(b, "drbdadm", "drbdmeta")
	const n = 100
	for range b.N {
		s := servertest.Start(b, benchServer)
		nc := servertest.Client(b, s)
		request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
		for i := 1; i <= 2; i++ {
			request(b, nc, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
			request(b, nc, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1073741824}`, i))
		}
		request(b, nc, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
		base := b.TempDir()
		var mu sync.Mutex
		adjusted := map[string]int{}
		grown := map[string]map[string]time.Time{} // resource -> node -> first status at the new size
		for _, node := range []string{"n1", "n2"} {
			simAgent(b, s.NATSAddr, node, filepath.Join(base, node), func(rd, step string) bool {
				if step == "adjusted" {
					mu.Lock()
					adjusted[rd+"@"+node]++
					mu.Unlock()
				}
				return false
			})
			_, err := nc.Subscribe(events.NewNames("").Status(node, "drbd", "*"), func(m *nats.Msg) {
				var st drbd.Status
				if json.Unmarshal(m.Data, &st) != nil || len(st.Volumes) != 1 || st.Volumes[0].SizeKiB != 8192 {
					return
				}
				mu.Lock()
				if grown[st.Resource] == nil {
					grown[st.Resource] = map[string]time.Time{}
				}
				if _, seen := grown[st.Resource][node]; !seen {
					grown[st.Resource][node] = time.Now()
				}
				mu.Unlock()
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		for i := range n {
			request(b, nc, "rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":"r%d","size_kib":4096}`, i))
		}
		waitFor(b, 10*time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(adjusted) == 2*n })
		accepted := make([]time.Time, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				request(b, nc, "vd.resize", fmt.Sprintf(`{"resource":"r%d","volume":0,"size_kib":8192}`, i))
				accepted[i] = time.Now()
			}()
		}
		wg.Wait()
		waitFor(b, 10*time.Minute, func() bool {
			mu.Lock()
			defer mu.Unlock()
			done := 0
			for _, by := range grown {
				if len(by) == 2 {
					done++
				}
			}
			return done == n
		})
		all := time.Since(start)
		lat := make([]time.Duration, n)
		mu.Lock()
		for i := range n {
			by := grown[fmt.Sprintf("r%d", i)]
			last := by["n1"]
			if by["n2"].After(last) {
				last = by["n2"]
			}
			lat[i] = max(0, last.Sub(accepted[i]))
		}
		mu.Unlock()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[n/2].Milliseconds()), "p50_ms")
		b.ReportMetric(float64(lat[n*99/100].Milliseconds()), "p99_ms")
		b.ReportMetric(float64(all.Milliseconds()), "all_ms")
		b.Logf("%d vd.resize in flight: accepted -> both replicas report the new size p50 %s, p99 %s; all %d in %s",
			n, lat[n/2].Round(time.Millisecond), lat[n*99/100].Round(time.Millisecond), n, all.Round(time.Millisecond))
		b.Logf("external commands run by both agents: %s", execCounts())
		nc.Close()
	}
}
