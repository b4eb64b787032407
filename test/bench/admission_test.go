package bench

import (
	"context"
	"fmt"
	"github.com/cairn-io/cairn/events"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// benchServer adjusts servertest's server (embedded NATS on a random TCP port, which
// the benchmarks connect to like external clients; fsync on every write, as `cairn
// serve`) to the benchmarks: no HTTP gateway, no log, and a heartbeat timeout no run
// reaches, so no node goes offline under them.
func benchServer(c *server.Config) {
	c.HTTPListen = "-"
	c.HeartbeatTimeout = time.Hour
	c.Log = zerolog.Nop()
}

// request sends a command over NATS and fails unless it is accepted. Unlike
// servertest.Send it does not decode the reply (it checks its start): it runs in the
// measured loops, where a client-side decode would count against admission.
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
//
// An fsync on this machine's disk takes anywhere from 0.3 to 1 ms from one minute to
// the next, so the two sides alternate in slices of 500 (raw, admission, raw, …) and
// each rate is over all of its slices: both see the same disk. cpu_us/op is the
// process's CPU time (user + system, every goroutine: client, server, cairn) per call.
func BenchmarkAdmissionVsRawPublish(b *testing.B) {
	s := servertest.Start(b, benchServer)
	nc := servertest.Client(b, s)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	runs := 0
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for range b.N {
				runs++
				sd := alternate(b, nc, js, clients, fmt.Sprintf("c%d-r%d", clients, runs))
				b.ReportMetric(sd.raw.cpuPerCall(), "raw_cpu_us/op")
				b.ReportMetric(sd.adm.cpuPerCall(), "admission_cpu_us/op")
				b.Logf("%d clients: raw publish %.0f/s (%.0f µs CPU each), admission %.0f/s (%.0f µs CPU each), ratio %.2f; %s",
					clients, sd.raw.rate(), sd.raw.cpuPerCall(), sd.adm.rate(), sd.adm.cpuPerCall(), sd.adm.rate()/sd.raw.rate(), reportSides(b, sd))
			}
		})
	}
}

// BenchmarkAdmissionVsRawPublishServeProcess is BenchmarkAdmissionVsRawPublish in the
// shape operators run it: the real `cairn serve` binary as its own process, with its
// embedded server (fsync on every write) and everything serve starts (dispatcher,
// watchdog, gateway), the clients over TCP in this process, raw publishes to a stream
// of their own on the same server, the two sides alternating in slices of 500. Asked:
// ratio >= 0.7 with 1 and with 8 clients.
func BenchmarkAdmissionVsRawPublishServeProcess(b *testing.B) {
	bin := cairnBinary(b)
	s := startServeAt(b, bin, b.TempDir(), freePort(b), freePort(b))
	defer s.stop()
	nc, err := nats.Connect(s.nats)
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
	runs := 0 // a sub-benchmark may run more than once on the same serve: fresh names each time
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for range b.N {
				runs++
				sd := alternate(b, nc, js, clients, fmt.Sprintf("p%d-r%d", clients, runs))
				b.Logf("serve process, %d clients: raw publish %.0f/s, admission %.0f/s, ratio %.2f; %s",
					clients, sd.raw.rate(), sd.adm.rate(), sd.adm.rate()/sd.raw.rate(), reportSides(b, sd))
			}
		})
	}
}

// comparedSides are the sides of an admission benchmark (see alternate).
type comparedSides struct {
	// raw: synchronous publishes with an expected per-subject sequence to stream RAW.
	raw sideTotals
	// adm: independent node.add through admission.
	adm sideTotals
	// hop: commands admission refuses at once (a body that is not JSON): the
	// request/reply round trip to the serve and nothing else.
	hop sideTotals
	// direct: the message admission appends for a node.add (a sealed node.added, with
	// the same headers), published straight to the events stream by the client: an
	// append to a stream whose every message the serve's views apply.
	direct sideTotals
}

// alternate runs 3,000 calls of each side of comparedSides in alternating slices of
// 500, so that every side sees the same disk, from clients goroutines; names start
// with tag.
func alternate(b *testing.B, nc *nats.Conn, js jetstream.JetStream, clients int, tag string) (sd comparedSides) {
	const n, slice = 3000, 500
	ctx := context.Background()
	names := events.NewNames("")
	for from := 0; from < n; from += slice {
		t := fmt.Sprintf("%s-%d", tag, from)
		sd.raw.add(timedCalls(clients, slice, func(i int) {
			if _, err := js.Publish(ctx, "raw."+t+"."+strconv.Itoa(i), []byte(`{"name":"x"}`), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
				b.Fatal(err)
			}
		}))
		sd.adm.add(timedCalls(clients, slice, func(i int) {
			request(b, nc, "node.add", fmt.Sprintf(`{"name":"%s-%d","host":"h%d","address":"10.0.0.1"}`, t, i, i))
		}))
		sd.hop.add(timedCalls(clients, slice, func(i int) {
			resp, err := nc.Request("cairn.cmd.node.add", []byte("{"), 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if !strings.Contains(string(resp.Data), `"invalid_argument"`) {
				b.Fatalf("a body that is not JSON: %s", resp.Data)
			}
		}))
		sd.direct.add(timedCalls(clients, slice, func(i int) {
			name := fmt.Sprintf("%s-d%d", t, i)
			subject := names.Event("node", name)
			envs, err := events.Seal(events.Meta{CommandID: "direct-" + name, Actor: "bench", OccurredAt: time.Now()},
				[]events.Draft{{Subject: subject, Payload: &events.NodeAdded{Name: name, Host: "h" + strconv.Itoa(i), Address: "10.0.0.1", Role: "storage"}}})
			if err != nil {
				b.Fatal(err)
			}
			body, err := events.Encode(envs[0])
			if err != nil {
				b.Fatal(err)
			}
			m := nats.NewMsg(subject)
			m.Data = body
			m.Header.Set(jetstream.MsgIDHeader, events.MsgID(envs[0].CommandID, 0))
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
			m.Header.Set(jetstream.ExpectedStreamHeader, names.EventsStream())
			if _, err := js.PublishMsg(ctx, m); err != nil {
				b.Fatal(err)
			}
		}))
	}
	return sd
}

// reportSides reports the rates and ratio of a comparison, and beside it two bounds on
// the ratio any admission could reach: a command is a request to the serve (at least
// the round trip of one refused before any work) plus an append, one after the other,
// where the append costs at least a raw publish (bound_ratio) and at least the same
// message published straight to the events stream, whose every message the serve's
// views apply (events_stream_bound_ratio); and how busy the machine's cores were. It
// returns them in words for the log.
func reportSides(b *testing.B, sd comparedSides) string {
	raw, adm, hop, direct := sd.raw, sd.adm, sd.hop, sd.direct
	bound := 1 / (1/raw.rate() + 1/hop.rate())
	streamBound := 1 / (1/direct.rate() + 1/hop.rate())
	b.ReportMetric(raw.rate(), "raw_publish/s")
	b.ReportMetric(adm.rate(), "admission/s")
	b.ReportMetric(adm.rate()/raw.rate(), "ratio")
	b.ReportMetric(bound/raw.rate(), "bound_ratio")
	b.ReportMetric(direct.rate(), "events_stream_publish/s")
	b.ReportMetric(streamBound/raw.rate(), "events_stream_bound_ratio")
	b.ReportMetric(adm.busy(), "admission_machine_busy")
	b.ReportMetric(raw.busy(), "raw_machine_busy")
	return fmt.Sprintf("a command refused before any work %.0f/s, so a command that did nothing but its append would reach at most %.0f/s, "+
		"a ratio of %.2f; the same message as admission's published straight to the events stream %.0f/s (%.2f of raw), "+
		"so with it as the append at most %.0f/s, a ratio of %.2f; the machine's cores were busy %.0f %% during admission, %.0f %% during raw publishes",
		hop.rate(), bound, bound/raw.rate(), direct.rate(), direct.rate()/raw.rate(), streamBound, streamBound/raw.rate(), 100*adm.busy(), 100*raw.busy())
}

// sideTotals sums the slices of one side of a comparison.
type sideTotals struct {
	calls     int
	wall, cpu time.Duration
	// machine is the CPU time every process of the machine used (from /proc/stat).
	machine time.Duration
}

func (s *sideTotals) add(t sideTotals) {
	s.calls += t.calls
	s.wall += t.wall
	s.cpu += t.cpu
	s.machine += t.machine
}

// busy is the share of the machine's cores that were busy during the side's calls.
func (s sideTotals) busy() float64 {
	return s.machine.Seconds() / (s.wall.Seconds() * float64(runtime.NumCPU()))
}

// machineCPU is the CPU time all processes have used since boot (user, nice, system,
// irq, softirq, steal; not idle or iowait), from /proc/stat.
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var ticks int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ, 100 on Linux
}

func (s sideTotals) rate() float64 { return float64(s.calls) / s.wall.Seconds() }

func (s sideTotals) cpuPerCall() float64 { return float64(s.cpu.Microseconds()) / float64(s.calls) }

// timedCalls runs fn(0..n-1) spread over clients goroutines and returns the wall-clock
// and process CPU time it took.
func timedCalls(clients, n int, fn func(i int)) sideTotals {
	cpu0, m0 := processCPU(), machineCPU()
	began := time.Now()
	parallel(clients, n, fn)
	return sideTotals{calls: n, wall: time.Since(began), cpu: processCPU() - cpu0, machine: machineCPU() - m0}
}

func parallel(clients, n int, fn func(i int)) {
	var wg sync.WaitGroup
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
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	// no deadline: on the big history the start catches the views up with all of it
	s := servertest.StartContext(context.Background(), tb, benchServer, func(c *server.Config) { c.DataDir = data })
	defer s.Close() // now, not when the benchmark ends: the next round starts on the same data directory
	tb.Logf("serve started on %d events in %s", s.Projector.Applied(), time.Since(began).Round(time.Millisecond))
	nc := servertest.Client(tb, s)
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
