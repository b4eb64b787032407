package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// natsNode is one nats-server process of a test cluster.
type natsNode struct {
	t    *testing.T
	bin  string // the program (testtools.Path); "" is nats-server
	env  []string
	name string
	args []string
	cmd  *exec.Cmd
	log  *syncBuffer
	url  string
}

func (n *natsNode) start() {
	n.t.Helper()
	n.log = &syncBuffer{}
	bin := n.bin
	if bin == "" {
		bin = "nats-server"
	}
	n.cmd = exec.Command(testtools.Path(n.t, bin), n.args...)
	n.cmd.Env = append(os.Environ(), n.env...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	require.NoError(n.t, n.cmd.Start())
}

func (n *natsNode) kill9() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
}

// startNATSCluster runs three nats-server processes with JetStream, routed on loopback.
func startNATSCluster(t *testing.T) []*natsNode {
	t.Helper()
	var nodes []*natsNode
	var routes []string
	for range 3 {
		routes = append(routes, "nats://"+freeAddr(t))
	}
	for i := range 3 {
		addr := freeAddr(t)
		n := &natsNode{t: t, name: fmt.Sprintf("ns%d", i+1), url: "nats://" + addr}
		host, port, _ := strings.Cut(addr, ":")
		n.args = []string{"-n", n.name, "-a", host, "-p", port, "-js", "-sd", filepath.Join(t.TempDir(), n.name),
			"--cluster_name", "cairn", "--cluster", routes[i], "--routes", strings.Join(routes, ",")}
		n.start()
		nodes = append(nodes, n)
	}
	for _, n := range nodes { // every server accepts clients before anything connects
		require.Eventually(t, func() bool {
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url, "nats://"), 100*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err == nil
		}, 30*time.Second, 20*time.Millisecond, "%s does not accept clients", n.name)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if n.cmd.ProcessState == nil {
				n.kill9()
			}
			if t.Failed() {
				t.Logf("%s log (tail):\n%s", n.name, tailText(n.log.String(), 30))
			}
		}
	})
	return nodes
}

func tailText(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func clusterURLs(nodes []*natsNode) string {
	var u []string
	for _, n := range nodes {
		u = append(u, n.url)
	}
	return strings.Join(u, ",")
}

// startClusterServe runs `cairn serve` on the NATS cluster (R3) with its own views.
func startClusterServe(t *testing.T, name, urls string) *serve {
	t.Helper()
	s := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t)}
	s.args = []string{"serve", "--data", s.data, "--nats", urls, "--replicas", "3", "--http", s.httpAddr,
		// The load's nodes have no agent: a heartbeat timeout within the test would
		// have the watchdog mark them offline while the final check waits for both
		// serves to reach the stream's last sequence, moving it on.
		"--name", name, "--lease-ttl", "2s", "--heartbeat-timeout", "10m"}
	return s.run(name)
}

// leaderInfo is GET /cairn/v1/leader.
type leaderInfo struct {
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	This   bool   `json:"this"`
	// ClockStepMS: the largest forward step of the bucket leader's clock the serve saw.
	ClockStepMS int64 `json:"clock_step_ms"`
}

func getLeader(s *serve) (leaderInfo, bool) {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(s.url("/cairn/v1/leader"))
	if err != nil {
		return leaderInfo{}, false
	}
	defer resp.Body.Close()
	var l leaderInfo
	if json.NewDecoder(resp.Body).Decode(&l) != nil {
		return leaderInfo{}, false
	}
	return l, true
}

// TestClusterFaults (issue 11): 3 nats-server processes, 2 `cairn serve --replicas 3`,
// 3 sim agents, commands from 4 clients (each unanswered or `unavailable` command
// retried with the same command id). During the load the stream leader's nats-server is
// SIGKILLed and restarted, then the serve holding the side-effect lease. Afterwards:
// every acknowledged command's events are in the stream exactly once, no event of a
// refused command, both serves' views equal each other and a replay, DRBD allocations
// unique, no agent carried out an older desired state than one it had carried out, and
// never were both serves leading at one sampled moment. CAIRN_FAULT_ROUNDS (default 1)
// repeats the two faults; the figures are logged.
func TestClusterFaults(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("CAIRN_FAULT_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	nodes := startNATSCluster(t)
	urls := clusterURLs(nodes)
	serves := map[string]*serve{"cp-a": startClusterServe(t, "cp-a", urls), "cp-b": startClusterServe(t, "cp-b", urls)}

	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	cl := &commandLog{nc: nc}
	send := cl.send
	must := func(verb, body string) {
		t.Helper()
		c := send(verb, body, 60*time.Second)
		require.True(t, c.ok, "%s %s: answered %v code %s", verb, body, c.answered, c.code)
	}
	must("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 3; i++ {
		must("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i))
		must("sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":104857600}`, i))
	}
	must("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)

	// Sim agents on the cluster, logging every desired state they take (debug).
	simDir := filepath.Join(t.TempDir(), "sim")
	agents := map[string]*exec.Cmd{}
	for i := 1; i <= 3; i++ {
		root := filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/cairn/thin"), 0o755))
		agents[fmt.Sprintf("n%d", i)] = startAgent(t, nil, agentOpts{node: fmt.Sprintf("n%d", i), root: root, kernel: "sim", simDir: simDir,
			nats: urls, extra: []string{"--log-level", "debug", "--heartbeat-interval", "1s"}})
	}

	// Leader sampling: both serves asked every 25 ms.
	var both, samples atomic.Int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(25 * time.Millisecond):
			}
			n := 0
			for _, s := range serves {
				if l, ok := getLeader(s); ok && l.This {
					n++
				}
			}
			samples.Add(1)
			if n > 1 {
				both.Add(1)
			}
		}
	}()

	// The load: 4 clients, node.add and now and then rg.spawn.
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	for c := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for k := 0; ; k++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				if k%6 == 5 {
					send("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":"r-%d-%d","size_kib":4096}`, c, k), 60*time.Second)
				} else {
					send("node.add", fmt.Sprintf(`{"name":"x%d-%d","host":"hx%d-%d","address":"10.1.%d.%d"}`, c, k, c, k, c, k%250+1), 60*time.Second)
				}
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			}
		}()
	}

	// probe measures how long after t0 a fresh command is first accepted: a new node.add
	// every 100 ms, each on its own (1 s request timeout, retried with its id).
	probeN := 0
	probe := func(t0 time.Time) time.Duration {
		got := make(chan time.Time, 1)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer func() { close(stop); wg.Wait() }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case at := <-got:
				return at.Sub(t0)
			case <-tick.C:
			}
			if time.Since(t0) > 60*time.Second {
				return -1
			}
			probeN++
			n := probeN
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := send("node.add", fmt.Sprintf(`{"name":"probe-%d","host":"hp%d","address":"10.2.%d.%d"}`, n, n, n/250, n%250+1), 30*time.Second)
				if c.ok {
					select {
					case got <- c.acked:
					default:
					}
				}
			}()
		}
	}
	var leaderKills, serveKills []time.Duration
	time.Sleep(2 * time.Second)
	for round := 1; round <= rounds; round++ {
		// 1. SIGKILL the nats-server that leads the event stream.
		info, err := js.Stream(context.Background(), "CAIRN_EVENTS")
		require.NoError(t, err)
		leader := info.CachedInfo().Cluster.Leader
		var victim *natsNode
		for _, n := range nodes {
			if n.name == leader {
				victim = n
			}
		}
		require.NotNil(t, victim, "stream leader %q", leader)
		t0 := time.Now()
		victim.kill9()
		d := probe(t0)
		require.Positive(t, d, "no command accepted after the stream leader died")
		leaderKills = append(leaderKills, d)
		t.Logf("round %d: stream leader %s killed; first accepted command after %s", round, leader, d.Round(time.Millisecond))
		victim.start()
		time.Sleep(3 * time.Second)

		// 2. SIGKILL the serve holding the lease.
		var holder, other string
		require.Eventually(t, func() bool {
			for name, s := range serves {
				if l, ok := getLeader(s); ok && l.This {
					holder = name
				}
			}
			return holder != ""
		}, 20*time.Second, 20*time.Millisecond, "no serve holds the lease")
		for name := range serves {
			if name != holder {
				other = name
			}
		}
		t1 := time.Now()
		serves[holder].kill9()
		require.Eventually(t, func() bool { l, ok := getLeader(serves[other]); return ok && l.This }, 30*time.Second, 10*time.Millisecond,
			"%s did not take the lease over", other)
		d = time.Since(t1)
		serveKills = append(serveKills, d)
		t.Logf("round %d: leading serve %s killed; %s leads (side effects resumed) after %s", round, holder, other, d.Round(time.Millisecond))
		serves[holder].start()
		time.Sleep(2 * time.Second)
	}
	close(stopLoad)
	load.Wait()
	close(stopSampling)
	sampling.Wait()

	// Both serves catch up with the stream.
	st, err := js.Stream(context.Background(), "CAIRN_EVENTS")
	require.NoError(t, err)
	last := st.CachedInfo().State.LastSeq
	digests := map[string]digest{}
	for name, s := range serves {
		require.Eventually(t, func() bool {
			status, body := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
			if status != 200 {
				return false
			}
			digests[name] = decode[digest](t, body)
			return digests[name].Seq == last
		}, 30*time.Second, 50*time.Millisecond, "serve %s did not catch up to %d", name, last)
	}
	assert.Equal(t, digests["cp-a"], digests["cp-b"], "the two serves' views")
	out, code := run(t, "views", "at", "--nats", urls, "--seq", fmt.Sprint(last))
	require.Equal(t, 0, code, out)
	assert.Equal(t, digests["cp-a"], decode[digest](t, out), "a replay of the stream")

	// Every acknowledged command exactly once; nothing of a refused one.
	cl.checkStored(t, storedCommands(t, "--nats", urls), last)

	// DRBD allocations stay unique.
	status, body := httpJSON(t, "GET", serves["cp-a"].url("/cairn/v1/resources?limit=10000"), "")
	require.Equal(t, 200, status)
	var list struct {
		Resources []struct {
			Name     string `json:"name"`
			Port     int    `json:"port"`
			Replicas []struct {
				Node   string `json:"node"`
				NodeID int    `json:"node_id"`
				Minors []struct {
					Minor int `json:"minor"`
				} `json:"minors"`
			} `json:"replicas"`
		} `json:"resources"`
		Next string `json:"next"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Empty(t, list.Next)
	rds := list.Resources
	ports := map[int]string{}
	minors := map[string]string{}
	for _, rd := range rds {
		if o, dup := ports[rd.Port]; dup {
			t.Errorf("port %d of %s and %s", rd.Port, rd.Name, o)
		}
		ports[rd.Port] = rd.Name
		ids := map[int]bool{}
		for _, r := range rd.Replicas {
			if ids[r.NodeID] {
				t.Errorf("%s: node id %d twice", rd.Name, r.NodeID)
			}
			ids[r.NodeID] = true
			for _, m := range r.Minors {
				k := fmt.Sprintf("%s/%d", r.Node, m.Minor)
				if o, dup := minors[k]; dup {
					t.Errorf("minor %s of %s and %s", k, rd.Name, o)
				}
				minors[k] = rd.Name
			}
		}
	}
	t.Logf("%d resource definitions, ports, node ids and minors unique", len(rds))

	// No agent carried out an older desired state than one it had (read once stopped).
	for node, a := range agents {
		_ = a.Process.Kill()
		_ = a.Wait()
		log := a.Stdout.(*bytes.Buffer)
		seen := map[string]uint64{}
		taken := 0
		for _, line := range strings.Split(log.String(), "\n") {
			var l struct {
				Message  string `json:"message"`
				Subject  string `json:"subject"`
				Revision uint64 `json:"revision"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Message != "desired state" {
				continue
			}
			taken++
			if l.Revision < seen[l.Subject] {
				t.Errorf("agent %s took %s at revision %d after %d", node, l.Subject, l.Revision, seen[l.Subject])
			}
			seen[l.Subject] = max(seen[l.Subject], l.Revision)
		}
		t.Logf("agent %s took %d desired states on %d subjects, none older than one before", node, taken, len(seen))
	}

	if os.Getenv("CAIRN_FAULT_DEBUG") != "" {
		for name, s := range serves {
			t.Logf("serve %s log:\n%s", name, s.log.String())
		}
	}
	assert.Zero(t, both.Load(), "both serves led at one sampled moment")
	sort.Slice(leaderKills, func(i, j int) bool { return leaderKills[i] < leaderKills[j] })
	sort.Slice(serveKills, func(i, j int) bool { return serveKills[i] < serveKills[j] })
	t.Logf("%d leader samples, never two; stream leader killed -> first accepted command: %v; leading serve killed -> side effects resumed: %v (lease TTL 2s)",
		samples.Load(), leaderKills, serveKills)
}

// TestServeWaitsForItsNATS: `cairn serve --nats` started before its NATS server is up
// waits for it (it exited at once with "no servers available").
func TestServeWaitsForItsNATS(t *testing.T) {
	addr := freeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	httpAddr := freeAddr(t)
	log := &syncBuffer{}
	sv := exec.Command(cairnBin, "serve", "--data", t.TempDir(), "--nats", "nats://"+addr, "--http", httpAddr)
	sv.Stdout, sv.Stderr = log, log
	require.NoError(t, sv.Start())
	exited := make(chan error, 1)
	go func() { exited <- sv.Wait() }()
	t.Cleanup(func() {
		_ = sv.Process.Kill()
		<-exited
	})
	select { // serve runs for a second before its NATS server is there
	case err := <-exited:
		exited <- err
		t.Fatalf("serve exited without its NATS server (%v):\n%s", err, log.String())
	case <-time.After(time.Second):
	}
	n := &natsNode{t: t, name: "late", args: []string{"-n", "late", "-a", host, "-p", port, "-js", "-sd", t.TempDir()}}
	n.start()
	t.Cleanup(n.kill9)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "serve not ready after its NATS server came up:\n%s", log.String())
}
