package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// BenchmarkRebuildVsOrderedReplay: `views rebuild` of the big history against a raw
// ordered-consumer replay of the same stream on the same embedded server. Asked: ratio
// (rebuild rate / replay rate) >= 0.5. Both sides stop at the history's n-th event:
// the latency benchmark appends its commands to the same cached history.
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
		raw := replayRaw(b, js, names, uint64(n))
		dir := filepath.Join(b.TempDir(), "views")
		db, err := projections.OpenBulk(dir) // as `cairn views rebuild` does
		if err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		if _, err := server.ProjectInto(ctx, db, js, names, uint64(n), 0, zerolog.Nop()); err != nil {
			b.Fatal(err)
		}
		rebuild := time.Since(began)
		db.Close()
		os.RemoveAll(dir)
		rawRate := float64(n) / raw.Seconds()
		rebuildRate := float64(n) / rebuild.Seconds()
		b.ReportMetric(rawRate, "replay_events/s")
		b.ReportMetric(rebuildRate, "rebuild_events/s")
		b.ReportMetric(rebuildRate/rawRate, "ratio")
		b.Logf("%d events: ordered replay %s (%.0f/s), rebuild %s (%.0f/s), ratio %.2f", n, raw.Round(time.Millisecond), rawRate,
			rebuild.Round(time.Millisecond), rebuildRate, rebuildRate/rawRate)
	}
}

// replayRaw reads the whole events stream with an ordered consumer, touching each
// message's metadata as any consumer must, and returns how long it took.
func replayRaw(tb testing.TB, js jetstream.JetStream, names events.Names, last uint64) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()
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
		if meta.Sequence.Stream >= last {
			return time.Since(began)
		}
	}
}
