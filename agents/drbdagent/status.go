package drbdagent

import (
	"context"
	"encoding/json"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var metricStatusPublished = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_drbd_status_published_total",
	Help: "drbd.Status messages published, by cause (reconcile, observed)."}, []string{"cause"})

// statusPublisher sends drbd.Status on <prefix>.status.<node>.drbd.<rd>: at once after a
// reconcile, and for observed changes at most once per StatusInterval per resource (the
// latest state, trailing edge).
type statusPublisher struct {
	r     *Reconciler
	mu    sync.Mutex
	dirty map[string]bool
	last  map[string]time.Time
	wake  chan struct{}
	// sending serializes build-and-send per resource: a status built before a
	// reconcile finished must not go out after the one built from its outcome.
	sendingMu sync.Mutex
	sending   map[string]*sync.Mutex
}

// now builds and publishes rd's status (after a reconcile).
func (p *statusPublisher) now(ctx context.Context, rd string) {
	p.mu.Lock()
	delete(p.dirty, rd)
	p.last[rd] = time.Now()
	p.mu.Unlock()
	p.publish(ctx, rd, "reconcile")
}

// forget drops rd's send lock (the resource is gone from the node).
func (p *statusPublisher) forget(rd string) {
	p.sendingMu.Lock()
	delete(p.sending, rd)
	p.sendingMu.Unlock()
}

// soon marks rd's status to be published within StatusInterval.
func (p *statusPublisher) soon(rd string) {
	p.mu.Lock()
	p.dirty[rd] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *statusPublisher) run(ctx context.Context) {
	interval := p.r.cfg.StatusInterval
	tick := time.NewTicker(interval / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.wake:
		}
		now := time.Now()
		var due []string
		p.mu.Lock()
		for rd := range p.dirty {
			if now.Sub(p.last[rd]) >= interval {
				due = append(due, rd)
				delete(p.dirty, rd)
				p.last[rd] = now
			}
		}
		p.mu.Unlock()
		sort.Strings(due)
		for _, rd := range due {
			p.publish(ctx, rd, "observed")
		}
	}
}

func (p *statusPublisher) publish(ctx context.Context, rd, cause string) {
	p.sendingMu.Lock()
	if p.sending == nil {
		p.sending = map[string]*sync.Mutex{}
	}
	m := p.sending[rd]
	if m == nil {
		m = &sync.Mutex{}
		p.sending[rd] = m
	}
	p.sendingMu.Unlock()
	m.Lock()
	defer m.Unlock()
	st, ok := p.r.build(ctx, rd)
	if !ok || p.r.cfg.Pub == nil {
		return
	}
	body, err := json.Marshal(st)
	if err != nil {
		return
	}
	// Only this node's own status subjects: a per-node NATS user may publish nothing else.
	if err := p.r.cfg.Pub.Publish(p.r.cfg.Names.Status(p.r.cfg.Node, "drbd", rd), body); err != nil {
		p.r.cfg.Log.Warn().Err(err).Str("resource", rd).Msg("status not sent")
		return
	}
	metricStatusPublished.WithLabelValues(cause).Inc()
}

// build assembles rd's status: the reconcile's outcome, what events2 shows, and the
// current GI of every local disk (drbdsetup get-gi while up, drbdmeta get-gi while
// down).
func (r *Reconciler) build(ctx context.Context, rd string) (drbd.Status, bool) {
	r.mu.Lock()
	info := r.res[rd]
	if info == nil {
		r.mu.Unlock()
		return drbd.Status{}, false
	}
	st := info.base
	d, state := info.desired, info.state
	r.mu.Unlock()
	st.At = time.Now().UTC()
	if st.Phase == drbd.PhaseRemoved || d == nil || d.Local == nil {
		return st, true
	}
	minors := localMinors(d)
	for _, v := range d.Volumes {
		st.Volumes = append(st.Volumes, drbd.VolumeStatus{Volume: v.Number, Minor: minors[v.Number]})
	}
	names := map[int]string{}
	for _, rep := range d.Replicas {
		names[rep.NodeID] = rep.Node
	}
	up := r.fold.Up(rd)
	r.fold.Fill(rd, &st, names)
	resizePhases(&st, d, state)
	st.Snapshots = snapshotStatuses(state)
	st.Backups = r.ups.statuses(rd)
	if state != nil {
		st.FilesystemsMade = maps.Clone(state.FilesystemsMade)
	}
	if d.Local.Diskless || state == nil || !state.MDCreated {
		return st, true
	}
	// drbdsetup get-gi needs a peer node id; the current UUID is the same for every
	// peer, so take the first peer in node-id order (d.Replicas is sorted), or our own.
	peer := d.Local.NodeID
	for _, rep := range d.Replicas {
		if rep.Node != d.Node {
			peer = rep.NodeID
			break
		}
	}
	for i := range st.Volumes {
		v := st.Volumes[i].Volume
		var gi drbd.GI
		var err error
		if up {
			gi, err = r.cfg.Kernel.GetGI(ctx, rd, v, peer)
		} else if disk, ok := state.Disks[v]; ok {
			var out []byte
			if out, err = r.run(ctx, drbdutils.GetGI(state.Minors[v], disk, d.Local.NodeID)); err == nil {
				gi, err = drbdutils.ParseGetGI(out)
			}
		}
		if err == nil && gi.Complete() {
			st.Volumes[i].CurrentGI = gi.Current().String()
		}
	}
	return st, true
}

// resizePhases sets VolumeStatus.Resize from the desired sizes, what the state file
// says the backing holds and the device size events2 reports.
func resizePhases(st *drbd.Status, d *drbd.Desired, state *State) {
	want := map[int]uint64{}
	for _, v := range d.Volumes {
		want[v.Number] = v.SizeKiB
	}
	for i := range st.Volumes {
		vs := &st.Volumes[i]
		size := want[vs.Volume]
		switch {
		case !d.Local.Diskless && state != nil && state.Sizes[vs.Volume] != 0 && state.Sizes[vs.Volume] < size:
			vs.Resize = drbd.ResizeGrowingBacking
		case vs.SizeKiB != 0 && vs.SizeKiB < size:
			vs.Resize = drbd.ResizeGrowingDevice
		}
	}
}
