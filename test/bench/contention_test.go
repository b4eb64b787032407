package bench

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// contentionCluster makes the cluster the contention benchmarks place on: nodes
// storage nodes without failure domains (node.add is then one message on its own
// subject), each with a thin pool too large to run out, and group g placing three disks.
func contentionCluster(b *testing.B, s *server.Server, nodes int) {
	submit(b, s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := range nodes {
		submit(b, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.%d.%d"}`, i, i, i/250, i%250+1))
		submit(b, s, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":%d}`, i, uint64(1)<<50))
	}
	submit(b, s, "rg.create", `{"name":"g","place_count":3,"storage_pool":"thin"}`)
}

// conflictsOf is cairn_command_append_conflicts_total of one verb so far.
func conflictsOf(b *testing.B, verb string) float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cairn_command_append_conflicts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verb" && l.GetValue() == verb {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// connect opens a client connection over TCP, as an external client.
func connect(b *testing.B, s *server.Server) *nats.Conn {
	nc, err := nats.Connect(s.NATSAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// send sends one command and returns its reply.
func send(nc *nats.Conn, verb, body string) (admission.Reply, error) {
	var r admission.Reply
	resp, err := nc.Request("cairn.cmd."+verb, []byte(body), 30*time.Second)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(resp.Data, &r)
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkSpawnUnderNodeAdds: rg.spawn, one after another from one client, while
// other clients add nodes at a steady 300 node.add/s (paced), for 20 s, against a
// serve with its embedded server (fsync on every write), every client over TCP. Asked:
// rg.spawn p99 within 100 ms and none refused conflict. Before narrow boundaries every
// node.add moved rg.spawn's boundary (the whole stream): 40 spawns in 75 s, one 35 s.
func BenchmarkSpawnUnderNodeAdds(b *testing.B) {
	const rate, clients, run = 300, 10, 20 * time.Second
	for range b.N {
		s := servertest.Start(b, benchServer, func(c *server.Config) {
			c.Admission = commands.Options{Ports: replicas.Range{Min: 7000, Max: 30000}}
		})
		contentionCluster(b, s, 30)
		conflictsBefore := conflictsOf(b, "rg.spawn")
		stop := make(chan struct{})
		var added, addFailed atomic.Int64
		var wg sync.WaitGroup
		for c := range clients {
			nc := connect(b, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(time.Second * clients / rate)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					name := fmt.Sprintf("x%d-%d", c, i)
					r, err := send(nc, "node.add", fmt.Sprintf(`{"name":%q,"host":%q,"address":"10.9.%d.%d"}`, name, name, c, i%250+1))
					if err != nil || !r.OK {
						addFailed.Add(1)
						continue
					}
					added.Add(1)
				}
			}()
		}
		nc := connect(b, s)
		var lat []time.Duration
		refused := map[string]int{}
		start := time.Now()
		for i := 0; time.Since(start) < run; i++ {
			t0 := time.Now()
			r, err := send(nc, "rg.spawn", fmt.Sprintf(`{"resource_group":"g","name":"pvc-%d","size_kib":1048576}`, i))
			lat = append(lat, time.Since(t0))
			switch {
			case err != nil:
				refused["no reply"]++
			case !r.OK:
				refused[r.Error.Code]++
			}
		}
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		conflicts := conflictsOf(b, "rg.spawn") - conflictsBefore
		p50, p99 := percentile(lat, 50), percentile(lat, 99)
		b.ReportMetric(float64(p99.Microseconds())/1000, "spawn_p99_ms")
		b.ReportMetric(float64(refused["conflict"]), "spawns_refused_conflict")
		b.ReportMetric(conflicts, "spawn_append_conflicts")
		b.Logf("%d rg.spawn in %s under %.0f node.add/s (%d added, %d failed): p50 %s, p99 %s, max %s; refused %v; conflicting appends %.0f",
			len(lat), elapsed.Round(time.Millisecond), float64(added.Load())/elapsed.Seconds(), added.Load(), addFailed.Load(),
			p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), percentile(lat, 100).Round(10*time.Microsecond), refused, conflicts)
		s.Close()
	}
}

// BenchmarkConcurrentSpawns: 64 rg.spawn on distinct names from 8 clients at once,
// against the same 64 from one client, on a 30-node cluster (three disks each), each
// client over TCP; five rounds of each, alternating. Asked: conflicting first attempts
// at most 5 % of the commands (before narrow boundaries: ~98 %), throughput with 8
// clients at least 2x one client's.
func BenchmarkConcurrentSpawns(b *testing.B) {
	const perRound, clients, rounds = 64, 8, 5
	for range b.N {
		s := servertest.Start(b, benchServer, func(c *server.Config) {
			c.Admission = commands.Options{Ports: replicas.Range{Min: 7000, Max: 30000}}
		})
		contentionCluster(b, s, 30)
		conns := make([]*nats.Conn, clients)
		for i := range conns {
			conns[i] = connect(b, s)
		}
		next := 0
		spawn := func(nc *nats.Conn) {
			name := fmt.Sprintf("pvc-%d", next)
			next++
			if r, err := send(nc, "rg.spawn", fmt.Sprintf(`{"resource_group":"g","name":%q,"size_kib":1048576}`, name)); err != nil || !r.OK {
				b.Errorf("rg.spawn %s: %v %+v", name, err, r.Error)
			}
		}
		var one, eight time.Duration
		var conflicts float64
		for range rounds {
			t0 := time.Now()
			for range perRound {
				spawn(conns[0])
			}
			one += time.Since(t0)

			names := make([]string, perRound)
			for i := range names {
				names[i] = fmt.Sprintf("pvc-%d", next)
				next++
			}
			before := conflictsOf(b, "rg.spawn")
			var wg sync.WaitGroup
			t0 = time.Now()
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := c; i < perRound; i += clients {
						if r, err := send(conns[c], "rg.spawn", fmt.Sprintf(`{"resource_group":"g","name":%q,"size_kib":1048576}`, names[i])); err != nil || !r.OK {
							b.Errorf("rg.spawn %s: %v %+v", names[i], err, r.Error)
						}
					}
				}()
			}
			wg.Wait()
			eight += time.Since(t0)
			conflicts += conflictsOf(b, "rg.spawn") - before
		}
		n := float64(perRound * rounds)
		oneRate, eightRate := n/one.Seconds(), n/eight.Seconds()
		share := conflicts / n
		b.ReportMetric(oneRate, "one_client_spawns/s")
		b.ReportMetric(eightRate, "eight_clients_spawns/s")
		b.ReportMetric(eightRate/oneRate, "speedup")
		b.ReportMetric(share*100, "conflict_%")
		b.Logf("%d rg.spawn: one client %.0f/s, %d clients %.0f/s (%.2fx); conflicting appends with %d clients: %.0f (%.1f %% of commands)",
			perRound*rounds, oneRate, clients, eightRate, eightRate/oneRate, clients, conflicts, share*100)
		s.Close()
	}
}
