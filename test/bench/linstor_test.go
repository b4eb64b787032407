package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/replicas"
)

// BenchmarkLinstorViewResources: LINSTOR's GET /v1/view/resources (what `linstor
// resource list` and linstor-csi call) over HTTP on 10,000 resource definitions with 3
// replicas each (30,000 resources) on 12 nodes: p50 and p99 of the whole response read
// to the end, of one page (limit=100) at the start and deep in the list, and of one
// definition's resources (?resources=). LINSTOR users report 30 s to 5 min for resource
// list at a few thousand resources (linstor-server #444, #116). The cluster is built
// through admission with fsync off (what is measured is the read);
// CAIRN_BENCH_DEFINITIONS overrides the count.
func BenchmarkLinstorViewResources(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_DEFINITIONS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		s := servertest.Start(b, benchServer, func(c *server.Config) {
			c.HTTPListen = "127.0.0.1:0"
			c.NoSyncAlways = true
			c.Admission = commands.Options{Ports: replicas.Range{Min: 7000, Max: 7000 + n}}
		})
		spawnCluster(b, s)
		built := time.Now()
		for i := range n {
			submit(b, s, "rg.spawn", fmt.Sprintf(`{"resource_group":"rg3","name":"pvc-%05d","size_kib":1048576}`, i))
		}
		b.Logf("%d definitions x 3 replicas built in %s", n, time.Since(built).Round(time.Second))
		base := "http://" + s.HTTPAddr
		for _, c := range []struct {
			name, path string
			rounds     int
		}{
			{"all", "/v1/view/resources", 20},
			{"page_first", "/v1/view/resources?limit=100", 200},
			{"page_deep", fmt.Sprintf("/v1/view/resources?offset=%d&limit=100", 3*n/2), 200},
			{"page_last", fmt.Sprintf("/v1/view/resources?offset=%d&limit=100", 3*n-100), 200},
			{"one_definition", fmt.Sprintf("/v1/view/resources?resources=pvc-%05d", n/2), 200},
		} {
			p50, p99, size := httpLatency(b, base+c.path, c.rounds)
			b.ReportMetric(float64(p50.Microseconds())/1000, c.name+"_p50_ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, c.name+"_p99_ms")
			b.Logf("%-15s %s: p50 %s, p99 %s, %d bytes, %d rounds", c.name, c.path, p50.Round(time.Microsecond), p99.Round(time.Microsecond), size, c.rounds)
		}
		s.Close()
	}
}

// httpLatency GETs url rounds times, reading each body to the end, and returns the p50
// and p99 latency and the body size.
func httpLatency(b *testing.B, url string, rounds int) (p50, p99 time.Duration, size int) {
	lat := make([]time.Duration, 0, rounds)
	for range rounds {
		t0 := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		lat = append(lat, time.Since(t0))
		size = len(body)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[(len(lat)*99)/100], size
}
