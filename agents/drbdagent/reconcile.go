package drbdagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/internal/execx"
	"github.com/cairn-io/cairn/storage/volume"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var (
	metricReconciles = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_drbd_reconciles_total",
		Help: "DRBD resource reconciles by outcome (applied, removed, failed, ignored)."}, []string{"outcome"})
	metricReconcileSeconds = promauto.NewHistogram(prometheus.HistogramOpts{Name: "cairn_agent_drbd_reconcile_seconds",
		Help: "Time of one DRBD resource reconcile.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	metricSteps = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_drbd_steps_total",
		Help: "Host-changing steps carried out (backing, create-md, seed, install, adjust, down, forget-peer, wipe, remove)."}, []string{"step"})
)

// Publisher sends one message (a *nats.Conn in production).
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Config configures a Reconciler. Zero values take the defaults in parentheses.
type Config struct {
	Node  string
	Names events.Names
	Paths Paths
	// Exec runs every external program (drbdadm, drbdmeta, lvcreate, zfs, losetup).
	Exec   execx.Executor
	Kernel Kernel
	Pub    Publisher
	Log    zerolog.Logger
	// PretendHost passes __DRBD_NODE__=<the local replica's host> to drbdadm, so it
	// takes this node for that host (the simulated kernel, several nodes on one
	// machine); on a real host drbdadm uses uname -n.
	PretendHost bool
	// LoopDevices puts file-provider volumes behind loop devices (a real kernel
	// attaches block devices only); the simulated kernel uses the files.
	LoopDevices bool
	// StatusInterval is the least time between two status messages of one resource
	// for observed changes (250 ms); a reconcile's status goes out at once.
	StatusInterval time.Duration
	// AfterStep, when set, is called after every step with its name (backing,
	// md-created, seeded, installed, adjusting, adjusted, removed); returning true makes
	// the reconcile stop right there as if the process had died (tests of restarts).
	AfterStep func(resource, step string) bool
}

// ErrStopped is returned when AfterStep stopped a reconcile.
var ErrStopped = errors.New("reconcile stopped after a step (test hook)")

// Reconciler carries out drbd.Desired messages (agents.Reconciler) and publishes
// drbd.Status. One call per resource at a time (the agent's workers guarantee it);
// calls for different resources run concurrently.
type Reconciler struct {
	cfg  Config
	adm  drbd.Adm
	fold *Fold
	pub  *statusPublisher

	prepare    sync.Once
	prepareErr error
	mu         sync.Mutex
	res        map[string]*resInfo
}

// resInfo is what the status of one resource is built from.
type resInfo struct {
	base    drbd.Status
	desired *drbd.Desired
	state   *State
}

// New returns a Reconciler. The first Reconcile prepares cfg.Paths (directories, a main
// configuration when there is none), so an agent with nothing to do changes nothing.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Node == "" || cfg.Exec == nil || cfg.Kernel == nil {
		return nil, errors.New("drbdagent: Node, Exec and Kernel are required")
	}
	if cfg.Names.Prefix == "" {
		cfg.Names = events.NewNames("")
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 250 * time.Millisecond
	}
	r := &Reconciler{cfg: cfg, adm: drbd.Adm{Config: cfg.Paths.MainConf}, fold: NewFold(), res: map[string]*resInfo{}}
	r.pub = &statusPublisher{r: r, dirty: map[string]bool{}, last: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	return r, nil
}

// Fold is the events2 state the statuses are built from.
func (r *Reconciler) Fold() *Fold { return r.fold }

// Run follows the kernel's events2 stream and publishes statuses on observed changes
// until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	f := &Follower{Kernel: r.cfg.Kernel, Fold: r.fold, Changed: r.pub.soon, SizeKiB: r.sizeKiB, Log: r.cfg.Log}
	go f.Run(ctx)
	r.pub.run(ctx)
}

func (r *Reconciler) sizeKiB(rd string, vol int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := r.res[rd]; i != nil && i.desired != nil {
		for _, v := range i.desired.Volumes {
			if v.Number == vol {
				return v.SizeKiB
			}
		}
	}
	return 0
}

// Status returns the status the agent would publish for rd now (false if it knows
// nothing of rd).
func (r *Reconciler) Status(ctx context.Context, rd string) (drbd.Status, bool) {
	return r.build(ctx, rd)
}

// Reconcile carries out one desired-state message. Subjects of other kinds than drbd
// are ignored. An empty message, or a Desired without Local, removes the resource.
// The outcome is published as status (phase applied, removed or failed with the
// reason); the error is returned too, so the caller retries later.
func (r *Reconciler) Reconcile(ctx context.Context, subject string, data []byte) error {
	rd, ok := r.resourceOf(subject)
	if !ok {
		return nil
	}
	start := time.Now()
	var d *drbd.Desired
	if len(data) > 0 {
		d = new(drbd.Desired)
		if err := json.Unmarshal(data, d); err != nil {
			return r.finish(ctx, rd, nil, nil, fmt.Errorf("desired state of %s: %w", rd, err), start)
		}
		if d.Resource != rd || d.Node != r.cfg.Node {
			return r.finish(ctx, rd, d, nil, fmt.Errorf("desired state on %s names resource %q on node %q", subject, d.Resource, d.Node), start)
		}
	}
	r.prepare.Do(func() { r.prepareErr = r.cfg.Paths.Prepare() })
	if r.prepareErr != nil {
		return r.finish(ctx, rd, d, nil, r.prepareErr, start)
	}
	st, err := r.apply(ctx, rd, d)
	return r.finish(ctx, rd, d, st, err, start)
}

// resourceOf returns the resource of <prefix>.node.<node>.drbd.<rd>.
func (r *Reconciler) resourceOf(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, r.cfg.Names.Node(r.cfg.Node, "drbd", ""))
	if !ok || rest == "" || strings.Contains(rest, ".") {
		return "", false
	}
	return rest, true
}

// phase values for finish.
type removed struct{}

func (r *Reconciler) finish(ctx context.Context, rd string, d *drbd.Desired, st *State, err error, start time.Time) error {
	metricReconcileSeconds.Observe(time.Since(start).Seconds())
	if errors.Is(err, ErrStopped) {
		return err // the "process died": no status
	}
	var ign ignored
	if errors.As(err, &ign) {
		metricReconciles.WithLabelValues("ignored").Inc()
		r.cfg.Log.Info().Str("resource", rd).Str("reason", string(ign)).Msg("desired state ignored")
		return nil
	}
	base := drbd.Status{Resource: rd, Node: r.cfg.Node}
	if d != nil {
		base.Revision = d.Revision
		if d.Local != nil {
			base.Incarnation = d.Local.Incarnation
		}
	}
	gone := d == nil || d.Local == nil
	switch {
	case err != nil:
		base.Phase, base.Error = drbd.PhaseFailed, err.Error()
		metricReconciles.WithLabelValues("failed").Inc()
		r.cfg.Log.Warn().Str("resource", rd).Err(err).Msg("reconcile failed")
	case gone:
		base.Phase = drbd.PhaseRemoved
		metricReconciles.WithLabelValues("removed").Inc()
	default:
		base.Phase = drbd.PhaseApplied
		metricReconciles.WithLabelValues("applied").Inc()
	}
	r.mu.Lock()
	info := r.res[rd]
	if info == nil {
		info = &resInfo{}
		r.res[rd] = info
	}
	info.base = base
	if d != nil && !gone {
		info.desired = d
	}
	if st != nil || gone {
		info.state = st
	}
	r.mu.Unlock()
	r.pub.now(ctx, rd)
	if base.Phase == drbd.PhaseRemoved {
		r.mu.Lock()
		delete(r.res, rd)
		r.mu.Unlock()
	}
	return err
}

type ignored string

func (i ignored) Error() string { return string(i) }

// step reports a finished step to the test hook.
func (r *Reconciler) step(rd, name string) error {
	metricSteps.WithLabelValues(name).Inc()
	if r.cfg.AfterStep != nil && r.cfg.AfterStep(rd, name) {
		return ErrStopped
	}
	return nil
}

func (r *Reconciler) run(ctx context.Context, argv []string, env ...string) ([]byte, error) {
	return r.cfg.Exec.Run(ctx, argv, execx.Options{Env: env})
}

// admEnv is the environment of drbdadm calls for d.
func (r *Reconciler) admEnv(d *drbd.Desired) []string {
	if !r.cfg.PretendHost || d == nil {
		return nil
	}
	for _, rep := range d.Replicas {
		if rep.Node == d.Node {
			return []string{"__DRBD_NODE__=" + rep.Host}
		}
	}
	return nil
}

// apply carries out d (nil: removal) and returns the state it left.
func (r *Reconciler) apply(ctx context.Context, rd string, d *drbd.Desired) (*State, error) {
	paths := r.cfg.Paths
	st, err := LoadState(paths.StateFile(rd))
	if err != nil {
		return nil, err
	}
	var written []byte // the state file's content as loaded or last saved
	if st != nil {
		written, _ = json.Marshal(st)
	}
	save := func(s *State) error {
		b, _ := json.Marshal(s)
		if bytes.Equal(b, written) {
			return nil // unchanged: no write, no fsync
		}
		if err := SaveState(paths.StateFile(rd), s); err != nil {
			return err
		}
		written = b
		return nil
	}
	installed, err := os.ReadFile(paths.ResFile(rd))
	if err != nil && !os.IsNotExist(err) {
		return st, fmt.Errorf("installed resource file: %w", err)
	}
	isInstalled := err == nil
	plan := Decide(d, st, isInstalled)
	switch {
	case plan.Ignore != "":
		return st, ignored(plan.Ignore)
	case plan.Refuse != "":
		return st, errors.New(plan.Refuse)
	case plan.Remove:
		return nil, r.remove(ctx, rd, st, plan.Down)
	case d == nil || d.Local == nil:
		return nil, nil // nothing here, nothing wanted
	}
	l := d.Local

	// 1. Checks that change nothing on the host.
	var prov volume.Provider
	maxPeers := drbd.MaxPeers(len(d.Replicas))
	if plan.Retire == nil && st != nil && st.MaxPeers > 0 {
		maxPeers = st.MaxPeers
	}
	disks := map[int]string{}
	if !l.Diskless {
		if prov, err = r.provider(ctx, l, rd, d.Volumes); err != nil {
			return st, err
		}
		for _, v := range d.Volumes {
			disks[v.Number] = prov.Path(volume.Name(rd, v.Number))
		}
	}
	minors := localMinors(d)
	rendered, err := drbd.Render(*d, disks)
	if err != nil {
		return st, fmt.Errorf("render: %w", err)
	}
	changed := !isInstalled || !bytes.Equal(installed, rendered)
	if changed {
		if err := r.check(ctx, d, rendered, isInstalled); err != nil {
			return st, err
		}
	}

	if plan.Retire != nil || plan.CreateMD || plan.Seed {
		r.pending(ctx, rd, d) // long steps ahead: say so
	}

	// 2. Retire an older incarnation.
	if plan.Retire != nil {
		if err := r.retire(ctx, rd, plan.Retire, plan.RetireDown); err != nil {
			return st, err
		}
		st = nil
	}
	if st == nil {
		st = &State{Resource: rd, Incarnation: l.Incarnation}
	}
	st.Diskless = l.Diskless
	if !l.Diskless && !st.MDCreated {
		st.Provider, st.Pool, st.MaxPeers = l.Provider, l.Pool, maxPeers
		st.Minors = minors
	}
	if err := save(st); err != nil {
		return st, err
	}

	// 3. Backing volumes.
	if plan.Backing {
		if st.Disks == nil {
			st.Disks = map[int]string{}
		}
		for _, v := range d.Volumes {
			name := volume.Name(rd, v.Number)
			path, err := prov.Create(ctx, name, drbd.BackingKiB(v.SizeKiB, st.MaxPeers))
			if err != nil {
				return st, fmt.Errorf("backing volume %s: %w", name, err)
			}
			st.Disks[v.Number] = path
		}
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "backing"); err != nil {
			return st, err
		}
	}
	// 4. The resource file, with the devices DRBD attaches (inert until the adjust).
	if r.cfg.LoopDevices && !l.Diskless && isFile(l.Provider) {
		for v, path := range st.Disks {
			dev, err := volume.Loop{Exec: r.cfg.Exec}.Attach(ctx, path)
			if err != nil {
				return st, err
			}
			disks[v] = dev
		}
		if rendered, err = drbd.Render(*d, disks); err != nil {
			return st, fmt.Errorf("render: %w", err)
		}
		changed = !isInstalled || !bytes.Equal(installed, rendered)
		if changed {
			if err := r.check(ctx, d, rendered, isInstalled); err != nil {
				return st, err
			}
		}
	}
	if changed {
		if err := writeAtomic(paths.ResFile(rd), rendered, 0o644); err != nil {
			return st, fmt.Errorf("install %s: %w", paths.ResFile(rd), err)
		}
		if err := r.step(rd, "installed"); err != nil {
			return st, err
		}
	}

	// 5. Metadata and seeds.
	if plan.CreateMD {
		for _, v := range d.Volumes {
			if _, err := r.run(ctx, drbd.CreateMD(st.Minors[v.Number], st.Disks[v.Number], st.MaxPeers)); err != nil {
				return st, fmt.Errorf("create-md volume %d: %w", v.Number, err)
			}
		}
		st.MDCreated = true
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "md-created"); err != nil {
			return st, err
		}
	}
	if plan.Seed {
		if err := r.seed(ctx, rd, d, st); err != nil {
			return st, err
		}
		st.Seeded = true
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "seeded"); err != nil {
			return st, err
		}
	}

	// 6. Adjust (or down), peers that left, a dropped disk.
	switch {
	case plan.Adjust:
		if !st.Adjusted {
			st.Adjusted = true // before the adjust: from now on DRBD may use the metadata
			if err := save(st); err != nil {
				return st, err
			}
			if err := r.step(rd, "adjusting"); err != nil {
				return st, err
			}
		}
		if err := r.cfg.Kernel.Adjust(ctx, Resource{Desired: *d, Disks: disks, ConfigChanged: changed}); err != nil {
			return st, fmt.Errorf("adjust: %w", err)
		}
		if err := r.step(rd, "adjusted"); err != nil {
			return st, err
		}
	case plan.Down:
		if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
			return st, fmt.Errorf("down (deactivated): %w", err)
		}
		metricSteps.WithLabelValues("down").Inc()
	}
	for _, id := range plan.Forget {
		if err := r.cfg.Kernel.DelPeer(ctx, rd, id); err != nil {
			// adjust already dropped the connection of a peer gone from the file
			r.cfg.Log.Debug().Str("resource", rd).Int("peer", id).Err(err).Msg("del-peer")
		}
		if !l.Diskless {
			if err := r.cfg.Kernel.ForgetPeer(ctx, rd, id); err != nil {
				return st, fmt.Errorf("forget-peer node id %d: %w", id, err)
			}
		}
		delete(st.Peers, id)
		metricSteps.WithLabelValues("forget-peer").Inc()
	}
	if plan.DropDisks {
		if err := r.freeDisks(ctx, rd, st); err != nil {
			return st, err
		}
	}
	if plan.Adjust {
		st.Peers = PeersOf(d)
	}
	st.Revision = d.Revision
	return st, save(st)
}

func isFile(p drbd.Provider) bool { return p == drbd.ProviderFile || p == drbd.ProviderFileThin }

// provider returns the volume provider of l after checking that its pool exists (a
// file pool's directory; a volume group or zpool the tool can read): the agent never
// creates a storage pool.
func (r *Reconciler) provider(ctx context.Context, l *drbd.Local, rd string, vols []drbd.Volume) (volume.Provider, error) {
	prov, err := volume.For(l.Provider, l.Pool, r.cfg.Paths.Root, r.cfg.Exec)
	if err != nil {
		return nil, err
	}
	if f, ok := prov.(*volume.File); ok {
		fi, err := os.Stat(f.Dir)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("local.pool %q: storage pool directory %s does not exist", l.Pool, f.Dir)
		}
		return prov, nil
	}
	if len(vols) > 0 {
		if _, err := prov.Exists(ctx, volume.Name(rd, vols[0].Number)); err != nil {
			return nil, fmt.Errorf("local.pool %q: %w", l.Pool, err)
		}
	}
	return prov, nil
}

// check stages the rendered file and has drbdadm check it against the node's other
// resources (-E the installed version). The staged file is removed either way.
func (r *Reconciler) check(ctx context.Context, d *drbd.Desired, rendered []byte, installed bool) error {
	staged := filepath.Join(r.cfg.Paths.StagedDir, d.Resource+".res")
	if err := writeAtomic(staged, rendered, 0o644); err != nil {
		return fmt.Errorf("stage resource file: %w", err)
	}
	defer os.Remove(staged)
	exclude := ""
	if installed {
		exclude = r.cfg.Paths.ResFile(d.Resource)
	}
	if _, err := r.run(ctx, r.adm.CheckNew(staged, exclude), r.admEnv(d)...); err != nil {
		var e *execx.Error
		if errors.As(err, &e) && e.Stderr != "" {
			return fmt.Errorf("drbdadm refused the resource file: %s", e.Stderr)
		}
		return fmt.Errorf("drbdadm refused the resource file: %w", err)
	}
	return nil
}

// seed applies every seed of d (one set-gi per seed, always --force) and verifies the
// result with get-gi for every node id against drbd.Metadata.
func (r *Reconciler) seed(ctx context.Context, rd string, d *drbd.Desired, st *State) error {
	for _, s := range d.Local.Seeds {
		disk, ok := st.Disks[s.Volume]
		if !ok {
			return fmt.Errorf("local.seeds: volume %d has no backing disk", s.Volume)
		}
		if _, err := r.run(ctx, drbd.SeedArgv(st.Minors[s.Volume], disk, s)); err != nil {
			return fmt.Errorf("set-gi volume %d node id %d: %w", s.Volume, s.NodeID, err)
		}
	}
	for _, v := range d.Volumes {
		want := drbd.NewMetadata()
		if err := want.Apply(d.Local.Seeds, v.Number); err != nil {
			return fmt.Errorf("local.seeds: %w", err)
		}
		for n := 0; n <= drbd.MaxNodeID; n++ {
			out, err := r.run(ctx, drbd.GetGI(st.Minors[v.Number], st.Disks[v.Number], n))
			if err != nil {
				return fmt.Errorf("verify seeds: %w", err)
			}
			got, err := drbd.ParseGetGI(out)
			if err != nil {
				return fmt.Errorf("verify seeds: %w", err)
			}
			if got != want.GI(n) {
				return fmt.Errorf("verify seeds: volume %d node id %d: get-gi %s, want %s", v.Number, n, got, want.GI(n))
			}
		}
	}
	return nil
}

// retire takes an older incarnation off the host: down (if it was up with disks),
// wipe-md and removal of its backing volumes.
func (r *Reconciler) retire(ctx context.Context, rd string, old *State, down bool) error {
	if down {
		if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
			return fmt.Errorf("retire incarnation %d: down: %w", old.Incarnation, err)
		}
	}
	if err := r.freeDisks(ctx, rd, old); err != nil {
		return fmt.Errorf("retire incarnation %d: %w", old.Incarnation, err)
	}
	metricSteps.WithLabelValues("retire").Inc()
	return nil
}

// freeDisks wipes the metadata of st's disks and removes the backing volumes, then
// records that in st (the caller saves it).
func (r *Reconciler) freeDisks(ctx context.Context, rd string, st *State) error {
	if len(st.Disks) == 0 {
		return nil
	}
	prov, err := volume.For(st.Provider, st.Pool, r.cfg.Paths.Root, r.cfg.Exec)
	if err != nil {
		return err
	}
	for v, disk := range st.Disks {
		if st.MDCreated {
			if _, err := os.Stat(disk); err == nil || !isFile(st.Provider) {
				if _, err := r.run(ctx, drbd.WipeMD(st.Minors[v], disk)); err != nil {
					return fmt.Errorf("wipe-md volume %d: %w", v, err)
				}
				metricSteps.WithLabelValues("wipe").Inc()
			}
		}
		if r.cfg.LoopDevices && isFile(st.Provider) {
			if err := (volume.Loop{Exec: r.cfg.Exec}).Detach(ctx, disk); err != nil {
				return err
			}
		}
		if err := prov.Remove(ctx, volume.Name(rd, v)); err != nil {
			return err
		}
		metricSteps.WithLabelValues("remove-backing").Inc()
	}
	st.Disks, st.MDCreated, st.Seeded = nil, false, false
	return nil
}

// remove tears rd down: down, wipe-md, backing volumes, resource file, state file.
func (r *Reconciler) remove(ctx context.Context, rd string, st *State, down bool) error {
	if down {
		if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
			return fmt.Errorf("down: %w", err)
		}
		metricSteps.WithLabelValues("down").Inc()
	}
	if st != nil {
		if err := r.freeDisks(ctx, rd, st); err != nil {
			return err
		}
	}
	if err := removeDurably(r.cfg.Paths.ResFile(rd)); err != nil {
		return err
	}
	if err := removeDurably(r.cfg.Paths.StateFile(rd)); err != nil {
		return err
	}
	return r.step(rd, "removed")
}

// localMinors returns the local replica's minors by volume.
func localMinors(d *drbd.Desired) map[int]int {
	for _, rep := range d.Replicas {
		if rep.Node == d.Node {
			out := make(map[int]int, len(rep.Minors))
			for v, m := range rep.Minors {
				out[v] = m
			}
			return out
		}
	}
	return map[int]int{}
}

// pending publishes phase pending for d (its revision and incarnation) while the
// reconcile creates disks and metadata.
func (r *Reconciler) pending(ctx context.Context, rd string, d *drbd.Desired) {
	r.mu.Lock()
	info := r.res[rd]
	if info == nil {
		info = &resInfo{}
		r.res[rd] = info
	}
	info.base = drbd.Status{Resource: rd, Node: r.cfg.Node, Revision: d.Revision, Incarnation: d.Local.Incarnation, Phase: drbd.PhasePending}
	info.desired = d
	r.mu.Unlock()
	r.pub.now(ctx, rd)
}
