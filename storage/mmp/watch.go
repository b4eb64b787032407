package mmp

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/rs/zerolog"
)

// Observation codes of Watcher.Poll (stable snake_case).
const (
	ObsQuiet     = "quiet"      // no slot changed since the last poll
	ObsOwnWrites = "own_writes" // slots changed, consistent with this host being the one writer
	// ObsForeignHostID: a label config names a hostid other than ours while we own the pool.
	ObsForeignHostID = "foreign_hostid"
	// ObsOutOfOrder: a slot was rewritten with an uberblock older (txg, timestamp, seq)
	// than the newest already on disk: a single writer never does that, two do.
	ObsOutOfOrder = "out_of_order_write"
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
	// Newest is the best uberblock on disk now.
	Newest *Seen `json:"newest,omitempty"`
	// Writer is the other host when a label names it.
	Writer *Host `json:"writer,omitempty"`
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// SelfWriting is true when this host has the pool imported (its own MMP thread and
	// txg syncs write the slots): only writes that cannot be ours count as foreign. When
	// false (exported here, or between a check and the import) any change is foreign.
	SelfWriting bool
	Log         zerolog.Logger
	// ReadLeaf reads one device; nil is zfs.ReadLeaf.
	ReadLeaf func(zfs.Device) (*zfs.Leaf, error)
}

type slotKey struct{ leaf, label, slot int }

// Watcher keeps reading the uberblock slots and labels of a pool's leaves, to notice
// another host writing the pool while this host is meant to be the only writer (after
// import), or any writer at all (while idle). Poll is cheap (four 256 KiB reads per leaf)
// and meant to be called every MMP interval or so by an agent's loop. A Watcher is not
// safe for concurrent use.
//
// Limits: it can only see writes that land in the labels (MMP and txg-sync uberblocks,
// label configs); with SelfWriting, a step back of this host's wall clock can look like
// an out-of-order write.
type Watcher struct {
	devs   []zfs.Device
	hostid uint32
	opts   WatchOptions
	slots  map[slotKey]zfs.Uberblock
	labels map[[2]int]zfs.LabelConfig
	newest zfs.Uberblock
	polls  int
}

// NewWatcher reads the leaves once as the baseline. hostid is this host's (with
// SelfWriting it must be the one the pool was imported with). Returns the read error
// (wrapping zfs.ErrNotZFS, zfs.ErrTooSmall or the I/O error) if a leaf is unreadable.
func NewWatcher(devs []zfs.Device, hostid uint32, opts WatchOptions) (*Watcher, error) {
	w := &Watcher{devs: devs, hostid: hostid, opts: opts}
	leaves, err := readLeaves(devs, opts.ReadLeaf)
	if err != nil {
		return nil, err
	}
	w.slots, w.labels, w.newest = snapshot(leaves)
	return w, nil
}

func snapshot(leaves []*zfs.Leaf) (map[slotKey]zfs.Uberblock, map[[2]int]zfs.LabelConfig, zfs.Uberblock) {
	slots := map[slotKey]zfs.Uberblock{}
	labels := map[[2]int]zfs.LabelConfig{}
	var newest zfs.Uberblock
	for i, lf := range leaves {
		for _, s := range lf.Slots {
			slots[slotKey{i, s.Label, s.Index}] = s.Uberblock
			if zfs.Compare(s.Uberblock, newest) > 0 {
				newest = s.Uberblock
			}
		}
		for l, lb := range lf.Labels {
			if lb.Config != nil {
				labels[[2]int{i, l}] = lb.Info
			}
		}
	}
	return slots, labels, newest
}

// Poll reads the leaves again and compares with the previous poll. It returns an error
// (and keeps the previous baseline) when a leaf cannot be read; an agent should treat
// repeated errors as losing sight of the pool, not as safety.
func (w *Watcher) Poll() (Observation, error) {
	leaves, err := readLeaves(w.devs, w.opts.ReadLeaf)
	if err != nil {
		return Observation{}, err
	}
	w.polls++
	slots, labels, newest := snapshot(leaves)
	obs := Observation{Code: ObsQuiet}
	best, hasBest := zfs.Best(leaves)
	if hasBest {
		obs.Newest = SeenFrom(best.LeafName, best.Slot)
	}
	var oldest *zfs.Uberblock // the oldest changed write, for the out-of-order rule
	for k, u := range slots {
		if prev, ok := w.slots[k]; ok && prev == u {
			continue
		}
		obs.Writes++
		if oldest == nil || zfs.Compare(u, *oldest) < 0 {
			u := u
			oldest = &u
		}
	}
	labelChanged := false
	for k, c := range labels {
		if prev, ok := w.labels[k]; !ok || prev != c {
			labelChanged = true
		}
		if w.opts.SelfWriting && c.HasHostID && c.HostID != uint64(w.hostid) && !obs.Foreign {
			obs.Foreign, obs.Code = true, ObsForeignHostID
			obs.Writer = &Host{HostID: HostID(c.HostID), Hostname: c.Hostname}
			obs.Message = fmt.Sprintf("label %d of %s names hostid %s (%s), not this host's %s: another host has imported the pool",
				k[1], w.devs[k[0]].Name, HostID(c.HostID), c.Hostname, HostID(w.hostid))
		}
	}
	switch {
	case obs.Foreign:
	case !w.opts.SelfWriting && (obs.Writes > 0 || labelChanged):
		obs.Foreign, obs.Code = true, ObsActivity
		obs.Message = fmt.Sprintf("%d uberblock slot(s) changed while this host is not writing the pool", obs.Writes)
		if hasBest && best.HasConfig && best.Config.HasHostID {
			obs.Writer = &Host{HostID: HostID(best.Config.HostID), Hostname: best.Config.Hostname}
		}
	case w.opts.SelfWriting && oldest != nil && zfs.Compare(*oldest, w.newest) < 0:
		obs.Foreign, obs.Code = true, ObsOutOfOrder
		obs.Message = fmt.Sprintf("a slot was rewritten with txg %d timestamp %d seq %d, older than the newest on disk (txg %d timestamp %d seq %d): a second writer",
			oldest.TXG, oldest.Timestamp, oldest.MMPSeq(), w.newest.TXG, w.newest.Timestamp, w.newest.MMPSeq())
	case obs.Writes > 0:
		obs.Code = ObsOwnWrites
	}
	if obs.Message == "" {
		obs.Message = fmt.Sprintf("%d slot write(s) since the last poll", obs.Writes)
	}
	ev := w.opts.Log.Debug()
	if obs.Foreign {
		ev = w.opts.Log.Warn()
	}
	ev.Int("poll", w.polls).Str("code", obs.Code).Int("writes", obs.Writes).Msg(obs.Message)
	w.slots, w.labels = slots, labels
	if zfs.Compare(newest, w.newest) > 0 {
		w.newest = newest
	}
	return obs, nil
}

// Watch polls the leaves every `every` (at least MinInterval) until a poll sees a foreign
// write, and returns that observation. It returns ctx.Err() when ctx ends first, and the
// read error when a leaf cannot be read (NewWatcher's or Poll's): an agent that loses
// sight of its pool should treat that as a failure, not as safety.
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
