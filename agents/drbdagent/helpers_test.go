package drbdagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/events"
	"github.com/rs/zerolog"
)

// countingExec runs real programs and counts them by "name subcommand" (drbdmeta
// create-md, drbdmeta set-gi, drbdadm sh-nop, …).
type countingExec struct {
	execx.Executor
	mu sync.Mutex
	n  map[string]int
	// dieAt, when set, fails the call that makes that count of dieKey, as if the agent
	// were killed while running it.
	dieKey string
	dieAt  int
}

func newCountingExec(t testing.TB) *countingExec {
	return &countingExec{Executor: &execx.Runner{Timeout: time.Minute, Log: zerolog.Nop(),
		Env: []string{"DRBD_DRIVER_VERSION_OVERRIDE=9.2.0", "LC_ALL=C"}}, n: map[string]int{}}
}

func (c *countingExec) Run(ctx context.Context, argv []string, opts execx.Options) ([]byte, error) {
	key := execx.Name(argv)
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") && strings.Contains("create-md set-gi get-gi wipe-md sh-nop adjust check-resize", a) && len(a) > 4 {
			key += " " + a
			break
		}
	}
	c.mu.Lock()
	c.n[key]++
	die := c.dieKey == key && c.n[key] == c.dieAt
	c.mu.Unlock()
	if die {
		return nil, &execx.Error{Argv: argv, ExitCode: -1, Err: context.Canceled}
	}
	return c.Executor.Run(ctx, argv, opts)
}

func (c *countingExec) reset(key string) {
	c.mu.Lock()
	c.n[key] = 0
	c.mu.Unlock()
}

func (c *countingExec) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// capture is a Publisher that keeps every status by subject.
type capture struct {
	mu   sync.Mutex
	last map[string]drbd.Status
	all  []string
}

func (c *capture) Publish(subject string, data []byte) error {
	var st drbd.Status
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]drbd.Status{}
	}
	c.last[subject] = st
	c.all = append(c.all, subject)
	return nil
}

func (c *capture) get(subject string) (drbd.Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.last[subject]
	return st, ok
}

// simNode is one simulated node: its root, a reconciler with the sim kernel.
type simNode struct {
	name, host, root string
	exec             *countingExec
	rec              *Reconciler
	pub              *capture
	sim              *Sim
	cancel           context.CancelFunc
}

func newSimNode(t testing.TB, base, name, host string, hook func(rd, step string) bool) *simNode {
	t.Helper()
	return newSimNodePub(t, base, name, host, hook, nil)
}

// newSimNodePub is newSimNode whose statuses also go to pub (nil: captured only).
func newSimNodePub(t testing.TB, base, name, host string, hook func(rd, step string) bool, pub func(*capture) Publisher, tune ...func(*Config)) *simNode {
	t.Helper()
	root := filepath.Join(base, name)
	n := &simNode{name: name, host: host, root: root, exec: newCountingExec(t), pub: &capture{}}
	paths := NewPaths(root)
	n.sim = &Sim{Node: name, Root: paths.Root, Dir: DefaultSimDir(root), Exec: n.exec, MainConf: paths.MainConf,
		Log: zerolog.Nop(), PollInterval: 20 * time.Millisecond}
	var p Publisher = n.pub
	if pub != nil {
		p = pub(n.pub)
	}
	cfg := Config{Node: name, Names: events.NewNames(""), Paths: paths, Exec: n.exec, Kernel: n.sim, Pub: p,
		Log: zerolog.Nop(), PretendHost: true, StatusInterval: 20 * time.Millisecond, AfterStep: hook, SuspendBound: 700 * time.Millisecond}
	for _, f := range tune {
		f(&cfg)
	}
	rec, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.rec = rec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.cancel = cancel
	// At the end the node stops for good before its directories go: Run has returned
	// and no snapshot timer fires any more (one would write its state file meanwhile).
	t.Cleanup(func() {
		cancel()
		<-done
		rec.timersMu.Lock()
		for k, tm := range rec.timers {
			tm.Stop()
			delete(rec.timers, k)
		}
		rec.timersMu.Unlock()
		rec.locksMu.Lock() // a timer that already fired holds its resource's lock while it writes
		var held []*sync.Mutex
		for _, m := range rec.locks {
			held = append(held, m)
		}
		rec.locksMu.Unlock()
		for _, m := range held {
			m.Lock()
			m.Unlock() //nolint:staticcheck // waiting for the holder only
		}
	})
	go func() { defer close(done); rec.Run(ctx) }()
	return n
}

func (n *simNode) subject(rd string) string { return events.NewNames("").Node(n.name, "drbd", rd) }

func (n *simNode) statusSubject(rd string) string {
	return events.NewNames("").Status(n.name, "drbd", rd)
}

func (n *simNode) reconcile(t testing.TB, d *drbd.Desired) error {
	t.Helper()
	var body []byte
	if d != nil {
		var err error
		if body, err = json.Marshal(d); err != nil {
			t.Fatal(err)
		}
	}
	return n.rec.Reconcile(context.Background(), n.subject(resourceName(d)), body)
}

func resourceName(d *drbd.Desired) string {
	if d == nil {
		return "r1"
	}
	return d.Resource
}

// pool creates the node's storage pool directory (the agent never creates one).
func (n *simNode) pool(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(n.root, dir), 0o755); err != nil {
		t.Fatal(err)
	}
}

// getGI reads a metadata file with the real drbdmeta for every node id.
func getGI(t testing.TB, minor int, disk string) [drbd.MaxNodeID + 1]drbd.GI {
	t.Helper()
	var out [drbd.MaxNodeID + 1]drbd.GI
	r := newCountingExec(t)
	for id := 0; id <= drbd.MaxNodeID; id++ {
		b, err := r.Run(context.Background(), drbdutils.GetGI(minor, disk, id), execx.Options{})
		if err != nil {
			t.Fatalf("get-gi node id %d of %s: %v", id, disk, err)
		}
		if out[id], err = drbdutils.ParseGetGI(b); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func eventually(t testing.TB, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }
