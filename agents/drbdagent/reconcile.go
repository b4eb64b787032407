package drbdagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

var (
	metricReconciles = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_drbd_reconciles_total",
		Help: "DRBD resource reconciles by outcome (applied, removed, failed, ignored)."}, []string{"outcome"})
	metricReconcileSeconds = promauto.NewHistogram(prometheus.HistogramOpts{Name: "cairn_agent_drbd_reconcile_seconds",
		Help: "Time of one DRBD resource reconcile.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	metricSteps = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_drbd_steps_total",
		Help: "Host-changing steps carried out (backing, create-md, seed, install, adjust, down, forget-peer, wipe, remove)."}, []string{"step"})
	metricResumeFailures = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_agent_drbd_resume_failures_total",
		Help: "resume-io runs that failed (I/O stays suspended; each is retried until one succeeds)."})
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
	// SuspendBound is the longest I/O stays suspended for a snapshot (DefaultSuspendBound):
	// the take's deadline, and when a timer resumes I/O whose order to resume did not come.
	SuspendBound time.Duration
	// BeforeTake, when set, is called before a snapshot's take with the take's context
	// (its deadline is the suspension bound): tests slow a take down with it.
	BeforeTake func(ctx context.Context, resource string)
	// BeforeSuspend, when set, is called before a snapshot suspends a resource's I/O:
	// tests make one definition of a group snapshot late with it.
	BeforeSuspend func(ctx context.Context, resource string)
	// AfterStep, when set, is called after every step with its name (backing,
	// md-created, seeded, installed, adjusting, adjusted, removed); returning true makes
	// the reconcile stop right there as if the process had died (tests of restarts).
	AfterStep func(resource, step string) bool
	// Remotes opens a remote's object store (the agent asks a serve for its
	// credentials); nil: backups and restores from backups fail saying so.
	Remotes func(ctx context.Context, remote string) (RemoteStore, error)
	// BackupRetry is the first wait before an upload that stopped on an error a retry
	// may cure is tried again (1 s; it doubles up to 30 s).
	BackupRetry time.Duration
	// BackupBandwidth limits what this node's uploads send, together, in bytes per
	// second (0: no limit).
	BackupBandwidth int64
	// AllowExtFiles are the host path prefixes external files may be written under
	// (LINSTOR's allowExtFiles; none: every deployed file fails to be written, saying so).
	AllowExtFiles []string
}

// ErrStopped is returned when AfterStep stopped a reconcile.
var ErrStopped = errors.New("reconcile stopped after a step (test hook)")

// Reconciler carries out drbd.Desired messages (agents.Reconciler) and publishes
// drbd.Status. One call per resource at a time (the agent's workers guarantee it);
// calls for different resources run concurrently.
type Reconciler struct {
	cfg  Config
	adm  drbdutils.Adm
	fold *Fold
	pub  *statusPublisher

	// prepareMu guards prepared: cfg.Paths are prepared by the first Reconcile that
	// succeeds in it (a failure is retried by the next one).
	prepareMu sync.Mutex
	prepared  bool
	mu        sync.Mutex
	res       map[string]*resInfo

	// locks serializes a resource's reconcile with its snapshot timers.
	locksMu  sync.Mutex
	locks    map[string]*sync.Mutex
	timersMu sync.Mutex
	timers   map[string]*time.Timer

	// ups are the uploads of backups under way or finished, by resource and id;
	// upLimit paces them (Config.BackupBandwidth; nil: no limit).
	ups     uploads
	upLimit *rate.Limiter

	files *extFiles
}

// lockResource takes rd's lock (reconciles and snapshot timers of one resource never
// run at once) and returns its release.
func (r *Reconciler) lockResource(rd string) func() {
	r.locksMu.Lock()
	m := r.locks[rd]
	if m == nil {
		m = &sync.Mutex{}
		r.locks[rd] = m
	}
	r.locksMu.Unlock()
	m.Lock()
	return m.Unlock
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
	if cfg.SuspendBound <= 0 {
		cfg.SuspendBound = DefaultSuspendBound
	}
	r := &Reconciler{cfg: cfg, adm: drbdutils.Adm{Config: cfg.Paths.MainConf}, fold: NewFold(), res: map[string]*resInfo{},
		locks: map[string]*sync.Mutex{}, timers: map[string]*time.Timer{}, ups: uploads{jobs: map[string]*uploadJob{}},
		files: newExtFiles(cfg.Paths, cfg.AllowExtFiles)}
	if r.cfg.BackupRetry <= 0 {
		r.cfg.BackupRetry = time.Second
	}
	if r.cfg.BackupBandwidth > 0 {
		// The burst holds the largest chunk sent (an encrypted one is a little over a
		// chunk): WaitN refuses more than the burst.
		r.upLimit = rate.NewLimiter(rate.Limit(r.cfg.BackupBandwidth), max(int(r.cfg.BackupBandwidth), 2*backup.ChunkSize))
	}
	if cfg.Pub != nil {
		r.files.publish = func(rep events.FilesReport) {
			rep.Node = cfg.Node
			body, _ := json.Marshal(rep)
			if err := cfg.Pub.Publish(cfg.Names.Status(cfg.Node, events.FilesKind, cfg.Node), body); err != nil {
				cfg.Log.Warn().Err(err).Msg("external files report not sent")
			}
		}
	}
	r.pub = &statusPublisher{r: r, dirty: map[string]bool{}, last: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	return r, nil
}

// Run follows the kernel's events2 stream and publishes statuses on observed changes
// until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	f := &Follower{Kernel: r.cfg.Kernel, Fold: r.fold, Changed: r.pub.soon, SizeKiB: r.sizeKiB, Log: r.cfg.Log}
	if m, ok := r.cfg.Kernel.(missingReporter); ok {
		f.Missing = m.Missing
	}
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
	if err := r.preparePaths(); err != nil {
		return r.finish(ctx, rd, d, nil, err, start)
	}
	unlock := r.lockResource(rd)
	defer unlock()
	st, err := r.apply(ctx, rd, d)
	if err == nil && st != nil && d != nil && d.Local != nil && !d.Local.Diskless && len(d.Local.Filesystems) > 0 {
		err = r.makeFilesystems(ctx, rd, d, st)
	}
	var ign ignored
	if !errors.Is(err, ErrStopped) && !errors.As(err, &ign) {
		var want []drbd.File
		if d != nil && d.Local != nil {
			want = d.Files
		}
		if ferr := r.files.sync(rd, want); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return r.finish(ctx, rd, d, st, err, start)
}

// preparePaths prepares cfg.Paths unless that already succeeded.
func (r *Reconciler) preparePaths() error {
	r.prepareMu.Lock()
	defer r.prepareMu.Unlock()
	if r.prepared {
		return nil
	}
	if err := r.cfg.Paths.Prepare(); err != nil {
		return err
	}
	r.prepared = true
	return nil
}

// resourceOf returns the resource of <prefix>.node.<node>.drbd.<rd>.
func (r *Reconciler) resourceOf(subject string) (string, bool) {
	node, kind, rd, ok := r.cfg.Names.ParseNode(subject)
	if !ok || node != r.cfg.Node || kind != "drbd" {
		return "", false
	}
	return rd, true
}

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
		// Logged once, by the worker that retries it (agents): here only at debug.
		r.cfg.Log.Debug().Str("resource", rd).Err(err).Msg("reconcile failed")
	case gone:
		base.Phase = drbd.PhaseRemoved
		metricReconciles.WithLabelValues("removed").Inc()
	default:
		base.Phase = drbd.PhaseApplied
		metricReconciles.WithLabelValues("applied").Inc()
	}
	r.mu.Lock()
	info := r.infoLocked(rd)
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
		r.pub.forget(rd)
	}
	return err
}

// infoLocked returns rd's resInfo, adding an empty one when there is none (r.mu held).
func (r *Reconciler) infoLocked(rd string) *resInfo {
	info := r.res[rd]
	if info == nil {
		info = &resInfo{}
		r.res[rd] = info
	}
	return info
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

// pending publishes phase pending for d (its revision and incarnation) while the
// reconcile creates disks and metadata.
func (r *Reconciler) pending(ctx context.Context, rd string, d *drbd.Desired) {
	r.mu.Lock()
	info := r.infoLocked(rd)
	info.base = drbd.Status{Resource: rd, Node: r.cfg.Node, Revision: d.Revision, Incarnation: d.Local.Incarnation, Phase: drbd.PhasePending}
	info.desired = d
	r.mu.Unlock()
	r.pub.now(ctx, rd)
}
