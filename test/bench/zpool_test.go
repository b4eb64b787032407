package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/agents/zpoolagent"
	"github.com/cairn-io/cairn/agents/zpoolagent/zpoolfake"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// BenchmarkPoolGrantToCheck: the time from a pool.import being accepted (its reply is
// back at the client) to the agent starting the activity check (CheckStartedAt of its
// checking status), over export+import cycles on loopback TCP: `cairn serve`'s server
// in process (embedded NATS, fsync on every write), the agent loop with the zpool
// reconciler on its own TCP connection, a real OpenZFS image (single-exported) and the
// fake zpool (the real one needs the kernel module). The agent's hostid is the one that
// exported the pool, so the check is not needed and a cycle takes milliseconds; the
// path measured (admission, projector, outbox, dispatcher, CAIRN_NODES, the agent's
// consumer, the worker) is the same as for a check that lasts 20 s.
//
//	go test -run XXX -bench PoolGrantToCheck -benchtime 1x ./test/bench/
func BenchmarkPoolGrantToCheck(b *testing.B) {
	const grants = 200
	s := servertest.Start(b, benchServer)
	dir := b.TempDir()
	dev := filepath.Join(dir, "disk0.img")
	zfsimage.GunzipTo(b, "../../storage/zfs/testdata/single-exported/disk0.img.gz", dev)
	if err := zpoolfake.Relabel([]string{dev}, map[string]any{"name": "tank"}); err != nil {
		b.Fatal(err)
	}
	const hostA = 0x11111111 // exported the fixture
	client := servertest.Client(b, s)
	request(b, client, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	request(b, client, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	request(b, client, "pool.create", fmt.Sprintf(`{"name":"tank","devices":[%q],"nodes":["n1"]}`, dev))

	statuses := make(chan zpool.Status, 64)
	sub, err := client.Subscribe("cairn.status.n1.zpool.tank", func(m *nats.Msg) {
		var st zpool.Status
		if json.Unmarshal(m.Data, &st) == nil {
			statuses <- st
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()

	anc := servertest.Client(b, s)
	names := events.NewNames("")
	jsx, err := jetstream.New(anc)
	if err != nil {
		b.Fatal(err)
	}
	r, err := zpoolagent.New(zpoolagent.Options{Node: "n1", Names: names,
		Zpool:     zpoolagent.Zpool{Exec: &zpoolfake.Fake{StateFile: filepath.Join(dir, "state.json"), HostID: hostA, Hostname: "h1"}},
		Publisher: zpoolagent.JetStreamPublisher(jsx), HostID: func() uint32 { return hostA }, WatchEvery: time.Second,
		Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	a, err := agents.New(anc, agents.Options{Node: "n1", Names: names, Log: zerolog.Nop(),
		Reconciler: agents.Mux{Names: names, Kinds: map[string]agents.Reconciler{zpoolagent.Kind: r}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)

	wait := func(phase string, grant uint64) zpool.Status {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case st := <-statuses:
				if st.Phase == phase && (grant == 0 || st.GrantSeq == grant) {
					return st
				}
				if st.Phase == zpool.PhaseRefused || st.Phase == zpool.PhaseFailed {
					b.Fatalf("status %+v", st)
				}
			case <-deadline:
				b.Fatalf("no %s status", phase)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		lat := make([]time.Duration, 0, grants)
		fromSend := make([]time.Duration, 0, grants)
		for range grants {
			sent := time.Now()
			resp, err := client.Request("cairn.cmd.pool.import", []byte(`{"pool":"tank","node":"n1"}`), 30*time.Second)
			accepted := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			var rep struct {
				OK     bool `json:"ok"`
				Events []struct {
					Seq uint64 `json:"seq"`
				} `json:"events"`
			}
			if json.Unmarshal(resp.Data, &rep) != nil || !rep.OK || len(rep.Events) != 1 {
				b.Fatalf("pool.import: %s", resp.Data)
			}
			st := wait(zpool.PhaseChecking, rep.Events[0].Seq)
			lat = append(lat, st.CheckStartedAt.Sub(accepted))
			fromSend = append(fromSend, st.CheckStartedAt.Sub(sent))
			wait(zpool.PhaseImported, rep.Events[0].Seq)
			request(b, client, "pool.export", `{"pool":"tank","node":"n1"}`)
			wait(zpool.PhaseExported, 0)
		}
		p := func(xs []time.Duration, q float64) time.Duration {
			s := append([]time.Duration(nil), xs...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			return s[min(len(s)-1, int(q*float64(len(s))))]
		}
		b.ReportMetric(float64(p(lat, 0.5).Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(p(lat, 0.99).Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(p(lat, 1).Microseconds())/1000, "max_ms")
		b.Logf("%d grants: accepted -> check started p50 %s p99 %s max %s; sent -> check started p50 %s p99 %s",
			grants, p(lat, 0.5), p(lat, 0.99), p(lat, 1), p(fromSend, 0.5), p(fromSend, 0.99))
	}
}
