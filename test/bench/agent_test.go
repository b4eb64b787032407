package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/agents/drbdagent"
	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// simAgent runs an in-process agent with the simulated kernel under root; hook sees
// every step of every reconcile. stop ends it as a dead host would end (its peers see
// it gone, it sends no heartbeat); it is also stopped when the benchmark ends.
func simAgent(b *testing.B, natsURL, node, root string, hook func(rd, step string) bool) (stop func()) {
	names := events.NewNames("")
	nc, err := nats.Connect(natsURL, nats.CustomInboxPrefix(names.NodeInbox(node)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	if err := os.MkdirAll(filepath.Join(root, "var/lib/cairn/thin"), 0o755); err != nil {
		b.Fatal(err)
	}
	exec := &execx.Runner{Timeout: time.Minute, Log: zerolog.Nop(), Env: []string{"DRBD_DRIVER_VERSION_OVERRIDE=9.2.0"}}
	paths := drbdagent.NewPaths(root)
	sim := &drbdagent.Sim{Node: node, Root: paths.Root, Dir: drbdagent.DefaultSimDir(paths.Root), Exec: exec, MainConf: paths.MainConf, Log: zerolog.Nop()}
	rec, err := drbdagent.New(drbdagent.Config{Node: node, Names: names, Paths: paths, Exec: exec, Kernel: sim, Pub: nc,
		Log: zerolog.Nop(), PretendHost: true, AfterStep: hook})
	if err != nil {
		b.Fatal(err)
	}
	workers, _ := strconv.Atoi(os.Getenv("CAIRN_BENCH_AGENT_WORKERS")) // 0: the default (8)
	a, err := agents.New(nc, agents.Options{Node: node, Names: names, Reconciler: rec, Log: zerolog.Nop(), Workers: workers,
		HeartbeatInterval: 300 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	release, err := sim.Hold() // alive for its peers until stopped (the sim's dead host)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); nc.Close(); release() }) }
	b.Cleanup(stop)
	go rec.Run(ctx)
	go func() { _ = a.Run(ctx) }()
	return stop
}

// BenchmarkReplicaAddToResourceFile: 100 resources have a replica on n1; 100
// replica.add commands for n2 are sent at once over loopback TCP. Measured per
// resource: from the command's accepted reply to the new replica's resource file
// installed on n2 (the agent's "installed" step), with both agents in process on the
// simulated kernel (real drbdadm checks every file), and to the replica applied (seeded,
// adjusted, synced from n1). Reports p50 and p99. CAIRN_BENCH_AGENT_WORKERS sets the
// agents' --workers.
func BenchmarkReplicaAddToResourceFile(b *testing.B) {
	testtools.Need(b, "drbdadm", "drbdmeta")
	const n = 100
	for range b.N {
		s := servertest.Start(b, benchServer)
		nc := servertest.Client(b, s)
		request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
		for i := 1; i <= 2; i++ {
			request(b, nc, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
			request(b, nc, "sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin%d","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1073741824}`, i, i))
		}
		request(b, nc, "rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thin1"}`)
		base := b.TempDir()
		var mu sync.Mutex
		installed := map[string]time.Time{}
		adjusted := map[string]time.Time{}
		applied := map[string]bool{}
		simAgent(b, s.NATSAddr, "n1", filepath.Join(base, "n1"), func(rd, step string) bool {
			if step == "adjusted" {
				mu.Lock()
				applied[rd] = true
				mu.Unlock()
			}
			return false
		})
		simAgent(b, s.NATSAddr, "n2", filepath.Join(base, "n2"), func(rd, step string) bool {
			mu.Lock()
			switch step {
			case "installed":
				installed[rd] = time.Now()
			case "adjusted":
				adjusted[rd] = time.Now()
			}
			mu.Unlock()
			return false
		})
		for i := range n {
			request(b, nc, "rg.spawn", fmt.Sprintf(`{"resource_group":"rg1","name":"r%d","size_kib":4096}`, i))
		}
		waitFor(b, 10*time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(applied) == n })
		accepted := make([]time.Time, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				request(b, nc, "replica.add", fmt.Sprintf(`{"resource":"r%d","node":"n2","storage_pool":"thin2"}`, i))
				accepted[i] = time.Now()
			}()
		}
		wg.Wait()
		waitFor(b, 10*time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return len(adjusted) == n })
		pct := func(at map[string]time.Time) (time.Duration, time.Duration) {
			lat := make([]time.Duration, n)
			for i := range n {
				lat[i] = max(0, at[fmt.Sprintf("r%d", i)].Sub(accepted[i]))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			return lat[n/2], lat[n*99/100]
		}
		mu.Lock()
		p50, p99 := pct(installed)
		a50, a99 := pct(adjusted)
		mu.Unlock()
		b.ReportMetric(float64(p50.Milliseconds()), "p50_ms")
		b.ReportMetric(float64(p99.Milliseconds()), "p99_ms")
		b.ReportMetric(float64(a99.Milliseconds()), "applied_p99_ms")
		b.Logf("%d replica.add in flight: accepted -> resource file on the new node p50 %s, p99 %s; -> adjusted p50 %s, p99 %s (all %d in %s)",
			n, p50.Round(time.Millisecond), p99.Round(time.Millisecond), a50.Round(time.Millisecond), a99.Round(time.Millisecond), n, time.Since(start).Round(time.Millisecond))
		b.Logf("external commands run by both agents: %s", execCounts())
		nc.Close()
	}
}

// execCounts sums cairn_exec_commands_total by command.
func execCounts() string {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, mf := range mfs {
		if mf.GetName() != "cairn_exec_commands_total" {
			continue
		}
		by := map[string]float64{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "command" {
					by[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
		for c, v := range by {
			parts = append(parts, fmt.Sprintf("%s %.0f", c, v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func waitFor(b *testing.B, timeout time.Duration, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cairnBinary(b *testing.B) string {
	if bin := os.Getenv("CAIRN_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "cairn")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cairn").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// proc is a running cairn process.
type proc struct {
	cmd *exec.Cmd
}

func startProc(b *testing.B, bin string, args ...string) *proc {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &proc{cmd: cmd}
	b.Cleanup(func() { p.stop() })
	return p
}

func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func startServe(b *testing.B, bin, data string) (*proc, string) {
	natsAddr, httpAddr := freePort(b), freePort(b)
	p := startProc(b, bin, "serve", "--data", data, "--nats-listen", natsAddr, "--http", httpAddr, "--log-level", "warn", "--heartbeat-timeout", "1h")
	waitFor(b, 5*time.Minute, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p, "nats://" + natsAddr
}

// appliedCounter counts resources whose status (published after since) says applied.
func appliedCounter(b *testing.B, nc *nats.Conn, node string, since time.Time) func() int {
	var mu sync.Mutex
	seen := map[string]bool{}
	_, err := nc.Subscribe(events.NewNames("").Status(node, "drbd", "*"), func(m *nats.Msg) {
		var st drbd.Status
		if json.Unmarshal(m.Data, &st) == nil && st.Phase == drbd.PhaseApplied && st.At.After(since) {
			mu.Lock()
			seen[st.Resource] = true
			mu.Unlock()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
}

// cachedAgentSetup builds, once, a serve data directory and an agent root with n
// resources carried out on node n1 (sim kernel), under $TMPDIR/cairn-bench-agent-<n>.
// The restart benchmark runs on it in place (its paths are absolute).
func cachedAgentSetup(b *testing.B, bin string, n int) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("cairn-bench-agent-%d", n))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	_ = os.RemoveAll(dir)
	root := filepath.Join(dir, "n1")
	if err := os.MkdirAll(filepath.Join(root, "var/lib/cairn/thin"), 0o755); err != nil {
		b.Fatal(err)
	}
	serve, url := startServe(b, bin, filepath.Join(dir, "data"))
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	request(b, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	request(b, nc, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	request(b, nc, "sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1099511627776}`)
	request(b, nc, "rg.create", `{"name":"rg1","place_count":1,"storage_pool":"thin"}`)
	count := appliedCounter(b, nc, "n1", time.Time{})
	agent := startProc(b, bin, "agent", "--node", "n1", "--nats", url, "--root", root, "--kernel", "sim", "--log-level", "warn")
	began := time.Now()
	for i := range n {
		request(b, nc, "rg.spawn", fmt.Sprintf(`{"resource_group":"rg1","name":"pvc-%d","size_kib":4096}`, i))
	}
	waitFor(b, 60*time.Minute, func() bool { return count() == n })
	b.Logf("setup: %d resources created and seeded by one agent in %s", n, time.Since(began).Round(time.Second))
	agent.stop()
	serve.stop()
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkAgentRestart1000: the real `cairn agent --kernel sim` restarts on a node
// that holds 1,000 resources (created, seeded and up from an earlier run; built once
// and cached under $TMPDIR). Measured: from the process start to the 1,000th status
// "applied" (every resource reconciled from the latest desired state: files compared,
// adjust, status with the current GI), and its peak RSS (VmHWM). CAIRN_BENCH_AGENT_RESOURCES
// overrides the count.
func BenchmarkAgentRestart1000(b *testing.B) {
	testtools.Need(b, "drbdadm", "drbdmeta")
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_AGENT_RESOURCES")); err == nil && v > 0 {
		n = v
	}
	bin := cairnBinary(b)
	dir := cachedAgentSetup(b, bin, n)
	for range b.N {
		serve, url := startServe(b, bin, filepath.Join(dir, "data"))
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		count := appliedCounter(b, nc, "n1", start)
		agent := startProc(b, bin, "agent", "--node", "n1", "--nats", url, "--root", filepath.Join(dir, "n1"), "--kernel", "sim", "--log-level", "warn")
		waitFor(b, 30*time.Minute, func() bool { return count() == n })
		elapsed := time.Since(start)
		hwm := procStatus(b, agent.cmd.Process.Pid, "VmHWM")
		b.ReportMetric(elapsed.Seconds(), "total_s")
		b.ReportMetric(float64(hwm)/1024, "peak_rss_MiB")
		b.Logf("agent restart with %d resources: all applied after %s (%.0f resources/s), peak RSS %d MiB",
			n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), hwm/1024)
		agent.stop()
		nc.Close()
		serve.stop()
	}
}
