package bench

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// scaleSize is the number of resource definitions of the scale run
// (CAIRN_BENCH_DEFINITIONS_SCALE, default 100,000).
func scaleSize() int {
	if n, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_DEFINITIONS_SCALE")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// fillScaleCluster writes a cluster of nodes storage nodes (a thin pool each), one
// resource group and rds definitions of one volume with three diskful replicas each,
// placed round robin (node ids 0-2, minors per node from 1000), into dataDir's events
// stream, as admission would have appended them (claims left out: the views fold
// nothing from them). Ports cycle through 7000-56999: the cluster-wide port range caps a
// real cluster at 58,536 definitions, so past 50,000 two definitions share a port here.
func fillScaleCluster(tb testing.TB, dataDir string, nodes, rds int) int {
	tb.Helper()
	js, done := openFill(tb, dataDir)
	defer done()
	names := events.NewNames("")
	count := 0
	publish := func(drafts ...events.Draft) {
		id := uuid.Must(uuid.NewV7()).String()
		envs, err := events.Seal(events.Meta{CommandID: id, CorrelationID: id, CausationID: id, Actor: "bench", OccurredAt: time.Now()}, drafts)
		if err != nil {
			tb.Fatal(err)
		}
		for i, env := range envs {
			body, _ := events.Encode(env)
			m := nats.NewMsg(env.Subject)
			m.Data = body
			m.Header.Set(jetstream.MsgIDHeader, events.MsgID(id, i))
			if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				tb.Fatal(err)
			}
			count++
		}
	}
	began := time.Now()
	publish(events.Draft{Subject: names.Event("cluster", "c1"), Payload: &events.ClusterCreated{Name: "c1", DataChunks: 1, ParityChunks: 1}})
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		publish(events.Draft{Subject: names.Event("node", name), Payload: &events.NodeAdded{Name: name, Host: "h-" + name,
			Address: fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, i%250+1), Role: events.RoleStorage}},
			events.Draft{Subject: names.Event("node", name), Payload: &events.StoragePoolCreated{Node: name, Name: "thin",
				Provider: backing.ProviderLVMThin, Pool: "vg0/thin", CapacityKiB: 1 << 40}})
	}
	publish(events.Draft{Subject: names.Event("rg", "g"), Payload: &events.ResourceGroupCreated{Name: "g", PlaceCount: 3, StoragePool: "thin"}})
	minor := make([]int, nodes)
	for i := range rds {
		name := fmt.Sprintf("pvc-%07d", i)
		subject := names.Event("rd", name)
		gi, err := drbd.NewDay0GI(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		drafts := []events.Draft{
			{Subject: subject, Payload: &events.ResourceDefinitionCreated{Name: name, ResourceGroup: "g", Port: 7000 + i%50_000}},
			{Subject: subject, Payload: &events.VolumeDefinitionCreated{Resource: name, Volume: 0, SizeKiB: 1 << 20, Day0GI: gi.String()}},
		}
		for r := range 3 {
			node := (i*3 + r) % nodes
			drafts = append(drafts, events.Draft{Subject: subject, Payload: &events.ReplicaAdded{Resource: name, Node: fmt.Sprintf("n%d", node),
				NodeID: r, Minors: []events.VolumeMinor{{Volume: 0, Minor: 1000 + minor[node]}}, Reason: "autoplace",
				StoragePool: "thin", Provider: backing.ProviderLVMThin, Pool: "vg0/thin"}})
			minor[node]++
		}
		publish(drafts...)
		if (i+1)%20_000 == 0 {
			tb.Logf("filled %d definitions (%d events) in %s", i+1, count, time.Since(began).Round(time.Millisecond))
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Minute):
		tb.Fatal("fill did not complete")
	}
	tb.Logf("filled %d nodes, %d definitions, %d replicas: %d events in %s", nodes, rds, 3*rds, count, time.Since(began).Round(time.Millisecond))
	return count
}

// runningServe is a `cairn serve` process of the scale run.
type runningServe struct {
	cmd   *exec.Cmd
	http  string
	nats  string
	ready time.Duration
}

func startScaleServe(b *testing.B, bin, data string) *runningServe {
	natsAddr, httpAddr := freePort(b), freePort(b)
	s := startServeAt(b, bin, data, natsAddr, httpAddr)
	return s
}

// startServeAt runs `cairn serve` on data with its embedded NATS server on natsAddr and
// waits until /readyz on httpAddr says the views are caught up.
func startServeAt(b *testing.B, bin, data, natsAddr, httpAddr string) *runningServe {
	cmd := exec.Command(bin, "serve", "--data", data, "--nats-listen", natsAddr, "--http", httpAddr, "--log-level", "warn",
		"--heartbeat-timeout", "1h")
	cmd.Stderr = os.Stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Since(began) > 20*time.Minute {
			b.Fatal("serve not ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &runningServe{cmd: cmd, http: httpAddr, nats: "nats://" + natsAddr, ready: time.Since(began)}
}

func (s *runningServe) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	_ = s.cmd.Wait()
}

// getLatencies GETs n paths made by path(i) and returns the latencies (the whole body read).
func getLatencies(b *testing.B, base string, n int, path func(i int) string) []time.Duration {
	out := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		resp, err := http.Get("http://" + base + path(i))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d", path(i), resp.StatusCode)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// BenchmarkScale100k: a generated cluster of 1,000 nodes, 100,000 resource definitions
// and 300,000 replicas (about 502,000 events), served by the real `cairn serve`: cold
// start to ready (the views built from the whole stream) and its peak RSS; GET of one
// definition and of one page of 100 (at random cursors) over HTTP; restart to ready
// with the views kept (only the tail is replayed); the offline `cairn views rebuild`.
// Asked: restart within 10 s, rebuild within 5 minutes, peak RSS within 512 MiB, one
// definition p99 within 5 ms, a page of 100 within 20 ms. Agent start on a node with
// 1,000 replicas is BenchmarkAgentRestart1000. CAIRN_BENCH_DEFINITIONS_SCALE resizes it.
func BenchmarkScale100k(b *testing.B) {
	bin := cairnBinary(b)
	const nodes = 1000
	rds := scaleSize()
	for range b.N {
		// CAIRN_BENCH_SCALE_DATA keeps the data directory, to profile it by hand
		// (e.g. cairn views rebuild --data DIR --cpu-profile cpu.out).
		data := os.Getenv("CAIRN_BENCH_SCALE_DATA")
		if data == "" {
			data = b.TempDir()
		}
		count := fillScaleCluster(b, data, nodes, rds)

		cold := startScaleServe(b, bin, data)
		coldHWM := procStatus(b, cold.cmd.Process.Pid, "VmHWM")
		// A first start publishes every replica's desired state (one fsynced message
		// each): the reads below are measured once that is done, as a cluster runs.
		drained := waitDispatched(b, cold.http)
		one := getLatencies(b, cold.http, 1000, func(int) string {
			return fmt.Sprintf("/cairn/v1/resources/pvc-%07d", mrand.IntN(rds))
		})
		page := getLatencies(b, cold.http, 300, func(int) string {
			return fmt.Sprintf("/cairn/v1/resources?limit=100&after=pvc-%07d", mrand.IntN(rds-100))
		})
		first := getLatencies(b, cold.http, 100, func(int) string { return "/cairn/v1/resources?limit=100" })
		hwm := procStatus(b, cold.cmd.Process.Pid, "VmHWM")
		cold.stop()

		warm := startScaleServe(b, bin, data)
		warmRSS := procStatus(b, warm.cmd.Process.Pid, "VmRSS")
		// The same reads on the restarted serve: views already compacted, as a serve
		// that has been up a while has them.
		oneWarm := getLatencies(b, warm.http, 1000, func(int) string {
			return fmt.Sprintf("/cairn/v1/resources/pvc-%07d", mrand.IntN(rds))
		})
		pageWarm := getLatencies(b, warm.http, 300, func(int) string {
			return fmt.Sprintf("/cairn/v1/resources?limit=100&after=pvc-%07d", mrand.IntN(rds-100))
		})
		warm.stop()

		t0 := time.Now()
		if out, err := exec.Command(bin, "views", "rebuild", "--data", data).CombinedOutput(); err != nil {
			b.Fatalf("views rebuild: %v\n%s", err, out)
		}
		rebuild := time.Since(t0)

		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(cold.ready.Seconds(), "cold_start_s")
		b.ReportMetric(warm.ready.Seconds(), "restart_s")
		b.ReportMetric(rebuild.Seconds(), "rebuild_s")
		b.ReportMetric(float64(hwm)/1024, "peak_rss_MiB")
		b.ReportMetric(ms(percentile(one, 99)), "get_one_p99_ms")
		b.ReportMetric(ms(percentile(page, 99)), "page_100_p99_ms")
		b.Logf("%d nodes, %d definitions, %d replicas, %d events: cold start to ready %s (%.0f events/s; peak RSS then %d MiB), "+
			"restart %s (RSS %d MiB), views rebuild %s; peak RSS %d MiB", nodes, rds, 3*rds, count,
			cold.ready.Round(time.Millisecond), float64(count)/cold.ready.Seconds(), coldHWM/1024,
			warm.ready.Round(time.Millisecond), warmRSS/1024, rebuild.Round(time.Millisecond), hwm/1024)
		b.ReportMetric(ms(percentile(oneWarm, 99)), "get_one_p99_restarted_ms")
		b.ReportMetric(ms(percentile(pageWarm, 99)), "page_100_p99_restarted_ms")
		b.ReportMetric(drained.Seconds(), "desired_state_published_s")
		b.Logf("after the cold start the desired state of every replica was published in %s", drained.Round(time.Millisecond))
		b.Logf("after the cold start: GET one definition p50 %s p99 %s; page of 100 at a random cursor p50 %s p99 %s; first page p50 %s p99 %s",
			percentile(one, 50), percentile(one, 99), percentile(page, 50), percentile(page, 99), percentile(first, 50), percentile(first, 99))
		b.Logf("restarted: GET one definition p50 %s p99 %s; page of 100 p50 %s p99 %s",
			percentile(oneWarm, 50), percentile(oneWarm, 99), percentile(pageWarm, 50), percentile(pageWarm, 99))
	}
}

// waitDispatched waits until serve's dispatcher has published for 3 s nothing more
// (cairn_dispatch_published_total stands still) and returns how long that took.
func waitDispatched(b *testing.B, httpAddr string) time.Duration {
	began := time.Now()
	last, still := -1.0, 0
	for time.Since(began) < 10*time.Minute {
		resp, err := http.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		total := 0.0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "cairn_dispatch_published_total") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += v
			}
		}
		resp.Body.Close()
		if total == last {
			if still++; still == 6 {
				return time.Since(began) - 3*time.Second
			}
		} else {
			last, still = total, 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatal("the dispatcher did not go quiet within 10 minutes")
	return 0
}
