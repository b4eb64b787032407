package mmp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/rs/zerolog"
)

// Observation codes of Watcher.Poll (stable snake_case).
const (
	ObsQuiet     = "quiet"      // no slot or label changed since the last poll
	ObsOwnWrites = "own_writes" // slots changed, consistent with this host being the one writer
	// ObsForeignHostID: a label config rewritten since the last poll, or the pool's
	// newest config, names a hostid other than ours while we own the pool.
	ObsForeignHostID = "foreign_hostid"
	// ObsSyncRewound: a txg-sync slot that this watch saw written was rewritten with a
	// lower txg. One writer's txg only grows, and a sync slot holds txg % (slots-1).
	ObsSyncRewound = "sync_slot_rewound"
	// ObsTXGFork: two uberblocks of the same txg with different root block pointers or
	// guid sums. One writer commits a txg once; every copy of it (the sync slots of all
	// labels and the MMP writes that carry it) is the same.
	ObsTXGFork = "txg_fork"
	// ObsConfigBehind: a label config rewritten with a txg older than a txg this watch had
	// already seen synced. A config is written inside the sync of its own txg, which
	// ends before the next txg's uberblocks are written.
	ObsConfigBehind = "config_behind"
	// ObsActivity: a slot or label changed while this host is not writing at all.
	ObsActivity = "activity_while_idle"
)

// Observation is what one Poll saw.
type Observation struct {
	// Foreign is true when the poll saw a write this host cannot have made.
	Foreign bool   `json:"foreign"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Writes counts the slots whose uberblock changed since the previous poll.
	Writes int `json:"writes"`
	// Newest is the best uberblock known now.
	Newest *Seen `json:"newest,omitempty"`
	// Evidence is the slot (or label) the verdict rests on, and what it held before.
	Evidence *Seen `json:"evidence,omitempty"`
	Previous *Seen `json:"previous,omitempty"`
	// Writer is the other host when a label names it.
	Writer *Host `json:"writer,omitempty"`
	// Unreadable lists the leaves that could not be read in this poll (their last known
	// state was kept and judged).
	Unreadable []string `json:"unreadable,omitempty"`
	// BytesRead is what this poll read from the devices.
	BytesRead int64 `json:"bytes_read"`
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// SelfWriting is true when this host has the pool imported (its own MMP thread and
	// txg syncs write the slots): only writes that cannot be ours count as foreign. When
	// false (exported here, or between a check and the import) any change is foreign.
	SelfWriting bool
	Log         zerolog.Logger
}

type slotKey struct{ leaf, label, slot int }

// ident is what every copy of one txg's uberblock shares when one host wrote it.
type ident struct {
	rootBP  zfs.BlockPointer
	guidSum uint64
}

// Watcher keeps reading the uberblock slots and labels of a pool's leaves, to notice
// another host writing the pool while this host is meant to be the only writer (after
// import), or any writer at all (while idle). It is meant to be polled every MMP interval
// or so by an agent's loop. A Watcher is not safe for concurrent use.
//
// Each poll reads, per label, the uberblock ring and the last 4 KiB of the config area
// (zfs.Tracker): 528 KiB per leaf; a config is read whole and decoded only when its
// checksum changed, and only changed slots are verified and decoded.
//
// The rules with SelfWriting never order writes by the MMP slot: OpenZFS hands MMP
// writes to the leaves in turn and they complete in any order, and an MMP write carrying
// txg N-1 can land after txg N is synced. A poll is foreign when
//
//   - a sync slot (all but the ring's last) that this watch saw written is rewritten
//     with a lower txg (ObsSyncRewound);
//   - an uberblock carries a txg this watch saw written with another root block pointer
//     or guid sum (ObsTXGFork);
//   - a label config rewritten since the last poll, or the pool's newest config (the
//     highest config txg on any leaf), names another hostid (ObsForeignHostID). Labels
//     that OpenZFS no longer writes (an offline, faulted or missing leg) keep an older
//     config and are not judged until they are rewritten;
//   - a label config is rewritten with a txg older than a txg already seen synced at
//     the previous poll (ObsConfigBehind).
//
// Only what was written during the watch is compared, never the slots found at the
// baseline: those may hold any history. A slot caught half-written, a label that fails
// to read, or a whole leaf that fails keeps its last known value, so nothing looks new
// when it reads again.
//
// Limits: it sees only writes that land in the labels; a second host with the same
// hostid while this host syncs no txg is seen only once the txgs collide.
type Watcher struct {
	trackers []*zfs.Tracker
	hostid   uint32
	opts     WatchOptions
	written  map[slotKey]bool
	txgs     map[uint64]ident // txg -> identity, from writes seen during the watch
	syncTXG  uint64           // highest txg seen in a sync slot (baseline included)
	labels   map[[2]int]zfs.LabelConfig
	polls    int
}

// NewWatcher reads the leaves once as the baseline. hostid is this host's (with
// SelfWriting it must be the one the pool was imported with). Errors: a leaf too small
// (zfs.ErrTooSmall) or unreadable (the read error), and leaves that are not all of one
// pool (Identify's codes, as a refusal error).
func NewWatcher(devs []zfs.Device, hostid uint32, opts WatchOptions) (*Watcher, error) {
	if len(devs) == 0 {
		return nil, errors.New("no leaf vdev given")
	}
	w := &Watcher{hostid: hostid, opts: opts, written: map[slotKey]bool{}, txgs: map[uint64]ident{},
		labels: map[[2]int]zfs.LabelConfig{}}
	for _, d := range devs {
		t, err := zfs.NewTracker(d)
		if err != nil {
			return nil, err
		}
		w.trackers = append(w.trackers, t)
	}
	refs, errs := w.refresh()
	for i, err := range errs {
		if err != nil {
			return nil, readError{CodeUnreadableVdev, fmt.Sprintf("cannot read leaf vdev %s: %v", devs[i].Name, err), err}
		}
	}
	if err := w.identify(); err != nil {
		return nil, err
	}
	for i, r := range refs {
		for _, c := range r.Changed {
			if w.isSync(i, c.Index) {
				w.syncTXG = max(w.syncTXG, c.New.TXG)
			}
		}
		for l := range zfs.Labels {
			if c, _, ok := w.trackers[i].Config(l); ok {
				w.labels[[2]int{i, l}] = c
			}
		}
	}
	return w, nil
}

// identify runs Identify on what the trackers know, as leaves.
func (w *Watcher) identify() error {
	leaves := make([]*zfs.Leaf, len(w.trackers))
	for i, t := range w.trackers {
		lf := &zfs.Leaf{Name: t.Name()}
		for l := range zfs.Labels {
			if c, nv, ok := t.Config(l); ok {
				lf.Labels[l] = zfs.Label{Index: l, Config: nv, Info: c}
			}
		}
		leaves[i] = lf
	}
	_, err := Identify(leaves, nil)
	return err
}

func (w *Watcher) isSync(leaf, slot int) bool { return slot < w.trackers[leaf].SlotsPerLabel()-1 }

// refresh reads every leaf (zfs.EachLeaf: up to 8 at a time).
func (w *Watcher) refresh() ([]zfs.Refresh, []error) {
	refs := make([]zfs.Refresh, len(w.trackers))
	errs := make([]error, len(w.trackers))
	zfs.EachLeaf(len(w.trackers), func(i int) { refs[i], errs[i] = w.trackers[i].Refresh() })
	return refs, errs
}

// Poll reads the leaves again and judges what changed since the previous poll (see
// Watcher). Leaves that cannot be read are listed in Observation.Unreadable and keep
// their last known state; Poll returns an error only when no leaf could be read (an
// agent should treat repeated errors as losing sight of the pool, not as safety).
func (w *Watcher) Poll() (Observation, error) {
	var before int64
	for _, t := range w.trackers {
		before += t.BytesRead
	}
	refs, errs := w.refresh()
	obs := Observation{Code: ObsQuiet}
	var firstErr error
	for i, err := range errs {
		if err != nil {
			obs.Unreadable = append(obs.Unreadable, w.trackers[i].Name())
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	for _, t := range w.trackers {
		obs.BytesRead += t.BytesRead
	}
	obs.BytesRead -= before
	if len(obs.Unreadable) == len(w.trackers) {
		return obs, fmt.Errorf("no leaf of the pool could be read: %w", firstErr)
	}
	w.polls++
	prevSync := w.syncTXG
	foreign := func(code, msg string, ev, prev *Seen, writer *Host) {
		if !obs.Foreign {
			obs.Foreign, obs.Code, obs.Message, obs.Evidence, obs.Previous, obs.Writer = true, code, msg, ev, prev, writer
		}
	}
	for i, r := range refs {
		name := w.trackers[i].Name()
		for _, c := range r.Changed {
			obs.Writes++
			k := slotKey{i, c.Label, c.Index}
			u := c.New
			ev := SeenFrom(name, zfs.Slot{Label: c.Label, Index: c.Index, Uberblock: u})
			if !w.opts.SelfWriting {
				foreign(ObsActivity, fmt.Sprintf("%s label %d slot %d was written (txg %d) while this host is not writing the pool", name, c.Label, c.Index, u.TXG), ev, nil, nil)
				continue
			}
			sync := w.isSync(i, c.Index)
			if sync && w.written[k] && c.Old.Valid && u.TXG < c.Old.TXG {
				foreign(ObsSyncRewound, fmt.Sprintf("%s label %d sync slot %d went back from txg %d to txg %d: a second writer with an older view of the pool",
					name, c.Label, c.Index, c.Old.TXG, u.TXG), ev, SeenFrom(name, zfs.Slot{Label: c.Label, Index: c.Index, Uberblock: c.Old.Uberblock}), nil)
			}
			id := ident{u.RootBP, u.GUIDSum}
			if seen, ok := w.txgs[u.TXG]; ok && seen != id {
				foreign(ObsTXGFork, fmt.Sprintf("%s label %d slot %d holds txg %d with another root block pointer or guid sum than the txg %d seen before (birth %d vs %d, guid sum %d vs %d): two hosts committed txg %d",
					name, c.Label, c.Index, u.TXG, u.TXG, u.RootBP.Birth, seen.rootBP.Birth, u.GUIDSum, seen.guidSum, u.TXG), ev, nil, nil)
			} else if !ok {
				w.txgs[u.TXG] = id
			}
			w.written[k] = true
			if sync {
				w.syncTXG = max(w.syncTXG, u.TXG)
			}
		}
	}
	w.judgeLabels(prevSync, foreign)
	w.prune()
	if nf, ok := w.newest(); ok {
		obs.Newest = nf
	}
	if !obs.Foreign && obs.Writes > 0 {
		obs.Code = ObsOwnWrites
	}
	if obs.Message == "" {
		obs.Message = fmt.Sprintf("%d slot write(s) since the last poll", obs.Writes)
	}
	ev := w.opts.Log.Debug()
	if obs.Foreign {
		ev = w.opts.Log.Warn()
	}
	ev.Int("poll", w.polls).Str("code", obs.Code).Int("writes", obs.Writes).Int64("bytes_read", obs.BytesRead).
		Strs("unreadable", obs.Unreadable).Msg(obs.Message)
	return obs, nil
}

// judgeLabels applies the label rules: rewritten labels naming another hostid or
// carrying a txg behind what was synced, and the pool's newest config naming another
// hostid.
func (w *Watcher) judgeLabels(prevSync uint64, foreign func(code, msg string, ev, prev *Seen, writer *Host)) {
	var newest zfs.LabelConfig
	var newestAt [2]int
	haveNewest := false
	for i, t := range w.trackers {
		for l := range zfs.Labels {
			c, _, ok := t.Config(l)
			if !ok {
				continue
			}
			k := [2]int{i, l}
			if !haveNewest || c.TXG > newest.TXG {
				newest, newestAt, haveNewest = c, k, true
			}
			prev, had := w.labels[k]
			w.labels[k] = c
			if !had || prev == c {
				// Unchanged, or first read after the baseline (a label that was
				// unreadable then): only the newest-config rule below judges it.
				continue
			}
			name := t.Name()
			switch {
			case !w.opts.SelfWriting:
				foreign(ObsActivity, fmt.Sprintf("label %d of %s was rewritten (config txg %d, hostid %s) while this host is not writing the pool", l, name, c.TXG, HostID(c.HostID)), nil, nil, writerOf(c))
			case c.HasHostID && c.HostID != uint64(w.hostid):
				foreign(ObsForeignHostID, fmt.Sprintf("label %d of %s was rewritten naming hostid %s (%s), not this host's %s: another host has imported the pool",
					l, name, HostID(c.HostID), c.Hostname, HostID(w.hostid)), nil, nil, writerOf(c))
			case c.TXG < prevSync:
				foreign(ObsConfigBehind, fmt.Sprintf("label %d of %s was rewritten with config txg %d, behind txg %d already synced: a second writer with an older view of the pool",
					l, name, c.TXG, prevSync), nil, nil, nil)
			}
		}
	}
	if w.opts.SelfWriting && haveNewest && newest.HasHostID && newest.HostID != uint64(w.hostid) {
		foreign(ObsForeignHostID, fmt.Sprintf("the pool's newest config (txg %d, label %d of %s) names hostid %s (%s), not this host's %s: another host has imported the pool",
			newest.TXG, newestAt[1], w.trackers[newestAt[0]].Name(), HostID(newest.HostID), newest.Hostname, HostID(w.hostid)), nil, nil, writerOf(newest))
	}
}

// writerOf names the host a label config names, nil when it names none.
func writerOf(c zfs.LabelConfig) *Host {
	if !c.HasHostID {
		return nil
	}
	return &Host{HostID: HostID(c.HostID), Hostname: c.Hostname}
}

// prune bounds the txg memory: only txgs that can still be on disk (within two rings of
// the newest sync) are kept.
func (w *Watcher) prune() {
	window := uint64(2 * zfs.LabelSize / 1024) // more than any ring's slot count
	if w.syncTXG <= window || len(w.txgs) < int(window) {
		return
	}
	for txg := range w.txgs {
		if txg < w.syncTXG-window {
			delete(w.txgs, txg)
		}
	}
}

// PollEvery is the poll period that suits the pool: PollPeriod of its newest uberblock.
func (w *Watcher) PollEvery() time.Duration {
	s, _ := w.newest()
	return PollPeriod(s)
}

// PollPeriod is the watcher's poll period for a pool whose best uberblock is s: the MMP
// interval it records, between MinInterval and DefaultInterval (DefaultInterval when s
// is nil or records none).
func PollPeriod(s *Seen) time.Duration {
	if s == nil || s.IntervalMS == nil {
		return DefaultInterval
	}
	return min(max(time.Duration(*s.IntervalMS)*time.Millisecond, MinInterval), DefaultInterval)
}

// newest returns the best uberblock known over all leaves.
func (w *Watcher) newest() (*Seen, bool) {
	var best zfs.Slot
	var at string
	ok := false
	for _, t := range w.trackers {
		for l := range zfs.Labels {
			for i := range t.SlotsPerLabel() {
				s := t.Slot(l, i)
				if s.Valid && (!ok || zfs.Compare(s.Uberblock, best.Uberblock) > 0) {
					best, at, ok = zfs.Slot{Label: l, Index: i, Uberblock: s.Uberblock}, t.Name(), true
				}
			}
		}
	}
	if !ok {
		return nil, false
	}
	return SeenFrom(at, best), true
}

// Watch polls the leaves every `every` (at least MinInterval) until a poll sees a foreign
// write, and returns that observation. It returns ctx.Err() when ctx ends first, and the
// read error when the leaves cannot be read (NewWatcher's, or Poll's when no leaf can be
// read): an agent that loses sight of its pool should treat that as a failure, not as
// safety.
func Watch(ctx context.Context, devs []zfs.Device, hostid uint32, opts WatchOptions, every time.Duration, clock Clock) (Observation, error) {
	if clock == nil {
		clock = RealClock
	}
	every = max(every, MinInterval)
	w, err := NewWatcher(devs, hostid, opts)
	if err != nil {
		return Observation{}, err
	}
	for {
		if err := clock.Sleep(ctx, every); err != nil {
			return Observation{}, err
		}
		obs, err := w.Poll()
		if err != nil || obs.Foreign {
			return obs, err
		}
	}
}
