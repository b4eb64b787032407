package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/test/testtools"
)

// release is the cairn of the release before this commit, built once per test process.
var release struct {
	once     sync.Once
	bin, tag string
	err      error
}

// previousRelease returns the cairn binary of the release before this commit (the
// newest tag reachable from HEAD~1, as `git describe` finds it) and its tag. It builds
// the tag's tree (git archive) once, cached under $TMPDIR by the tag's commit.
func previousRelease(t *testing.T) (bin, tag string) {
	t.Helper()
	release.once.Do(func() { release.bin, release.tag, release.err = buildPreviousRelease() })
	if release.err != nil {
		t.Fatalf("the previous release: %v", release.err)
	}
	return release.bin, release.tag
}

// listedRelease is the newest release in RELEASES whose commit comes before HEAD: what a
// clone without tags builds (the tag is the record; the list names its commit).
func listedRelease(root string, git func(args ...string) (string, error)) (tag, commit string, err error) {
	raw, err := os.ReadFile(filepath.Join(root, "RELEASES"))
	if err != nil {
		return "", "", fmt.Errorf("no release tag before HEAD and no RELEASES list: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if _, err := git("-C", root, "merge-base", "--is-ancestor", f[1], "HEAD~1"); err == nil {
			tag, commit = f[0], f[1]
		}
	}
	if tag == "" {
		return "", "", errors.New("no release of RELEASES comes before HEAD (the clone needs its history: git fetch --unshallow)")
	}
	return tag, commit, nil
}

func buildPreviousRelease() (bin, tag string, err error) {
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", err
	}
	var commit string
	if tag, err = git("-C", root, "describe", "--tags", "--abbrev=0", "HEAD~1"); err == nil {
		commit, err = git("-C", root, "rev-parse", tag+"^{commit}")
	} else {
		tag, commit, err = listedRelease(root, git)
	}
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(os.TempDir(), "cairn-release-"+commit[:12])
	bin = filepath.Join(dir, "cairn")
	if _, err := os.Stat(bin); err == nil {
		return bin, tag, nil
	}
	src, err := os.MkdirTemp("", "cairn-release-src")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(src)
	if out, err := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %q | tar -x -C %q", root, commit, src)).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("extract %s: %v: %s", tag, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	build := exec.Command("go", "build", "-ldflags", "-X github.com/cairn-io/cairn.Version="+tag, "-o", bin+".tmp", "./cmd/cairn")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build %s: %v: %s", tag, err, out)
	}
	return bin, tag, os.Rename(bin+".tmp", bin)
}

// revisionWatch records every DRBD status agents publish and counts the ones whose
// revision is older than one the same node already reported for the same resource: an
// agent that carried out older desired state than it had before.
type revisionWatch struct {
	mu        sync.Mutex
	last      map[string]uint64
	statuses  int
	backwards []string
}

func watchRevisions(t *testing.T, nc *nats.Conn) *revisionWatch {
	w := &revisionWatch{last: map[string]uint64{}}
	sub, err := nc.Subscribe("cairn.status.*.drbd.*", func(m *nats.Msg) {
		var st drbd.Status
		if json.Unmarshal(m.Data, &st) != nil || st.Revision == 0 {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.statuses++
		if prev := w.last[m.Subject]; st.Revision < prev {
			w.backwards = append(w.backwards, fmt.Sprintf("%s: revision %d after %d (phase %s)", m.Subject, st.Revision, prev, st.Phase))
			return
		}
		w.last[m.Subject] = st.Revision
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return w
}

// TestRollingUpgradeFromThePreviousRelease (issue 32): a cluster of the previous
// release (its tag, built from git) on a real nats-server: two serves under one lease
// and three sim agents, resources up. While two clients send commands (node.add, and
// rg.spawn now and then, each retried with its command id when unanswered), the serves
// are upgraded to this commit one by one, then the agents. Afterwards: every
// acknowledged command stored once at the sequences its answer named, nothing of a
// refused one; no agent ever reported older desired state than it had carried out;
// every definition, old and new, UpToDate on both its disks through the upgraded agents;
// both serves' views equal an in-memory rebuild of the stream; an upgraded serve leads.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	oldBin, tag := previousRelease(t)
	t.Logf("upgrading from %s (%s)", tag, oldBin)
	ns := singleNATS(t)
	minors := testMinors()
	serveOf := func(name string) *serve {
		s := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t), bin: oldBin}
		s.args = []string{"serve", "--data", s.data, "--nats", ns.url, "--http", s.httpAddr, "--name", name,
			"--lease-ttl", "2s", "--drbd-minors", minors, "--heartbeat-timeout", "30s"}
		return s.run(name)
	}
	names := []string{"cp-a", "cp-b"}
	serves := []*serve{serveOf(names[0]), serveOf(names[1])}

	nc, err := nats.Connect(ns.url, nats.MaxReconnects(-1))
	require.NoError(t, err)
	defer nc.Close()
	revisions := watchRevisions(t, nc)
	cl := &commandLog{nc: nc}
	must := func(verb, body string) {
		t.Helper()
		c := cl.send(verb, body, 60*time.Second)
		require.True(t, c.ok, "%s %s: answered %v code %s", verb, body, c.answered, c.code)
	}
	must("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	c := &simCluster{t: t, s: serves[0], base: t.TempDir(), agents: map[string]*exec.Cmd{}}
	simDir := filepath.Join(c.base, "sim")
	startAgentOf := func(node, bin string) {
		require.NoError(t, os.MkdirAll(filepath.Join(c.root(node), "var/lib/cairn/thin"), 0o755))
		c.agents[node] = startAgent(t, nil, agentOpts{node: node, root: c.root(node), kernel: "sim", simDir: simDir, nats: ns.url, bin: bin,
			extra: []string{"--heartbeat-interval", "500ms"}})
	}
	nodes := []string{"n1", "n2", "n3"}
	for i, n := range nodes {
		must("node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.%d"}`, n, i+1, i+1))
		must("sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":104857600}`, n))
		startAgentOf(n, oldBin)
	}
	must("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	spawned := []string{"before-1", "before-2"}
	for _, rd := range spawned {
		must("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":%q,"size_kib":4096}`, rd))
	}
	for _, rd := range spawned {
		c.waitUpToDate(rd, 2, 60*time.Second)
	}

	// The load: two clients until the last agent is upgraded.
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	var spawnMu sync.Mutex
	for client := range 2 {
		load.Add(1)
		go func() {
			defer load.Done()
			for k := 0; ; k++ {
				select {
				case <-stopLoad:
					return
				case <-time.After(40 * time.Millisecond):
				}
				if k%50 == 49 {
					rd := fmt.Sprintf("during-%d-%d", client, k)
					if cl.send("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":%q,"size_kib":4096}`, rd), 60*time.Second).ok {
						spawnMu.Lock()
						spawned = append(spawned, rd)
						spawnMu.Unlock()
					}
					continue
				}
				cl.send("node.add", fmt.Sprintf(`{"name":"x%d-%d","host":"hx%d-%d","address":"10.1.%d.%d"}`, client, k, client, k, client, k%250+1), 60*time.Second)
			}
		}()
	}

	// Serve by serve: stop the old one, start this commit's on the same data directory.
	time.Sleep(time.Second)
	for i, s := range serves {
		began := time.Now()
		s.stop()
		stopped := time.Since(began)
		s.bin = ""
		s.start() // returns once /readyz answers 200
		t.Logf("serve %s upgraded: stopped in %s, this commit's ready %s later", names[i], stopped.Round(time.Millisecond), (time.Since(began) - stopped).Round(time.Millisecond))
		time.Sleep(time.Second)
	}
	// Agent by agent: SIGTERM, then this commit's on the same root.
	for _, n := range nodes {
		began := time.Now()
		a := c.agents[n]
		require.NoError(t, a.Process.Signal(syscall.SIGTERM))
		_, _ = a.Process.Wait()
		startAgentOf(n, "")
		t.Logf("agent %s upgraded in %s", n, time.Since(began).Round(time.Millisecond))
		time.Sleep(time.Second)
	}
	close(stopLoad)
	load.Wait()

	upgraded := time.Now()
	c.s = serves[1]
	must("rg.spawn", `{"resource_group":"rg2","name":"after","size_kib":4096}`)
	spawned = append(spawned, "after")
	for _, rd := range spawned {
		c.waitUpToDate(rd, 2, 90*time.Second)
	}
	t.Logf("%d definitions UpToDate %s after the last agent's upgrade", len(spawned), time.Since(upgraded).Round(time.Millisecond))
	rv := c.resource("after")
	require.NoError(t, c.write("after", diskfulNodes(rv)[0], 3)) // the upgraded cluster replicates it
	rv = c.waitUpToDate("after", 2, 30*time.Second)
	c.sameData("after", 4096, diskfulNodes(rv))

	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), "CAIRN_EVENTS")
	require.NoError(t, err)
	last := st.CachedInfo().State.LastSeq
	var digests []digest
	for _, s := range serves {
		var d digest
		require.Eventually(t, func() bool {
			status, body := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
			if status != 200 {
				return false
			}
			d = decode[digest](t, body)
			return d.Seq == last
		}, 30*time.Second, 50*time.Millisecond, "a serve did not catch up to %d", last)
		digests = append(digests, d)
	}
	out, code := run(t, "views", "at", "--nats", ns.url, "--seq", fmt.Sprint(last))
	require.Equal(t, 0, code, out)
	rebuilt := decode[digest](t, out)
	assert.Equal(t, rebuilt, digests[0], "the first upgraded serve's views against a rebuild of the stream")
	assert.Equal(t, rebuilt, digests[1], "the second upgraded serve's views against a rebuild of the stream")

	acked := cl.checkStored(t, storedCommands(t, "--nats", ns.url), last)
	assert.Greater(t, acked, 20, "too few commands flowed during the upgrade to show anything")
	revisions.mu.Lock()
	assert.Empty(t, revisions.backwards, "an agent carried out older desired state than it had")
	assert.Greater(t, revisions.statuses, len(spawned), "too few statuses seen")
	revisions.mu.Unlock()
	require.Eventually(t, func() bool {
		for _, s := range serves {
			if l, ok := getLeader(s); ok && l.This {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "no upgraded serve leads")
	t.Logf("%d statuses seen, none going back", revisions.statuses)
}
