package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/lease"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two serves on one real nats-server with different --lease-ttl: the second refuses to
// start with an error naming both TTLs (and the first keeps leading); `cairn lease
// set-ttl` refuses while a serve holds the lease, changes it once every serve is
// stopped, and then a serve with the new TTL starts.
func TestServesRefuseMixedLeaseTTLs(t *testing.T) {
	ns := singleNATS(t)
	require.Eventually(t, func() bool { _, code := run(t, "lease", "--help"); return code == 0 }, 5*time.Second, 50*time.Millisecond)

	serveWith := func(name, ttl string) *serve {
		s := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t)}
		s.args = []string{"serve", "--data", s.data, "--nats", ns.url, "--http", s.httpAddr, "--name", name, "--lease-ttl", ttl}
		return s
	}
	a := serveWith("a", "2s").run("a")
	require.Eventually(t, func() bool { l, ok := getLeader(a); return ok && l.This }, 20*time.Second, 50*time.Millisecond)

	b := serveWith("b", "400ms")
	cmd := exec.Command(cairnBin, b.args...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a serve with another lease TTL started:\n%s", out)
	require.Contains(t, string(out), "has TTL 2s, this serve's --lease-ttl is 400ms")
	l, ok := getLeader(a)
	require.True(t, ok && l.This, "the first serve stopped leading")

	_, stderr, code := runAll(t, "lease", "set-ttl", "1s", "--nats", ns.url)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "serve a holds the lease")
	a.stop()
	stdout, stderr, code := runAll(t, "lease", "set-ttl", "1s", "--nats", ns.url)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "TTL 1s")
	c := serveWith("c", "1s").run("c")
	require.Eventually(t, func() bool { l, ok := getLeader(c); return ok && l.This }, 20*time.Second, 50*time.Millisecond,
		fmt.Sprintf("the serve with the new TTL does not lead:\n%s", c.log))
}

// OldNATSServer is the program name of an older nats-server (2.11.9, without atomic
// batch publish) that .ci/run installs beside the current one.
const oldNATSServer = "nats-server-2.11.9"

// A serve refuses a nats-server older than the minimum (events.MinServerVersion), with
// an error naming the server's version and the minimum (on the old code it ran on one,
// where an acknowledged command could be stored several times).
func TestServeRefusesAnOldNATSServer(t *testing.T) {
	bin := testtools.Path(t, oldNATSServer)
	addr := freeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	log := &syncBuffer{}
	ns := exec.Command(bin, "-a", host, "-p", port, "-js", "-sd", t.TempDir())
	ns.Stdout, ns.Stderr = log, log
	require.NoError(t, ns.Start())
	t.Cleanup(func() { _ = ns.Process.Kill(); _ = ns.Wait() })
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "Server is ready") }, 20*time.Second, 20*time.Millisecond)
	cmd := exec.Command(cairnBin, "serve", "--data", t.TempDir(), "--nats", "nats://"+addr, "--http", freeAddr(t))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "serve ran on nats-server 2.11.9:\n%s", out)
	require.Contains(t, string(out), "is version 2.11.9; Cairn needs nats-server 2.12.0 or newer")
}

// SIGSTOP of the serve holding the lease, past the TTL (issue 29): the other serve takes
// over within the TTL and a campaign; at no sampled moment do both say they act; the
// frozen serve, thawed, does not act again (its validity ran out on its monotonic clock
// while it was stopped, and its next renewal finds the lease taken) and says so.
func TestLeaseHolderPausedPastTheTTL(t *testing.T) {
	ns := singleNATS(t)
	serveWith := func(name string) *serve {
		s := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t)}
		s.args = []string{"serve", "--data", s.data, "--nats", ns.url, "--http", s.httpAddr, "--name", name, "--lease-ttl", "2s"}
		return s.run(name)
	}
	a := serveWith("a")
	require.Eventually(t, func() bool { l, ok := getLeader(a); return ok && l.This }, 20*time.Second, 20*time.Millisecond)
	b := serveWith("b")
	first, _ := getLeader(a)

	var both, samples atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // both answer within 100 ms unless stopped; a stopped process acts on nothing
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			la, oka := getLeader(a)
			lb, okb := getLeader(b)
			samples.Add(1)
			if oka && okb && la.This && lb.This {
				both.Add(1)
			}
		}
	}()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	require.Eventually(t, func() bool { l, ok := getLeader(b); return ok && l.This }, 10*time.Second, 20*time.Millisecond)
	took := time.Since(stopped)
	time.Sleep(3 * time.Second) // well past the TTL
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { l, ok := getLeader(a); return ok && !l.This && l.Holder == "b" }, 10*time.Second, 20*time.Millisecond,
		"the thawed serve does not see b holding the lease")
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	lb, _ := getLeader(b)
	assert.True(t, lb.This, "b stopped leading")
	assert.Greater(t, lb.Token, first.Token, "b's token is not newer")
	assert.Zero(t, both.Load(), "both serves acted at once in %d of %d samples", both.Load(), samples.Load())
	assert.Contains(t, a.log.String(), "lease lost")
	t.Logf("takeover %s after SIGSTOP of the holder (TTL 2s); %d samples", took.Round(time.Millisecond), samples.Load())
}

// SIGSTOP of the nats-server holding the lease bucket (issue 29): the holder's renewals go
// unanswered, so it stops acting, but it keeps its lease: when the server thaws, the
// renewals it held are stored late and the holder recognises its own entry, and it acts
// again with the same token within a renewal or two (on the old code the first
// unanswered renewal gave the lease up, and the entry it had written kept everyone out
// for a whole TTL before a new token).
func TestLeaseSurvivesAPausedNATSServer(t *testing.T) {
	ns := singleNATS(t)
	var nc *nats.Conn
	require.Eventually(t, func() bool {
		var err error
		nc, err = nats.Connect(ns.url, nats.MaxReconnects(-1))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	// The pause must stay shorter than the TTL (past it the entry expires on the servers
	// and a new token is right): the holder stops acting at most TTL/2 after its last
	// renewal, and the server thaws as soon as it has.
	const ttl = 4 * time.Second
	l := lease.New(js, lease.Options{Bucket: "TEST_LEASE", Holder: "a", TTL: ttl, Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { _, ok := l.Leading(); return ok }, 10*time.Second, 10*time.Millisecond)
	token, _ := l.Leading()

	require.NoError(t, ns.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	require.Eventually(t, func() bool { _, ok := l.Leading(); return !ok }, ttl, 5*time.Millisecond, "acting while its renewals go unanswered")
	require.NoError(t, ns.cmd.Process.Signal(syscall.SIGCONT))
	paused := time.Since(stopped)
	thawed := time.Now()
	require.Eventually(t, func() bool { tk, ok := l.Leading(); return ok && tk == token }, 2*ttl, 10*time.Millisecond,
		"not acting again with its token after the server thawed")
	t.Logf("server paused %s; acting again %s after it thawed (TTL %s)", paused.Round(time.Millisecond), time.Since(thawed).Round(time.Millisecond), ttl)
}

// singleNATS runs one real nats-server process with JetStream on a free port until the
// test ends.
func singleNATS(t *testing.T) *natsNode {
	t.Helper()
	addr := freeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	ns := &natsNode{t: t, name: "ns1", url: "nats://" + addr,
		args: []string{"-n", "ns1", "-a", host, "-p", port, "-js", "-sd", filepath.Join(t.TempDir(), "ns1")}}
	ns.start()
	t.Cleanup(ns.kill9)
	return ns
}

// SIGSTOP of the nats-server that leads the lease bucket's stream, inside a 3-server
// cluster with 2 serves (issue 29, item 13): the bucket elects a new stream leader among
// the other two, and a serve leads again soon after that, well before the frozen server
// thaws; at no sampled moment do both serves act.
func TestLeaseSurvivesAFrozenBucketLeader(t *testing.T) {
	nodes := startNATSCluster(t)
	urls := clusterURLs(nodes)
	serves := []*serve{startClusterServe(t, "cp-a", urls), startClusterServe(t, "cp-b", urls)}
	leading := func() (n int, holder string) {
		for _, s := range serves {
			if l, ok := getLeader(s); ok && l.This {
				n, holder = n+1, l.Holder
			}
		}
		return n, holder
	}
	require.Eventually(t, func() bool { n, _ := leading(); return n == 1 }, 60*time.Second, 50*time.Millisecond)

	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	bucketLeader := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "KV_CAIRN_LEASE")
		if err != nil || st.CachedInfo().Cluster == nil {
			return ""
		}
		return st.CachedInfo().Cluster.Leader
	}
	var victim *natsNode
	require.Eventually(t, func() bool {
		name := bucketLeader()
		for _, n := range nodes {
			if n.name == name {
				victim = n
			}
		}
		return victim != nil
	}, 10*time.Second, 50*time.Millisecond)

	// elected: when a server that is not frozen first names another leader of the bucket.
	var other *natsNode
	for _, n := range nodes {
		if n != victim {
			other = n
		}
	}
	oc, err := nats.Connect(other.url)
	require.NoError(t, err)
	t.Cleanup(oc.Close)
	ojs, err := jetstream.New(oc)
	require.NoError(t, err)
	var elected atomic.Int64
	var newLeader atomic.Value
	newLeader.Store("")

	const pause = 12 * time.Second
	var both, samples atomic.Int64
	var lastNone, firstAgain atomic.Int64 // since the freeze: the last sample with no serve acting, the first with one again
	start := time.Now()
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGSTOP))
	go func() {
		for time.Since(start) < pause {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			st, err := ojs.Stream(ctx, "KV_CAIRN_LEASE")
			cancel()
			if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader != "" && st.CachedInfo().Cluster.Leader != victim.name {
				newLeader.Store(st.CachedInfo().Cluster.Leader)
				elected.Store(int64(time.Since(start)))
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	var timeline []string
	prev := "?"
	for time.Since(start) < pause {
		n, holder := leading()
		if now := fmt.Sprintf("%d:%s", n, holder); now != prev {
			timeline = append(timeline, fmt.Sprintf("%s %s", time.Since(start).Round(time.Millisecond), now))
			prev = now
		}
		samples.Add(1)
		switch {
		case n > 1:
			both.Add(1)
		case n == 0:
			lastNone.Store(int64(time.Since(start)))
		case firstAgain.Load() == 0 && lastNone.Load() > 0:
			firstAgain.Store(int64(time.Since(start)))
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Logf("timeline (since the freeze, serves acting:holder): %s", strings.Join(timeline, ", "))
	thaw()
	require.Eventually(t, func() bool { n, _ := leading(); return n == 1 }, 30*time.Second, 50*time.Millisecond)
	gap, election := time.Duration(firstAgain.Load()), time.Duration(elected.Load())
	t.Logf("bucket leader %s frozen %s; %s elected after %s; a serve acting again %s after the freeze; %d samples",
		victim.name, pause, newLeader.Load(), election.Round(time.Millisecond), gap.Round(time.Millisecond), samples.Load())
	assert.Zero(t, both.Load(), "both serves acted at once in %d of %d samples", both.Load(), samples.Load())
	require.NotZero(t, election, "the bucket elected no other leader while its leader was frozen")
	require.NotZero(t, gap, "no serve acted again while the bucket's old leader was frozen")
	// A serve acts again within a TTL of the election (the old entry expires on the new
	// leader, and campaigns run every TTL/4), plus the sampling's own delay; a serve
	// connected to the frozen server first has to give it up (3 pings 2 s apart:
	// server.Liveness), which can be the later of the two.
	assert.Less(t, gap, max(election, 8*time.Second)+2*time.Second+500*time.Millisecond, "no serve acted for long after the bucket had a new leader")
}

// A serve connected to a nats-server that freezes (SIGSTOP) notices within a few pings
// and moves to another server of the cluster, so commands sent through the others are
// answered again while the frozen one sleeps (issue 29; on the old code the client's
// default ping interval, 2 minutes, kept the serve on the frozen server: its queue
// subscription swallowed commands and its lease renewals went nowhere).
func TestServeLeavesAFrozenNATSServer(t *testing.T) {
	nodes := startNATSCluster(t)
	victim, other := nodes[0], nodes[1]
	s := startClusterServe(t, "cp-a", victim.url) // it learns the others from the cluster
	require.Eventually(t, func() bool { l, ok := getLeader(s); return ok && l.This }, 60*time.Second, 50*time.Millisecond)
	nc, err := nats.Connect(other.url, nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ask := func(id, verb, body string) bool {
		m := nats.NewMsg("cairn.cmd." + verb)
		m.Data = []byte(body)
		m.Header.Set("Cairn-Command-Id", id)
		resp, err := nc.RequestMsg(m, time.Second)
		if err != nil {
			return false
		}
		var r reply
		return json.Unmarshal(resp.Data, &r) == nil && r.OK
	}
	require.Eventually(t, func() bool {
		return ask(uuid.NewString(), "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	}, 30*time.Second, 100*time.Millisecond)

	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	t.Cleanup(func() { _ = victim.cmd.Process.Signal(syscall.SIGCONT) })
	id := uuid.NewString()
	var took time.Duration
	for time.Since(frozen) < 40*time.Second {
		if ask(id, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`) {
			took = time.Since(frozen)
			break
		}
	}
	t.Logf("first command answered %s after the serve's nats-server froze", took.Round(time.Millisecond))
	require.NotZero(t, took, "no command was answered within 40 s of the serve's nats-server freezing")
	// Pings every 2 s, 3 unanswered: 6-8 s to notice; a stream leader on the frozen
	// server is re-elected meanwhile (4-9 s).
	assert.Less(t, took, 15*time.Second)
}

// Forward steps of the wall clock of the nats-server that holds the lease bucket (issue 29):
// the real nats-server, built with a wall clock a test can step while it runs
// (test/clockstep/build.sh; the monotonic clock is untouched, as with a real step). A step
// matters when the holder cannot renew: its last entry then expires that much early on the
// server. Each round cuts the holder off from NATS (a proxy that stops passing bytes; the
// serve runs on and answers HTTP), steps the server's clock forward 0.8 s (under TTL/2 with
// TTL 2 s, what the ADR assumes) and lets the other serve take over: the holder must have
// stopped acting on its own clock before the early expiry, so no sample has two serves
// acting (acting for the whole TTL, as a holder without the margin would, shows in every
// round). Each step is reported (clock_step_ms on GET /cairn/v1/leader, a warning); a step
// of TTL/2 or more breaks the assumption, and the holder says so at error.
func TestLeaseUnderWallClockSteps(t *testing.T) {
	stepFile := filepath.Join(t.TempDir(), "step")
	require.NoError(t, os.WriteFile(stepFile, []byte("0"), 0o644))
	addr := freeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	ns := &natsNode{t: t, bin: "nats-server-clockstep", env: []string{"CLOCK_STEP_FILE=" + stepFile}, name: "ns1", url: "nats://" + addr,
		args: []string{"-n", "ns1", "-a", host, "-p", port, "-js", "-sd", filepath.Join(t.TempDir(), "ns1")}}
	ns.start()
	t.Cleanup(ns.kill9)
	offset := 0
	step := func(ms int) {
		offset += ms
		require.NoError(t, os.WriteFile(stepFile, []byte(strconv.Itoa(offset)), 0o644))
	}
	holes := map[string]*blackhole{}
	serveWith := func(name string) *serve {
		holes[name] = startBlackhole(t, addr)
		s := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t)}
		s.args = []string{"serve", "--data", s.data, "--nats", "nats://" + holes[name].addr, "--http", s.httpAddr, "--name", name, "--lease-ttl", "2s"}
		return s.run(name)
	}
	serves := map[string]*serve{"a": serveWith("a")}
	require.Eventually(t, func() bool { l, ok := getLeader(serves["a"]); return ok && l.This }, 20*time.Second, 20*time.Millisecond)
	serves["b"] = serveWith("b")
	holder := func() string {
		for name, s := range serves {
			if l, ok := getLeader(s); ok && l.This {
				return name
			}
		}
		return ""
	}

	var both, samples atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			la, oka := getLeader(serves["a"])
			lb, okb := getLeader(serves["b"])
			samples.Add(1)
			if oka && okb && la.This && lb.This {
				both.Add(1)
			}
		}
	}()
	const rounds = 4
	for round := range rounds {
		var cut string
		require.Eventually(t, func() bool { cut = holder(); return cut != "" }, 20*time.Second, 20*time.Millisecond)
		time.Sleep(time.Duration(200+rand.IntN(500)) * time.Millisecond) // anywhere in the renewal cycle
		holes[cut].set(true)
		step(800)
		require.Eventually(t, func() bool { h := holder(); return h != "" && h != cut }, 10*time.Second, 10*time.Millisecond,
			"round %d: nobody took over from %s", round, cut)
		holes[cut].set(false)
		require.Eventually(t, func() bool {
			l, ok := getLeader(serves[cut])
			return ok && !l.This && l.Holder != cut && l.Holder != ""
		},
			20*time.Second, 20*time.Millisecond, "round %d: %s does not see it lost the lease", round, cut)
	}
	close(stop)
	<-done
	t.Logf("%d rounds of a cut-off holder and a forward step of 800 ms: %d samples", rounds, samples.Load())
	assert.Zero(t, both.Load(), "both serves acted at once in %d of %d samples (steps of 0.8 s, TTL 2 s)", both.Load(), samples.Load())

	// A step while a serve holds the lease is seen by it, even before its first renewal.
	step(800)
	var reported int64
	require.Eventually(t, func() bool {
		for _, s := range serves {
			if l, ok := getLeader(s); ok && l.ClockStepMS > reported {
				reported = l.ClockStepMS
			}
		}
		return reported > 0
	}, 10*time.Second, 50*time.Millisecond, "a forward step of 800 ms was not reported")
	assert.InDelta(t, 800, reported, 250, "the step reported is not the step taken")
	assert.Contains(t, serves["a"].log.String()+serves["b"].log.String(), "clock stepped forward")

	// A step of TTL/2 or more: the assumption broken, said at error.
	step(1500)
	require.Eventually(t, func() bool {
		all := serves["a"].log.String() + serves["b"].log.String()
		for _, line := range strings.Split(all, "\n") {
			if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "clock stepped forward") {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "a step of 1.5 s (TTL 2 s) was not reported at error")
}
