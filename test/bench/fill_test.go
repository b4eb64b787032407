// Package bench holds the benchmarks the spine issue asks for, each run side by side
// with its raw JetStream baseline in the same process and reported as a ratio. Run
// them with `make bench` (CAIRN_BENCH_EVENTS sizes the big history, default 1,000,000).
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/events"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// historySize is the size of the big history (CAIRN_BENCH_EVENTS, default 1,000,000).
func historySize() int {
	if n, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// fillHistory writes a valid history of n events into dataDir's events stream: one
// cluster, 1,000 nodes, then node.state-changed events flipping them offline and online.
// The views stay small while the log grows, as in a long-lived cluster. It writes with
// the embedded server's fsync-every-write off (the fill is set-up, not measured) and
// shuts the server down, so the data directory is ready for `cairn serve`.
func fillHistory(tb testing.TB, dataDir string, n int) {
	tb.Helper()
	js, done := openFill(tb, dataDir)
	defer done()
	names := events.NewNames("")
	const nodes = 1000
	state := make([]string, nodes)
	began := time.Now()
	for i := 0; i < n; i++ {
		var d events.Draft
		switch {
		case i == 0:
			d = events.Draft{Subject: names.Event("cluster", "c1"), Payload: &events.ClusterCreated{Name: "c1", DataChunks: 1, ParityChunks: 1}}
		case i <= nodes:
			name := fmt.Sprintf("hist-%d", i-1)
			state[i-1] = events.StateOnline
			d = events.Draft{Subject: names.Event("node", name), Payload: &events.NodeAdded{Name: name, Host: "h-" + name, Address: "10.1.0.1", Role: events.RoleStorage}}
		default:
			k := i % nodes
			name := fmt.Sprintf("hist-%d", k)
			next := events.StateOffline
			if state[k] == events.StateOffline {
				next = events.StateOnline
			}
			d = events.Draft{Subject: names.Event("node", name), Payload: &events.NodeStateChanged{Name: name, State: next, Previous: state[k]}}
			state[k] = next
		}
		id := uuid.Must(uuid.NewV7()).String() // what admission gives a command sent without an id
		envs, err := events.Seal(events.Meta{CommandID: id, CorrelationID: id, CausationID: id, Actor: "bench", OccurredAt: time.Now()}, []events.Draft{d})
		if err != nil {
			tb.Fatal(err)
		}
		body, _ := events.Encode(envs[0])
		m := nats.NewMsg(d.Subject)
		m.Data = body
		// A busy machine can keep 4,096 publishes outstanding for longer than the
		// default 200 ms stall wait: the fill waits instead of failing.
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		tb.Fatal("fill did not complete")
	}
	tb.Logf("filled %d events in %s", n, time.Since(began).Round(time.Millisecond))
}

// openFill starts an embedded server on dataDir's JetStream store (fsync on every write
// off: a fill is set-up, not measured) with Cairn's streams, and returns an in-process
// JetStream client for asynchronous publishing; done shuts it down, leaving the data
// directory ready for `cairn serve`.
func openFill(tb testing.TB, dataDir string) (jetstream.JetStream, func()) {
	tb.Helper()
	srv, err := server.StartEmbedded(server.EmbeddedOptions{StoreDir: filepath.Join(dataDir, "jetstream")})
	if err != nil {
		tb.Fatal(err)
	}
	nc, err := server.ConnectInProcess(srv, "fill")
	if err != nil {
		tb.Fatal(err)
	}
	done := func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown() }
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err == nil {
		err = events.EnsureStreams(context.Background(), js, events.NewNames(""), events.StreamOptions{})
	}
	if err != nil {
		done()
		tb.Fatal(err)
	}
	return js, done
}

// cachedHistory returns a data directory holding a filled history of n events, made once
// per process run under the test's temp root and copied by the caller when it mutates it.
func cachedHistory(tb testing.TB, n int) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("cairn-bench-history-%d", n))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	fillHistory(tb, dir, n)
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}
