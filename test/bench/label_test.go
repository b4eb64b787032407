package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
)

// BenchmarkNodeAddWithLabel: node.add on a cluster with failure domains off, 8 clients,
// with a failure_domain label (one label: 5,000 nodes carry it by the end) and without,
// alternating in slices of 1,000 on one serve. Reports both rates and their ratio
// (asked: the label costs nothing, ~1.0; it was ~0.5 while the views kept a host list
// per label).
func BenchmarkNodeAddWithLabel(b *testing.B) {
	for range b.N {
		s := servertest.Start(b, benchServer)
		nc := servertest.Client(b, s)
		request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
		const clients, slice, slices = 8, 1000, 10
		var spent [2]time.Duration
		next := 0
		for sl := range slices {
			side := sl % 2 // 0: without a label, 1: with
			start := time.Now()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func(first int) {
					defer wg.Done()
					for i := first; i < first+slice/clients; i++ {
						label := ""
						if side == 1 {
							label = `,"failure_domain":"RACK1"`
						}
						request(b, nc, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.%d.%d.%d"%s}`, i, i, i>>16&255, i>>8&255, i&255, label))
					}
				}(next + c*(slice/clients))
			}
			wg.Wait()
			next += slice
			spent[side] += time.Since(start)
		}
		per := float64(slices / 2 * slice)
		without, with := per/spent[0].Seconds(), per/spent[1].Seconds()
		b.ReportMetric(without, "without_label/s")
		b.ReportMetric(with, "with_label/s")
		b.ReportMetric(with/without, "ratio")
	}
}
