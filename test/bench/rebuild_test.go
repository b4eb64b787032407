package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// BenchmarkRebuildVsOrderedReplay: `views rebuild` of the big history against a raw
// ordered-consumer replay of the same stream on the same embedded server. Asked: ratio
// (rebuild rate / replay rate) >= 0.8 (the scale issue; the spine issue asked 0.5).
// The replay reads as the spine issue measured it, through the consumer's iterator
// (Messages); ratio_vs_callback_replay compares with a replay delivering to a callback
// (Consume), the cheaper way the projector itself reads. Both
// sides stop at the history's n-th event: the latency benchmark appends its commands to
// the same cached history. The sides alternate over rebuildRounds rounds (replay,
// rebuild, decode-only replay, and again) and each rate is over all of its rounds: the
// machine's speed drifts by a fifth from one minute to the next, so both sides see the
// same machine.
func BenchmarkRebuildVsOrderedReplay(b *testing.B) {
	n := historySize()
	data := cachedHistory(b, n)
	srv, nc, js, err := server.OpenOffline(data)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown() }()
	names := events.NewNames("")
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		var raw, rebuild, decoded, callback, rawCPU, rebuildCPU, decodedCPU, callbackCPU time.Duration
		for range rebuildRounds {
			rawCPU += processCPUOf(func() { raw += replayRaw(b, js, names, uint64(n)) })
			callbackCPU += processCPUOf(func() { callback += replayCallback(b, js, names, uint64(n)) })
			dir := filepath.Join(b.TempDir(), "views")
			db, err := projections.OpenBulk(dir) // as `cairn views rebuild` does
			if err != nil {
				b.Fatal(err)
			}
			rebuildCPU += processCPUOf(func() {
				began := time.Now()
				if _, err := server.ProjectInto(ctx, db, js, names, uint64(n), 0, zerolog.Nop()); err != nil {
					b.Fatal(err)
				}
				rebuild += time.Since(began)
			})
			db.Close()
			os.RemoveAll(dir)
			decodedCPU += processCPUOf(func() { decoded += replayDecoded(b, js, names, uint64(n)) })
		}
		total := n * rebuildRounds // events over every round
		rawRate := float64(total) / raw.Seconds()
		rebuildRate := float64(total) / rebuild.Seconds()
		decodedRate := float64(total) / decoded.Seconds()
		callbackRate := float64(total) / callback.Seconds()
		perEvent := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(total) }
		// The rebuild cannot take less wall time than its CPU time spread over every
		// core: that bounds its ratio whatever overlaps.
		cpuBound := raw.Seconds() / (rebuildCPU.Seconds() / float64(runtime.GOMAXPROCS(0)))
		b.ReportMetric(rawRate, "replay_events/s")
		b.ReportMetric(rebuildRate, "rebuild_events/s")
		b.ReportMetric(rebuildRate/rawRate, "ratio")
		b.ReportMetric(callbackRate, "callback_replay_events/s")
		b.ReportMetric(rebuildRate/callbackRate, "ratio_vs_callback_replay")
		b.ReportMetric(perEvent(callbackCPU), "callback_replay_cpu_us/event")
		b.ReportMetric(decodedRate/rawRate, "decode_only_ratio")
		b.ReportMetric(perEvent(rawCPU), "replay_cpu_us/event")
		b.ReportMetric(perEvent(decodedCPU), "decode_only_cpu_us/event")
		b.ReportMetric(perEvent(rebuildCPU), "rebuild_cpu_us/event")
		b.ReportMetric(min(cpuBound, 99), "rebuild_cpu_bound_ratio")
		b.Logf("%d events, %d rounds of each side: ordered replay %s (%.0f/s, %.1f us of CPU an event), rebuild %s (%.0f/s, %.1f us of CPU an event), ratio %.2f "+
			"(its CPU time over %d cores bounds it at %.2f); the replay with every event decoded "+
			"and validated on every core as the rebuild does, and nothing applied: %s (%.0f/s, %.1f us of CPU an event), ratio %.2f",
			n, rebuildRounds, raw.Round(time.Millisecond), rawRate, perEvent(rawCPU), rebuild.Round(time.Millisecond), rebuildRate, perEvent(rebuildCPU),
			rebuildRate/rawRate, runtime.GOMAXPROCS(0), cpuBound, decoded.Round(time.Millisecond), decodedRate, perEvent(decodedCPU), decodedRate/rawRate)
		b.Logf("the ordered replay delivering to a callback (Consume, as the projector reads) instead of an iterator: %s (%.0f/s, %.1f us of CPU an event); the rebuild's ratio to it %.2f",
			callback.Round(time.Millisecond), callbackRate, perEvent(callbackCPU), rebuildRate/callbackRate)
	}
}

// rebuildRounds is how many times each side of BenchmarkRebuildVsOrderedReplay runs.
const rebuildRounds = 3

// processCPUOf runs fn and returns the CPU time the process (with its embedded
// server) used meanwhile.
func processCPUOf(fn func()) time.Duration {
	before := processCPU()
	fn()
	return processCPU() - before
}

// replayDecoded is replayRaw with what any rebuild must do besides applying: every
// message decoded and validated (events.DecodeStored), in chunks of 1,024 spread over
// every core while the consumer reads on, as the projector's decode pipeline does. Its
// rate bounds the rebuild's.
func replayDecoded(tb testing.TB, js jetstream.JetStream, names events.Names, last uint64) time.Duration {
	tb.Helper()
	began := time.Now()
	chunks := make(chan []events.Raw, 2*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	var invalid atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				for _, r := range c {
					if _, err := events.DecodeStored(r); err != nil {
						invalid.Add(1)
					}
				}
			}
		}()
	}
	chunk := make([]events.Raw, 0, 1024)
	replay(tb, js, names, last, func(r events.Raw, end bool) {
		chunk = append(chunk, r)
		if len(chunk) == cap(chunk) || end {
			chunks <- chunk
			chunk = make([]events.Raw, 0, 1024)
		}
	})
	close(chunks)
	wg.Wait()
	if invalid.Load() > 0 {
		tb.Fatalf("%d stored messages did not decode", invalid.Load())
	}
	return time.Since(began)
}

// replayRaw reads the whole events stream with an ordered consumer, touching each
// message's metadata as any consumer must, and returns how long it took.
func replayRaw(tb testing.TB, js jetstream.JetStream, names events.Names, last uint64) time.Duration {
	tb.Helper()
	began := time.Now()
	replay(tb, js, names, last, func(events.Raw, bool) {})
	return time.Since(began)
}

// replayCallback is replayRaw with the messages delivered to a callback (Consume)
// instead of through the iterator.
func replayCallback(tb testing.TB, js jetstream.JetStream, names events.Names, last uint64) time.Duration {
	tb.Helper()
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil || meta.Sequence.Stream == last {
			select {
			case done <- err:
			default:
			}
		}
	}, jetstream.PullMaxMessages(2048))
	if err != nil {
		tb.Fatal(err)
	}
	defer cc.Stop()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	return time.Since(began)
}

// replay reads the events stream with an ordered consumer up to the message at last and
// hands each to fn (end: it is the last).
func replay(tb testing.TB, js jetstream.JetStream, names events.Names, last uint64, fn func(r events.Raw, end bool)) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		tb.Fatal(err)
	}
	defer it.Stop()
	for {
		m, err := it.Next()
		if err != nil {
			tb.Fatal(err)
		}
		meta, err := m.Metadata()
		if err != nil {
			tb.Fatal(err)
		}
		end := meta.Sequence.Stream >= last
		fn(events.Raw{Seq: meta.Sequence.Stream, Subject: m.Subject(), Stored: meta.Timestamp, Data: m.Data()}, end)
		if end {
			return
		}
	}
}
