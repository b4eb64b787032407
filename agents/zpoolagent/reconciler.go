// Package zpoolagent is the node agent's shared-pool flow: it carries out the desired
// state the control plane publishes on <prefix>.node.<node>.zpool.<pool> and reports on
// <prefix>.status.<node>.zpool.<pool> (storage/zpool is the contract).
//
// On a new grant (GrantSeq) it checks that this host has a hostid, reports phase
// checking (CheckStartedAt), runs the MMP activity check (storage/mmp) on the pool's
// leaves, re-reads the best uberblock right before the import (someone may have
// imported it since the check ended), and only then runs zpool import. After the import
// it keeps watching the leaves (mmp.Watcher); a write by another host fences the pool
// (zpool export -F) and reports phase contested, and the agent never imports the pool
// again under that grant (the latch survives restarts with a state directory). An
// empty desired state exports the pool. The decisions are pure (decide.go); this file
// does the I/O, one goroutine per pool, so that a 20 s check never blocks the agent's
// other subjects.
package zpoolagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Kind is the desired-state kind this package handles: <prefix>.node.<node>.zpool.<pool>.
const Kind = "zpool"

// Publisher sends a status message and returns once it is stored (or failed).
type Publisher interface {
	Publish(ctx context.Context, subject string, data []byte) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, subject string, data []byte) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, subject string, data []byte) error {
	return f(ctx, subject, data)
}

// JetStreamPublisher publishes through JetStream and waits for the stream's ack, so a
// status is stored in <PREFIX>_STATUS, not just sent.
func JetStreamPublisher(js jetstream.JetStream) Publisher {
	return PublisherFunc(func(ctx context.Context, subject string, data []byte) error {
		_, err := js.Publish(ctx, subject, data)
		return err
	})
}

// Options configure a Reconciler.
type Options struct {
	Node  string
	Names events.Names
	// Zpool runs zpool(8) (Zpool.Exec is required).
	Zpool Zpool
	// Publisher sends statuses (required).
	Publisher Publisher
	// HostID returns this host's hostid, read again for every grant (nil:
	// mmp.SystemHostID, as OpenZFS reads it).
	HostID func() uint32
	// Checker runs the activity check (its Log is set from Log when zero); tests set
	// Jitter, Tunables.
	Checker mmp.Checker
	// Clock of the activity check (nil: mmp.RealClock).
	Clock mmp.Clock
	// WatchEvery is the watcher's poll period after import (0: the pool's MMP interval
	// from the verdict, between 100 ms and 1 s; 1 s when unknown).
	WatchEvery time.Duration
	// HealthEvery is how often an imported pool's health is read (zpool list -o health)
	// to notice a suspension (0: 1 s).
	HealthEvery time.Duration
	// MaxBlind is how many polls in a row may fail to read the leaves before the agent
	// reports the pool blind (0: 10).
	MaxBlind int
	// RetryAfter and RetryMax bound the backoff of a refused or failed grant (0: 30 s,
	// 5 min). Every retry is a full new check.
	RetryAfter, RetryMax time.Duration
	// StateDir keeps the contested latch per pool (<dir>/<pool>.contested) across
	// restarts, created when needed; "" keeps it in memory only.
	StateDir string
	// OpenDevice opens a leaf (nil: zfs.OpenDevice, O_DIRECT where allowed).
	OpenDevice func(path string) (zfs.Device, func() error, error)
	Log        zerolog.Logger
	// Now is the clock of statuses and backoff (nil: time.Now).
	Now func() time.Time
}

var _ agents.Reconciler = (*Reconciler)(nil)

// Reconciler handles the zpool subjects of one node: Reconcile hands each desired state
// to the pool's worker goroutine and returns at once. It implements the agents
// package's Reconciler interface.
type Reconciler struct {
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]*worker
	closed  bool
}

// New returns a Reconciler. Errors: missing Node, Zpool.Exec or Publisher. StateDir is
// created when the first latch is written (a failure is logged; the latch then holds in
// memory only).
func New(opts Options) (*Reconciler, error) {
	switch {
	case opts.Node == "":
		return nil, errors.New("zpoolagent: Node is required")
	case opts.Zpool.Exec == nil:
		return nil, errors.New("zpoolagent: Zpool.Exec is required")
	case opts.Publisher == nil:
		return nil, errors.New("zpoolagent: Publisher is required")
	}
	if opts.Names.Prefix == "" {
		opts.Names = events.NewNames("")
	}
	if opts.HostID == nil {
		opts.HostID = mmp.SystemHostID
	}
	if opts.Clock == nil {
		opts.Clock = mmp.RealClock
	}
	if opts.HealthEvery <= 0 {
		opts.HealthEvery = time.Second
	}
	if opts.MaxBlind <= 0 {
		opts.MaxBlind = 10
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 30 * time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OpenDevice == nil {
		opts.OpenDevice = func(p string) (zfs.Device, func() error, error) {
			d, f, err := zfs.OpenDevice(p)
			if err != nil {
				return d, nil, err
			}
			return d, f.Close, nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Reconciler{opts: opts, ctx: ctx, cancel: cancel, workers: map[string]*worker{}}, nil
}

// Close stops every worker (a running check is canceled and imports nothing; a zpool
// import or export already running is let finish, within its timeout) and waits for
// them. Imported pools stay imported: an agent restart is not a grant change; the
// next agent adopts them. The Reconciler cannot be used after Close.
func (r *Reconciler) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// ParseSubject splits <prefix>.node.<node>.zpool.<pool>; ok is false for any other subject.
func ParseSubject(names events.Names, subject string) (node, pool string, ok bool) {
	node, kind, pool, ok := names.ParseNode(subject)
	if !ok || kind != Kind {
		return "", "", false
	}
	return node, pool, true
}

// Reconcile takes the latest desired state of one zpool subject (empty: the pool must
// not be imported here) and returns at once; the pool's worker carries it out. It
// returns an error, and does nothing, for a subject that is not a zpool subject of this
// node, a body that is not a zpool.Desired, or after Close. A newer desired state
// replaces an older one not yet carried out, and cancels a running check that it makes
// pointless (another grant, or none).
func (r *Reconciler) Reconcile(_ context.Context, subject string, desired []byte) error {
	node, pool, ok := ParseSubject(r.opts.Names, subject)
	if !ok {
		return fmt.Errorf("zpoolagent: %s is not a zpool desired-state subject", subject)
	}
	if node != r.opts.Node {
		return fmt.Errorf("zpoolagent: %s is for node %s, this agent is %s", subject, node, r.opts.Node)
	}
	want := Want{Present: len(desired) > 0}
	if want.Present {
		if err := json.Unmarshal(desired, &want.Desired); err != nil {
			return fmt.Errorf("zpoolagent: %s: %w", subject, err)
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("zpoolagent: reconciler closed")
	}
	w := r.workers[pool]
	if w == nil {
		w = r.newWorker(pool)
		r.workers[pool] = w
		r.wg.Add(1)
		go func() { defer r.wg.Done(); w.run(r.ctx) }()
	}
	r.mu.Unlock()
	w.offer(want)
	return nil
}

// Pools returns the pools with a worker.
func (r *Reconciler) Pools() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.workers))
	for p := range r.workers {
		out = append(out, p)
	}
	return out
}
