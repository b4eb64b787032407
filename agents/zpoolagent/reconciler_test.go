package zpoolagent_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/agents/zpoolagent"
	"github.com/cairn-io/cairn/agents/zpoolagent/zpoolfake"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run the real control plane (embedded NATS JetStream, admission, projector,
// dispatcher), the real agent loop and this package's reconciler on REAL leaf vdev
// images written by OpenZFS 2.1.11 (storage/zfs/testdata, gunzipped into a temp dir).
// zpool itself is the FAKE of zpoolfake, since it needs the ZFS kernel module; the fake
// rewrites the images' labels as zpool would. The activity check runs on a fake clock
// (a 20 s check takes milliseconds); another host is played by rewriting the images.

const me = 0x44444444

// fakeClock advances when the check sleeps (after a real pause of step, if any);
// onSleep runs after each sleep with the count so far.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	n       int
	step    time.Duration
	onSleep func(n int)
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.step > 0 {
		select {
		case <-time.After(c.step):
		case <-ctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.n++
	n, f := c.n, c.onSleep
	c.mu.Unlock()
	if f != nil {
		f(n)
	}
	return nil
}

// fixture gunzips leaves of a storage/zfs/testdata image into dir and names the pool tank.
func fixture(t *testing.T, dir, image string, leaves ...string) []string {
	t.Helper()
	var out []string
	for _, l := range leaves {
		p := filepath.Join(dir, image+"-"+l+".img")
		zfsimage.GunzipTo(t, zfsimage.FixturePath(image, l), p)
		out = append(out, p)
	}
	require.NoError(t, zpoolfake.Relabel(out, map[string]any{"name": "tank"}))
	return out
}

type harness struct {
	t      *testing.T
	s      *server.Server
	nc     *nats.Conn
	dir    string
	devs   []string
	fake   *zpoolfake.Fake
	clock  *fakeClock
	hostid uint32
	opts   func(*zpoolagent.Options)

	mu       sync.Mutex
	statuses []zpool.Status
	stop     func()
}

func newHarness(t *testing.T, image string, leaves []string, hostid uint32) *harness {
	s := servertest.Start(t)
	h := &harness{t: t, s: s, nc: servertest.Client(t, s), dir: t.TempDir(), hostid: hostid,
		clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}}
	h.devs = fixture(t, h.dir, image, leaves...)
	h.fake = &zpoolfake.Fake{StateFile: filepath.Join(h.dir, "zpool-state.json"), HostID: hostid, Hostname: "n1"}
	h.must("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	h.must("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	h.must("node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`)
	b, _ := json.Marshal(map[string]any{"name": "tank", "devices": h.devs, "nodes": []string{"n1", "n2"}})
	h.must("pool.create", string(b))
	sub, err := h.nc.Subscribe("cairn.status.n1.zpool.tank", func(m *nats.Msg) {
		var st zpool.Status
		if json.Unmarshal(m.Data, &st) == nil {
			h.mu.Lock()
			h.statuses = append(h.statuses, st)
			h.mu.Unlock()
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return h
}

// calls are the fake zpool's calls without the health reads (zpool list -o health,
// zpool status) that the agent makes every HealthEvery while a pool is imported.
func (h *harness) calls() []string {
	var out []string
	for _, c := range h.fake.Calls() {
		if c != "list -H -o health tank" && c != "status tank" {
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) must(verb, body string) {
	h.t.Helper()
	r := servertest.Submit(h.s, verb, body)
	require.True(h.t, r.OK, "%s %s: %+v", verb, body, r.Error)
}

// startAgent runs the real agent loop with the reconciler behind a Mux, as cairn agent does.
func (h *harness) startAgent() *zpoolagent.Reconciler {
	h.t.Helper()
	names := events.NewNames("")
	opts := zpoolagent.Options{
		Node: "n1", Names: names,
		Zpool:      zpoolagent.Zpool{Bin: "zpool", Exec: h.fake},
		Publisher:  zpoolagent.PublisherFunc(func(ctx context.Context, subj string, data []byte) error { return h.nc.Publish(subj, data) }),
		HostID:     func() uint32 { return h.hostid },
		Checker:    mmp.Checker{Jitter: func() uint64 { return 0 }},
		Clock:      h.clock,
		WatchEvery: 20 * time.Millisecond,
		RetryAfter: time.Hour,
		StateDir:   filepath.Join(h.dir, "agent-state"),
		Log:        zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel),
	}
	if h.opts != nil {
		h.opts(&opts)
	}
	r, err := zpoolagent.New(opts)
	require.NoError(h.t, err)
	a, err := agents.New(h.nc, agents.Options{Node: "n1", Names: names, HeartbeatInterval: 200 * time.Millisecond,
		Log: zerolog.Nop(), Reconciler: agents.Mux{Names: names, Kinds: map[string]agents.Reconciler{zpoolagent.Kind: r}}})
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	h.stop = func() { cancel(); <-done; _ = r.Close() }
	h.t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
	return r
}

func (h *harness) stopAgent() {
	h.stop()
	h.stop = nil
}

// observed is n1's status of tank in the views (as GET /cairn/v1/pools/tank shows it).
func (h *harness) observed() (zpool.Status, bool) {
	v, err := h.s.DB.Read()
	require.NoError(h.t, err)
	defer v.Close()
	m, err := v.PoolStatus("tank")
	require.NoError(h.t, err)
	st, ok := m["n1"]
	return st, ok
}

func (h *harness) waitPhase(phase string, grant uint64) zpool.Status {
	h.t.Helper()
	var st zpool.Status
	require.Eventually(h.t, func() bool {
		var ok bool
		st, ok = h.observed()
		return ok && st.Phase == phase && (grant == 0 || st.GrantSeq == grant)
	}, 15*time.Second, 10*time.Millisecond, "n1 never reported %s for grant %d; statuses %+v", phase, grant, h.seen())
	return st
}

// waitPublished waits until n1 published a status of phase under grant (0: any) and
// returns the first: phases that pass quickly (contested, then exported once the fence
// is done) may never be the latest in the views when waitPhase looks.
func (h *harness) waitPublished(phase string, grant uint64) zpool.Status {
	h.t.Helper()
	var st zpool.Status
	require.Eventually(h.t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, s := range h.statuses {
			if s.Phase == phase && (grant == 0 || s.GrantSeq == grant) {
				st = s
				return true
			}
		}
		return false
	}, 15*time.Second, 10*time.Millisecond, "n1 never published %s for grant %d", phase, grant)
	return st
}

func (h *harness) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, s := range h.statuses {
		out = append(out, s.Phase+"/"+s.Code)
	}
	return out
}

func (h *harness) count(phase string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.statuses {
		if s.Phase == phase {
			n++
		}
	}
	return n
}

func (h *harness) grant(node string) uint64 {
	h.t.Helper()
	r := servertest.Submit(h.s, "pool.import", `{"pool":"tank","node":"`+node+`"}`)
	require.True(h.t, r.OK, "pool.import %s: %+v", node, r.Error)
	require.Len(h.t, r.Events, 1)
	return r.Events[0].Seq
}

func (h *harness) imported() bool {
	var out strings.Builder
	return (&zpoolfake.Fake{StateFile: h.fake.StateFile}).Main([]string{"list", "-H", "-o", "name", "tank"}, &out, io.Discard) == 0
}

func verdictCode(t *testing.T, st zpool.Status) string {
	b, _ := json.Marshal(st.Verdict)
	var v struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.Unmarshal(b, &v))
	return v.Code
}

// TestGrantCheckImportWatchFence: a pool left active by a killed writer (host-b) is
// granted to n1: checked (20 s on the fake clock, no write seen), imported with -f (its
// label names another host), watched; the same desired state again re-runs nothing;
// another host's label on the leaves is a foreign write: fenced with export -f, status
// contested, and no import under that grant again, not even after a restart.
func TestGrantCheckImportWatchFence(t *testing.T) {
	h := newHarness(t, "mirror-active", []string{"disk0", "disk1"}, me)
	r := h.startAgent()
	g := h.grant("n1")
	st := h.waitPhase(zpool.PhaseImported, g)
	assert.Equal(t, "no_activity", verdictCode(t, st))
	assert.True(t, st.Forced, "a pool last used by host-b needs -f after the check proved it idle")
	assert.False(t, st.CheckStartedAt.IsZero())
	want := []string{"list -H -o name tank", "import -d " + h.devs[0] + " -d " + h.devs[1] + " -N -o cachefile=none -f tank"}
	assert.Equal(t, want, h.calls())
	assert.True(t, h.imported())
	assert.Equal(t, 1, h.count(zpool.PhaseChecking))

	// Level-triggered: the same desired state again does not check or import again.
	body, _ := json.Marshal(zpool.Desired{Pool: "tank", Node: "n1", Devices: h.devs, GrantSeq: g, Revision: g})
	polls := counterSum(t, "cairn_zpool_watch_polls_total", "")
	require.NoError(t, r.Reconcile(context.Background(), "cairn.node.n1.zpool.tank", body))
	require.Eventually(t, func() bool { return counterSum(t, "cairn_zpool_watch_polls_total", "") >= polls+3 },
		5*time.Second, 10*time.Millisecond, "the watcher did not poll three times")
	assert.Equal(t, want, h.calls())
	assert.Equal(t, 1, h.count(zpool.PhaseChecking))
	st, _ = h.observed()
	assert.Equal(t, zpool.PhaseImported, st.Phase, "own pool, quiet: no alarm")

	// Host-b imports the pool behind our back: its hostid lands in a label.
	require.NoError(t, zpoolfake.Relabel(h.devs[:1], map[string]any{"hostid": uint64(0x22222222), "hostname": "host-b"}))
	contested := h.waitPublished(zpool.PhaseContested, g)
	assert.Equal(t, "0x22222222", contested.ForeignHostID)
	assert.Equal(t, "host-b", contested.ForeignHost)
	assert.Equal(t, mmp.ObsForeignHostID, contested.Code)
	require.Eventually(t, func() bool { return slices.Contains(h.calls(), "export -F tank") }, 5*time.Second, 10*time.Millisecond)
	assert.False(t, h.imported(), "fenced: exported here")

	// cairn serve turns the report into pool.contest: the control plane marks the pool
	// contested and withdraws the grant, and the agent reports it exported since the fence.
	require.Eventually(t, func() bool {
		v, err := h.s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		p, _, _ := v.Pool("tank")
		return p.Contested && p.ForeignHostID == "0x22222222"
	}, 5*time.Second, 10*time.Millisecond)
	st = h.waitPhase(zpool.PhaseExported, 0)
	assert.Equal(t, zpoolagent.CodeFenced, st.Code)
	assert.Equal(t, "0x22222222", st.ForeignHostID)

	// The same contested grant again: never re-imported. A worker's pass over an offer
	// ends with a "nothing" decision; once counted, the calls are final.
	n, passes := len(h.calls()), decisions(t, zpoolagent.ActNothing)
	require.NoError(t, r.Reconcile(context.Background(), "cairn.node.n1.zpool.tank", body))
	require.Eventually(t, func() bool { return decisions(t, zpoolagent.ActNothing) > passes }, 5*time.Second, 10*time.Millisecond,
		"the worker never finished its pass over the offer")
	assert.Len(t, h.calls(), n)

	// Nor after a restart: the latch is in the state directory. The control plane no
	// longer grants it, so offer the contested grant again by hand, as a desired state
	// that lags would: the restarted agent knows it only from the latch.
	h.stopAgent()
	h.fake = &zpoolfake.Fake{StateFile: h.fake.StateFile, HostID: me, Hostname: "n1"}
	passes = decisions(t, zpoolagent.ActNothing)
	r = h.startAgent()
	require.NoError(t, r.Reconcile(context.Background(), "cairn.node.n1.zpool.tank", body))
	require.Eventually(t, func() bool { return slices.Contains(h.seen(), zpool.PhaseContested+"/"+zpoolagent.CodeContestedGrant) },
		5*time.Second, 10*time.Millisecond, "the restarted agent did not hold the contested grant; statuses %v", h.seen())
	require.Eventually(t, func() bool { return decisions(t, zpoolagent.ActNothing) > passes }, 5*time.Second, 10*time.Millisecond,
		"the restarted worker never finished its pass")
	assert.False(t, slices.ContainsFunc(h.calls(), func(c string) bool { return strings.HasPrefix(c, "import") }))
	assert.False(t, h.imported())

	// The operator resolves it (pool.export), grants again: a new grant is a new check
	// and import.
	h.must("pool.export", `{"pool":"tank"}`)
	g2 := h.grant("n1")
	st = h.waitPhase(zpool.PhaseImported, g2)
	assert.True(t, h.imported())
	_, err := os.Stat(filepath.Join(h.dir, "agent-state", "tank.contested"))
	assert.True(t, os.IsNotExist(err), "the latch goes with a new grant")
}

// TestRefusalsNeverImport: refused checks never call zpool import; zpool's own refusals
// are mapped to refused with the other host named.
func TestRefusalsNeverImport(t *testing.T) {
	for _, tc := range []struct {
		name          string
		image         string
		hostid        uint32
		setup         func(h *harness)
		code          string
		foreignHostID string
		foreignHost   string
		imports       bool
	}{
		{name: "no hostid", image: "single-fast", hostid: 0, code: zpoolagent.CodeNoHostID},
		{name: "live writer during the check", image: "single-fast", hostid: me, code: mmp.CodeActivityDetected,
			foreignHostID: "0x33333333", foreignHost: "host-c",
			setup: func(h *harness) {
				h.clock.onSleep = func(n int) {
					if n == 1 { // a 2 s check (100 ms interval) re-reads twice
						require.NoError(h.t, zpoolfake.WriteMMP(h.devs[0], 1))
					}
				}
			}},
		{name: "multihost off, left active by another host", image: "single-off", hostid: me, code: zpoolagent.CodeMMPOffNotForced,
			foreignHostID: "0x11111111", foreignHost: "host-a"},
		{name: "zpool: imported on another host", image: "single-exported", hostid: me, code: zpoolagent.CodeHostIDActive,
			foreignHostID: "0x0badcafe", foreignHost: "host-x", imports: true,
			setup: func(h *harness) {
				h.fake.SetFail("cannot import 'tank': pool is imported on host-x (hostid: 0x0badcafe)\nExport the pool on the other system, then run 'zpool import'.", "")
			}},
		{name: "zpool: EREMOTEIO", image: "single-exported", hostid: me, code: zpoolagent.CodeRemoteIO, imports: true,
			setup: func(h *harness) { h.fake.SetFail("cannot import 'tank': Remote I/O error", "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.image, []string{"disk0"}, tc.hostid)
			if tc.setup != nil {
				tc.setup(h)
			}
			h.startAgent()
			g := h.grant("n1")
			st := h.waitPhase(zpool.PhaseRefused, g)
			assert.Equal(t, tc.code, st.Code, st.Error)
			assert.Equal(t, tc.foreignHostID, st.ForeignHostID)
			assert.Equal(t, tc.foreignHost, st.ForeignHost)
			assert.NotEmpty(t, st.Error)
			calls := h.calls()
			hasImport := slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "import") })
			assert.Equal(t, tc.imports, hasImport, "calls %v", calls)
			assert.False(t, h.imported())
		})
	}
}

// TestExportAdoptRecheck: an empty desired state exports; a new grant after our own
// export needs no watch (exported by this host); an agent restart adopts the imported
// pool without importing; after a reboot (nothing imported) the grant is checked again.
func TestExportAdoptRecheck(t *testing.T) {
	h := newHarness(t, "single-exported", []string{"disk0"}, me)
	h.startAgent()
	g := h.grant("n1")
	st := h.waitPhase(zpool.PhaseImported, g)
	assert.Equal(t, "no_activity", verdictCode(t, st), "exported by host-a: checked")
	assert.False(t, st.Forced, "an exported pool needs no -f")

	h.must("pool.export", `{"pool":"tank","node":"n1"}`)
	h.waitPhase(zpool.PhaseExported, 0)
	assert.Contains(t, h.calls(), "export tank")
	assert.False(t, h.imported())

	g = h.grant("n1")
	st = h.waitPhase(zpool.PhaseImported, g)
	assert.Equal(t, "exported_by_this_host", verdictCode(t, st))
	assert.Equal(t, 2, h.count(zpool.PhaseChecking))

	// Agent restart: the pool is still imported; adopted, not imported again.
	h.stopAgent()
	h.fake = &zpoolfake.Fake{StateFile: h.fake.StateFile, HostID: me, Hostname: "n1"}
	h.startAgent()
	require.Eventually(t, func() bool { st, _ = h.observed(); return st.Code == zpoolagent.CodeAdopted }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, zpool.PhaseImported, st.Phase)
	assert.Equal(t, []string{"list -H -o name tank"}, h.calls())

	// Reboot: nothing imported any more; the same grant is checked again (the label says
	// ACTIVE on this host: it may have been imported elsewhere since).
	h.stopAgent()
	require.NoError(t, os.Remove(h.fake.StateFile))
	h.fake = &zpoolfake.Fake{StateFile: h.fake.StateFile, HostID: me, Hostname: "n1"}
	checks := h.count(zpool.PhaseChecking)
	h.startAgent()
	require.Eventually(t, func() bool {
		st, _ = h.observed()
		return st.Phase == zpool.PhaseImported && st.Code == "" && h.count(zpool.PhaseChecking) == checks+1
	}, 10*time.Second, 10*time.Millisecond, "%v", h.seen())
	assert.Equal(t, "no_activity", verdictCode(t, st))
	assert.True(t, h.imported())
}

// TestGrantMovedDuringCheck: the grant goes away while the check runs: the check is
// canceled and nothing is imported.
func TestGrantMovedDuringCheck(t *testing.T) {
	h := newHarness(t, "single-exported", []string{"disk0"}, me)
	h.clock.step = 20 * time.Millisecond // 20 re-reads: 400 ms of real time
	h.clock.onSleep = func(n int) {
		if n == 3 {
			go h.must("pool.export", `{"pool":"tank"}`)
		}
	}
	canceled := counterSum(t, "cairn_zpool_checks_total", mmp.CodeCanceled)
	h.startAgent()
	h.grant("n1")
	h.waitPhase(zpool.PhaseExported, 0)
	// The check ends canceled (the import decision comes after it): then nothing can
	// import any more.
	require.Eventually(t, func() bool { return counterSum(t, "cairn_zpool_checks_total", mmp.CodeCanceled) > canceled },
		5*time.Second, 10*time.Millisecond, "the check was not canceled")
	for _, c := range h.calls() {
		assert.False(t, strings.HasPrefix(c, "import"), "imported after the grant moved: %v", h.calls())
	}
	assert.False(t, h.imported())
	assert.Equal(t, 1, h.count(zpool.PhaseChecking))
}

// TestExportBusyRetries: a busy pool is not force-exported: failed, then retried.
func TestExportBusyRetries(t *testing.T) {
	h := newHarness(t, "single-exported", []string{"disk0"}, me)
	h.opts = func(o *zpoolagent.Options) { o.RetryAfter = 100 * time.Millisecond }
	h.startAgent()
	g := h.grant("n1")
	h.waitPhase(zpool.PhaseImported, g)
	h.fake.SetFail("", "cannot export 'tank': pool is busy")
	h.must("pool.export", `{"pool":"tank"}`)
	st := h.waitPhase(zpool.PhaseFailed, 0)
	assert.Equal(t, zpoolagent.CodeExportFailed, st.Code)
	assert.NotContains(t, h.calls(), "export -F tank")
	h.fake.SetFail("", "")
	h.waitPhase(zpool.PhaseExported, 0)
	assert.False(t, h.imported())
}

// TestFenceLeavesTheNextGrantChecked (issue 12, item 4): after a fence the next grant to
// this node runs the whole activity check. The old fence (zpool export -f) wrote EXPORTED
// and this host's hostid into every label, so the next grant was "exported by this
// host": no check, 0 reads, while the other writer could still be live.
func TestFenceLeavesTheNextGrantChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		// afterFence runs on the leaves once the pool is fenced (nil: as the fence left
		// them).
		afterFence func(h *harness)
	}{
		{name: "as the fence left the labels"},
		{name: "labels say exported by this host (a plain export after the fence)", afterFence: func(h *harness) {
			require.NoError(t, zpoolfake.Relabel(h.devs, map[string]any{"state": uint64(zfs.StateExported), "hostid": uint64(me), "hostname": "n1"}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "mirror-active", []string{"disk0", "disk1"}, me)
			h.startAgent()
			g := h.grant("n1")
			h.waitPhase(zpool.PhaseImported, g)
			require.NoError(t, zpoolfake.Relabel(h.devs[:1], map[string]any{"hostid": uint64(0x22222222), "hostname": "host-b"}))
			h.waitPublished(zpool.PhaseContested, g)
			require.Eventually(t, func() bool { return slices.Contains(h.calls(), "export -F tank") }, 5*time.Second, 10*time.Millisecond)
			h.waitPhase(zpool.PhaseExported, 0)
			// The other host is gone and its labels say so no longer; the operator
			// resolves the contest with a new grant.
			require.NoError(t, zpoolfake.Relabel(h.devs, map[string]any{"hostid": uint64(me), "hostname": "n1"}))
			if tc.afterFence != nil {
				tc.afterFence(h)
			}
			h.must("pool.export", `{"pool":"tank"}`)
			g2 := h.grant("n1")
			st := h.waitPhase(zpool.PhaseImported, g2)
			assert.Equal(t, "no_activity", verdictCode(t, st), "the grant after a fence must be checked")
		})
	}
}

// TestSuspendedPoolIsReported (issue 12, item 7): a pool the kernel suspended because
// MMP writes did not land (ZFS-8000-MM) is reported as phase suspended with its own
// code, never cleared by the agent, and reported imported again once it is resumed.
func TestSuspendedPoolIsReported(t *testing.T) {
	h := newHarness(t, "single-exported", []string{"disk0"}, me)
	h.opts = func(o *zpoolagent.Options) { o.HealthEvery = 20 * time.Millisecond }
	h.startAgent()
	g := h.grant("n1")
	h.waitPhase(zpool.PhaseImported, g)
	require.NoError(t, zpoolfake.Suspend(h.fake.StateFile, "tank", "mmp"))
	st := h.waitPhase(zpool.PhaseSuspended, g)
	assert.Equal(t, zpoolagent.CodeMMPSuspended, st.Code)
	assert.Contains(t, st.Error, "ZFS-8000-MM")
	for _, c := range h.fake.Calls() {
		assert.False(t, strings.HasPrefix(c, "clear"), "the agent ran zpool clear: %v", h.fake.Calls())
	}
	assert.True(t, h.imported(), "a suspended pool is not exported by the agent")
	require.NoError(t, zpoolfake.Suspend(h.fake.StateFile, "tank", "")) // the operator's zpool clear
	st = h.waitPhase(zpool.PhaseImported, g)
	assert.Empty(t, st.Code)
	require.NoError(t, zpoolfake.Suspend(h.fake.StateFile, "tank", "io"))
	st = h.waitPhase(zpool.PhaseSuspended, g)
	assert.Equal(t, zpoolagent.CodeIOSuspended, st.Code)
}

// TestUnreadableLatchFailsClosed (issue 11): a contested latch that exists but cannot be
// read or is damaged imports nothing (before, it was ignored: the "no re-import under a
// contested grant" guard was lifted by a torn file).
func TestUnreadableLatchFailsClosed(t *testing.T) {
	h := newHarness(t, "single-exported", []string{"disk0"}, me)
	state := filepath.Join(h.dir, "agent-state")
	require.NoError(t, os.MkdirAll(state, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(state, "tank.contested"), []byte(`{"grant_seq":`), 0o644))
	h.startAgent()
	g := h.grant("n1")
	st := h.waitPhase(zpool.PhaseFailed, g)
	assert.Equal(t, zpoolagent.CodeLatchUnreadable, st.Code)
	assert.Contains(t, st.Error, "tank.contested")
	for _, c := range h.calls() {
		assert.False(t, strings.HasPrefix(c, "import"), "imported with an unreadable latch: %v", h.calls())
	}
	assert.Equal(t, 0, h.count(zpool.PhaseChecking))
}

// counterSum is a counter of the default registry summed over its series, or the
// series whose code label is code.
func counterSum(t *testing.T, name, code string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := code == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					match = true
				}
			}
			if match {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// decisions reads cairn_zpool_decisions_total{action} from the process's registry.
func decisions(t *testing.T, action zpoolagent.Action) float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "cairn_zpool_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == string(action) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
