package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func startServer(tb testing.TB, data string) *server.Server {
	tb.Helper()
	s, err := server.Start(context.Background(), server.Config{DataDir: data, NATSListen: "127.0.0.1:0", HTTPListen: "-",
		HeartbeatTimeout: time.Hour, Log: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func request(tb testing.TB, nc *nats.Conn, verb, body string) {
	resp, err := nc.Request("cairn.cmd."+verb, []byte(body), 30*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	if len(resp.Data) < 11 || string(resp.Data[:10]) != `{"ok":true` {
		tb.Fatalf("%s refused: %s", verb, resp.Data)
	}
}

// BenchmarkAdmissionVsRawPublish: independent node.add commands through admission
// (request/reply over TCP, schema check, decision on the views, conditional append,
// reply once the views hold the event) against raw synchronous JetStream publishes with
// Nats-Expected-Last-Subject-Sequence, on the same server (the `cairn serve` default:
// embedded, fsync on every write) and the same kind of TCP client connection. Asked:
// ratio (admission rate / raw rate) >= 0.5. Sequential, and with 8 concurrent clients.
func BenchmarkAdmissionVsRawPublish(b *testing.B) {
	s := startServer(b, b.TempDir())
	nc, err := nats.Connect(s.NATSAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	const n = 3000
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for round := range b.N {
				tag := fmt.Sprintf("c%d-r%d", clients, round)
				rawRate := parallelRate(clients, n, func(i int) {
					_, err := js.Publish(ctx, "raw."+tag+"."+strconv.Itoa(i), []byte(`{"name":"x"}`), jetstream.WithExpectLastSequencePerSubject(0))
					if err != nil {
						b.Fatal(err)
					}
				})
				admRate := parallelRate(clients, n, func(i int) {
					request(b, nc, "node.add", fmt.Sprintf(`{"name":"%s-%d","host":"h%d","address":"10.0.0.1"}`, tag, i, i))
				})
				b.ReportMetric(rawRate, "raw_publish/s")
				b.ReportMetric(admRate, "admission/s")
				b.ReportMetric(admRate/rawRate, "ratio")
				b.Logf("%d clients: raw publish %.0f/s, admission %.0f/s, ratio %.2f", clients, rawRate, admRate, admRate/rawRate)
			}
		})
	}
}

// parallelRate runs fn(0..n-1) spread over clients goroutines and returns calls per second.
func parallelRate(clients, n int, fn func(i int)) float64 {
	var wg sync.WaitGroup
	began := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += clients {
				fn(i)
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(began).Seconds()
}

// BenchmarkAdmissionLatencyVsHistory: p99 latency of node.add with 1,000 events already
// in the stream against the big history (CAIRN_BENCH_EVENTS). Admission reads the
// views, never the history, so the ratio must stay <= 1.5.
func BenchmarkAdmissionLatencyVsHistory(b *testing.B) {
	small := b.TempDir()
	fillHistory(b, small, 1000)
	big := cachedHistory(b, historySize())
	for range b.N {
		p50s, p99s := latency(b, small)
		b.ReportMetric(float64(p99s.Microseconds()), "p99_1k_us")
		b.Logf("p50/p99 with 1k events: %s / %s", p50s, p99s)
		p50b, p99b := latency(b, big)
		b.ReportMetric(float64(p99b.Microseconds()), "p99_big_us")
		b.ReportMetric(float64(p99b)/float64(p99s), "ratio")
		b.Logf("p50/p99 with %d events: %s / %s; p99 ratio %.2f", historySize(), p50b, p99b, float64(p99b)/float64(p99s))
	}
}

func latency(tb testing.TB, data string) (p50, p99 time.Duration) {
	began := time.Now()
	s, err := server.Start(context.Background(), server.Config{DataDir: data, NATSListen: "127.0.0.1:0", HTTPListen: "-",
		HeartbeatTimeout: time.Hour, Log: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	tb.Logf("serve started on %d events in %s", s.Projector.Applied(), time.Since(began).Round(time.Millisecond))
	nc, err := nats.Connect(s.NATSAddr)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	const n = 2000
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	lat := make([]time.Duration, 0, n)
	for i := range n + 200 {
		t0 := time.Now()
		request(tb, nc, "node.add", fmt.Sprintf(`{"name":"lat-%s-%d","host":"h","address":"10.0.0.1"}`, tag, i))
		if i >= 200 { // warm-up excluded
			lat = append(lat, time.Since(t0))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
