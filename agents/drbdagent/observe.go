package drbdagent

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var (
	metricEventLines = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_agent_events2_lines_total",
		Help: "drbdsetup events2 lines read (real or simulated kernel)."})
	metricEventMalformed = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_agent_events2_malformed_total",
		Help: "drbdsetup events2 lines that did not parse and were skipped."})
	metricEventRestarts = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_agent_events2_restarts_total",
		Help: "Times the events2 stream ended and was started again."})
)

// Fold holds what events2 said about every resource: the latest value of every field
// the status reports. Safe for concurrent use.
type Fold struct {
	mu  sync.Mutex
	res map[string]*resObs
	// Now is the fold's clock for resync rates (nil: time.Now).
	Now func() time.Time
}

func (f *Fold) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

type resObs struct {
	role string
	// mayPromote and score: events2 may_promote and promotion_score (nil: not reported).
	mayPromote *bool
	score      int
	devices    map[int]*devObs
	conns      map[int]*connObs
}

type devObs struct {
	minor        int
	disk         string
	quorum, open *bool
	sizeKiB      uint64
}

type connObs struct {
	name, state string
	pds         map[int]*pdObs
}

type pdObs struct {
	replication, peerDisk string
	done                  *float64
	oos                   *uint64
	kind                  string
	lastSync              *uint64
	syncing               bool
	// syncSince and syncFrom: when the resync under way started, and its out-of-sync
	// then (the rate is what it copied since, over the time since).
	syncSince time.Time
	syncFrom  uint64
}

// NewFold returns an empty fold.
func NewFold() *Fold { return &Fold{res: map[string]*resObs{}} }

// Reset forgets everything (a new events2 stream starts with a full dump) and returns
// the resources it knew.
func (f *Fold) Reset() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.res))
	for rd := range f.res {
		out = append(out, rd)
	}
	f.res = map[string]*resObs{}
	return out
}

// Up reports whether events2 shows the resource (it exists in the kernel).
func (f *Fold) Up(rd string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.res[rd]
	return ok
}

func isSyncing(r string) bool {
	switch r {
	case "SyncSource", "SyncTarget", "PausedSyncS", "PausedSyncT":
		return true
	}
	return false
}

// Apply folds one event in; it returns the resource it concerns ("" for `exists -`
// and objects the status does not use). sizeKiB gives a volume's size when the device
// line carries none: a resync whose out-of-sync at its start reaches the size is a full
// sync, a smaller one a bitmap resync; a connection that reaches Established through a
// change without a resync synced nothing ("none"). The dump (`exists`) of an already
// established connection says nothing about how it got there.
func (f *Fold) Apply(ev drbdutils.Event, sizeKiB func(rd string, vol int) uint64) string {
	rd := ev.Name()
	if rd == "" {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.res[rd]
	if ev.Object == drbdutils.ObjectResource && ev.Verb == drbdutils.VerbDestroy {
		delete(f.res, rd)
		return rd
	}
	if r == nil {
		switch ev.Object {
		case drbdutils.ObjectResource, drbdutils.ObjectDevice, drbdutils.ObjectConnection, drbdutils.ObjectPeerDevice:
		default:
			return ""
		}
		r = &resObs{devices: map[int]*devObs{}, conns: map[int]*connObs{}}
		f.res[rd] = r
	}
	switch ev.Object {
	case drbdutils.ObjectResource:
		if v := ev.Role(); v != "" {
			r.role = v
		}
		if v, ok := ev.MayPromote(); ok {
			r.mayPromote = &v
		}
		if v, ok := ev.PromotionScore(); ok {
			r.score = v
		}
	case drbdutils.ObjectDevice:
		vol, ok := ev.Volume()
		if !ok {
			return ""
		}
		if ev.Verb == drbdutils.VerbDestroy {
			delete(r.devices, vol)
			return rd
		}
		d := r.devices[vol]
		if d == nil {
			d = &devObs{}
			r.devices[vol] = d
		}
		if m, ok := ev.Minor(); ok {
			d.minor = m
		}
		if v := ev.Disk(); v != "" {
			d.disk = v
		}
		if q, ok := ev.Quorum(); ok {
			d.quorum = &q
		}
		if o, ok := ev.Open(); ok {
			d.open = &o
		}
		if n, ok := ev.SizeKiB(); ok {
			d.sizeKiB = n
		}
	case drbdutils.ObjectConnection:
		peer, ok := ev.PeerNodeID()
		if !ok {
			return ""
		}
		if ev.Verb == drbdutils.VerbDestroy {
			delete(r.conns, peer)
			return rd
		}
		c := conn(r, peer)
		if v := ev.ConnName(); v != "" {
			c.name = v
		}
		if v := ev.Connection(); v != "" {
			c.state = v
			if v != "Connected" {
				for _, pd := range c.pds {
					pd.kind, pd.lastSync, pd.syncing = "", nil, false
				}
			}
		}
	case drbdutils.ObjectPeerDevice:
		peer, ok1 := ev.PeerNodeID()
		vol, ok2 := ev.Volume()
		if !ok1 || !ok2 {
			return ""
		}
		c := conn(r, peer)
		if v := ev.ConnName(); v != "" {
			c.name = v
		}
		if ev.Verb == drbdutils.VerbDestroy {
			delete(c.pds, vol)
			return rd
		}
		pd := c.pds[vol]
		if pd == nil {
			pd = &pdObs{}
			c.pds[vol] = pd
		}
		if v := ev.PeerDisk(); v != "" {
			pd.peerDisk = v
		}
		if n, ok := ev.OutOfSyncKiB(); ok {
			pd.oos = &n
		}
		if d, ok := ev.Done(); ok {
			pd.done = &d
		} else if ev.Verb != drbdutils.VerbChange || ev.Replication() != "" {
			pd.done = nil
		}
		if rep := ev.Replication(); rep != "" {
			prev := pd.replication
			pd.replication = rep
			switch {
			case isSyncing(rep) && !pd.syncing:
				pd.syncing = true
				if pd.oos != nil {
					pd.syncSince, pd.syncFrom = f.now(), *pd.oos
					size := uint64(0)
					if d := r.devices[vol]; d != nil {
						size = d.sizeKiB
					}
					if size == 0 && sizeKiB != nil {
						size = sizeKiB(rd, vol)
					}
					kib := *pd.oos
					pd.lastSync = &kib
					if size > 0 && kib >= size {
						pd.kind = drbd.SyncFull.String()
					} else {
						pd.kind = drbd.SyncBitmap.String()
					}
				}
			case rep == "Established" && pd.syncing:
				pd.syncing = false
			case rep == "Established" && prev != "Established" && ev.Verb != drbdutils.VerbExists && pd.kind == "":
				pd.kind = drbd.SyncNone.String()
			case rep == "Off":
				pd.kind, pd.lastSync, pd.syncing = "", nil, false
			}
		}
	}
	return rd
}

// rate is the resync's average rate since it started (KiB/s) and the seconds left at
// that rate; nil while no resync runs, before a second has passed, or while nothing was
// copied yet.
func (pd *pdObs) rate(now time.Time) (kibs, eta *uint64) {
	if !pd.syncing || pd.oos == nil || pd.syncSince.IsZero() {
		return nil, nil
	}
	elapsed := now.Sub(pd.syncSince).Seconds()
	if elapsed < 1 || pd.syncFrom <= *pd.oos {
		return nil, nil
	}
	r := uint64(float64(pd.syncFrom-*pd.oos) / elapsed)
	if r == 0 {
		return nil, nil
	}
	left := (*pd.oos + r - 1) / r
	return &r, &left
}

func conn(r *resObs, peer int) *connObs {
	c := r.conns[peer]
	if c == nil {
		c = &connObs{pds: map[int]*pdObs{}}
		r.conns[peer] = c
	}
	return c
}

// DiskState is the disk state events2 last showed for volume vol of rd ("" when none).
func (f *Fold) DiskState(rd string, vol int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.res[rd]; r != nil && r.devices[vol] != nil {
		return r.devices[vol].disk
	}
	return ""
}

// Fill copies what events2 said about rd into st (role, quorum, open, volumes, peers);
// names gives the node of each peer node id. Volumes already in st keep their
// CurrentGI.
func (f *Fold) Fill(rd string, st *drbd.Status, names map[int]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.res[rd]
	if r == nil {
		return
	}
	st.Role = r.role
	if r.mayPromote != nil {
		m := *r.mayPromote
		st.MayPromote, st.PromotionScore = &m, r.score
	}
	vols := slices.Sorted(maps.Keys(r.devices))
	for _, v := range vols {
		d := r.devices[v]
		if st.Quorum == nil && d.quorum != nil {
			q := *d.quorum
			st.Quorum = &q
		}
		if st.Open == nil && d.open != nil {
			o := *d.open
			st.Open = &o
		}
		found := false
		for i := range st.Volumes {
			if st.Volumes[i].Volume == v {
				st.Volumes[i].Minor, st.Volumes[i].DiskState, st.Volumes[i].SizeKiB = d.minor, d.disk, d.sizeKiB
				found = true
			}
		}
		if !found {
			st.Volumes = append(st.Volumes, drbd.VolumeStatus{Volume: v, Minor: d.minor, DiskState: d.disk, SizeKiB: d.sizeKiB})
		}
	}
	peers := slices.Sorted(maps.Keys(r.conns))
	st.Peers = st.Peers[:0]
	for _, p := range peers {
		c := r.conns[p]
		ps := drbd.PeerStatus{Node: names[p], NodeID: p, Connection: c.state}
		pvs := slices.Sorted(maps.Keys(c.pds))
		for _, v := range pvs {
			pd := c.pds[v]
			pv := drbd.PeerVolumeStatus{Volume: v, Replication: pd.replication, PeerDisk: pd.peerDisk,
				SyncPercent: pd.done, SyncKind: pd.kind, OutOfSyncKiB: pd.oos, LastSyncKiB: pd.lastSync}
			pv.SyncRateKiBs, pv.SyncETASeconds = pd.rate(f.now())
			ps.Volumes = append(ps.Volumes, pv)
		}
		st.Peers = append(st.Peers, ps)
	}
}

// Follower keeps a Fold up to date from the kernel's events2 stream, starting the
// stream again whenever it ends (drbdsetup exited, was killed, or the stream broke).
// Each new stream replaces the fold with its initial dump (at its first line).
// Malformed lines are counted (cairn_agent_events2_malformed_total) and skipped.
//
// A stream's end is logged at warn, except when Missing says DRBD is not on the host:
// that is logged at warn once (again only when what is missing changes), every further
// such end at debug, and the first stream that prints a line after it at info.
type Follower struct {
	Kernel Kernel
	Fold   *Fold
	// Changed is called with the resource every event (or a reset) concerns.
	Changed func(rd string)
	// SizeKiB gives a volume's size for the sync-kind rule (may be nil).
	SizeKiB func(rd string, vol int) uint64
	// Missing, when set, is asked about the error of every stream that ended without a
	// line: it names what of DRBD is missing on the host, or returns "" for any other
	// failure (see Real.Missing; Reconciler.Run sets it from such a kernel).
	Missing func(err error) string
	Log     zerolog.Logger
	// Backoff is the pause before a stream is started again (1 s); it doubles while
	// streams end without a line, up to 30 s.
	Backoff time.Duration

	// missing is what the last warning said is missing; "" once a stream printed a
	// line (or before any warning).
	missing string
}

// Run follows events2 until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	base := f.Backoff
	if base <= 0 {
		base = time.Second
	}
	wait := base
	for ctx.Err() == nil {
		lines := 0
		err := f.Kernel.Events(ctx, func(line string) {
			if lines == 0 {
				f.started()
			}
			lines++
			f.line(line)
		})
		if ctx.Err() != nil {
			return
		}
		metricEventRestarts.Inc()
		if lines > 0 {
			wait = base
		}
		f.ended(err, lines, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if lines == 0 {
			wait = min(2*wait, 30*time.Second)
		}
	}
}

// started is called at the first line of a stream. A new stream dumps the whole state:
// the old one (kept until now, so a restart does not blank the statuses) is forgotten.
// If DRBD was reported missing, the stream working is logged at info.
func (f *Follower) started() {
	if f.missing != "" {
		f.Log.Info().Str("was_missing", f.missing).Msg("DRBD is available: events2 stream started")
		f.missing = ""
	}
	for _, rd := range f.Fold.Reset() {
		f.changed(rd)
	}
}

// line parses one events2 line and folds it in; a malformed line is counted, logged
// and skipped.
func (f *Follower) line(line string) {
	metricEventLines.Inc()
	ev, err := drbdutils.ParseEvents2Line(line)
	if err != nil {
		metricEventMalformed.Inc()
		f.Log.Warn().Err(err).Str("line", line).Msg("events2 line skipped")
		return
	}
	if rd := f.Fold.Apply(ev, f.SizeKiB); rd != "" {
		f.changed(rd)
	}
}

// ended logs the end of a stream that printed lines lines and ended with err; the
// next one starts in wait. See Follower for the levels.
func (f *Follower) ended(err error, lines int, wait time.Duration) {
	what := ""
	if lines == 0 && f.Missing != nil {
		what = f.Missing(err)
	}
	switch {
	case what == "":
		f.Log.Warn().Err(err).Int("lines", lines).Dur("restart_in_ms", wait).Msg("events2 stream ended")
	case what != f.missing:
		f.missing = what
		f.Log.Warn().Err(err).Str("missing", what).Dur("restart_in_ms", wait).
			Msg("DRBD is not available on this host: no DRBD resources are observed until the module is loaded; retrying quietly")
	default:
		f.Log.Debug().Err(err).Str("missing", what).Dur("restart_in_ms", wait).Msg("events2 stream ended: DRBD still not available")
	}
}

func (f *Follower) changed(rd string) {
	if f.Changed != nil {
		f.Changed(rd)
	}
}
