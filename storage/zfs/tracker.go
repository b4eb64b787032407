package zfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// configTail is how much of a label's config area a Tracker reads every time: its last
// 4 KiB, which end with the embedded checksum of the whole area. The rest of the area is
// read only when those bytes changed. 4 KiB keeps O_DIRECT reads aligned on any device.
const configTail = 4 << 10

// Tracker re-reads one leaf vdev cheaply, for a watcher that polls it many times a
// second. Per label and poll it reads the last 4 KiB of the config area and the
// uberblock ring behind it (132 KiB, one read); it reads and decodes the whole config only when that tail (which
// holds the config's checksum) changed, and verifies and decodes only the slots whose
// bytes changed. What it knows survives failed reads: a label that cannot be read, a
// config whose checksum does not hold, or a slot caught half-written keeps its last
// known value (it is not a hole that looks new once it reads again).
//
// Not safe for concurrent use.
type Tracker struct {
	dev    Device
	psize  int64
	shift  uint // slot size shift, from the first config with an ashift; 9 until then
	fixed  bool // shift came from a config
	labels [Labels]trackedLabel
	// BytesRead counts every byte read from the device.
	BytesRead int64
	edge      []byte // scratch: the config tail and the ring, read at once (aligned for O_DIRECT)
	area      []byte // scratch: a whole config area
}

type trackedLabel struct {
	tail   []byte // last tail read whose config decoded (nil: none yet)
	config *NVList
	info   LabelConfig
	ring   []byte      // the ring bytes last read (nil: never read)
	slots  []SlotValue // last known value per slot index
}

// SlotValue is the last known content of one uberblock slot.
type SlotValue struct {
	Valid bool
	Uberblock
}

// SlotChange is a slot whose known value changed in a Refresh.
type SlotChange struct {
	Label, Index int
	Old          SlotValue // Valid false when the slot held nothing known before
	New          Uberblock
}

// Refresh is what one Tracker.Refresh found.
type Refresh struct {
	// Changed lists the slots whose known uberblock changed (the new value is valid).
	Changed []SlotChange
}

// NewTracker returns a Tracker of d; nothing is read until Refresh. Errors:
// ErrTooSmall when d cannot hold the four labels.
func NewTracker(d Device) (*Tracker, error) {
	psize := d.Size &^ (LabelSize - 1)
	if d.Size < 0 || psize < MinDeviceSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, needs at least %d", d.Name, ErrTooSmall, d.Size, MinDeviceSize)
	}
	return &Tracker{dev: d, psize: psize, shift: SlotShift(defaultAshift),
		edge: alignedBuf(configTail + ringSize), area: alignedBuf(vdevPhysSize)}, nil
}

// Name is the device's name.
func (t *Tracker) Name() string { return t.dev.Name }

// SlotsPerLabel is the number of uberblock slots in a ring; the last one is the MMP
// slot (MMP_BLOCKS_PER_LABEL), the others hold txg syncs (slot txg % (n-1)).
func (t *Tracker) SlotsPerLabel() int { return ringSize >> t.shift }

// Config returns the last known config of label l (ok false when none ever decoded).
func (t *Tracker) Config(l int) (LabelConfig, *NVList, bool) {
	lb := &t.labels[l]
	return lb.info, lb.config, lb.config != nil
}

// Slot returns the last known value of slot i of label l.
func (t *Tracker) Slot(l, i int) SlotValue {
	if i < len(t.labels[l].slots) {
		return t.labels[l].slots[i]
	}
	return SlotValue{}
}

// Refresh reads the labels again and returns what changed since the last Refresh (on the
// first call: every valid slot and every config, as changes from nothing). Per label it
// makes one read of the config area's last 4 KiB and the ring behind it (they are
// contiguous), and a second read of the whole config area only when that tail changed.
// It returns an error only when no label of the leaf could be read at all (what was
// known is kept).
func (t *Tracker) Refresh() (Refresh, error) {
	var r Refresh
	var firstErr error
	read := 0
	for l := 0; l < Labels; l++ {
		base := LabelOffset(t.psize, l)
		if err := t.readAt(t.edge, base+vdevPhysOffset+vdevPhysSize-configTail); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("label %d at %d: %w", l, base, err)
			}
			continue
		}
		read++
		// A config that does not read or verify now (being rewritten, a bad sector)
		// keeps its last known value; its tail is read again at the next Refresh.
		t.refreshConfig(l)
		if !t.fixed {
			if lb := &t.labels[l]; lb.config != nil && lb.info.Ashift != 0 {
				t.shift, t.fixed = SlotShift(lb.info.Ashift), true
				for i := range t.labels {
					t.labels[i].ring, t.labels[i].slots = nil, nil // read again with the right slot size
				}
				r.Changed = r.Changed[:0]
				l = -1 // start over: earlier labels' rings were cut with the wrong slot size
				read = 0
				continue
			}
		}
		t.refreshRing(l, &r)
	}
	if read == 0 {
		return r, fmt.Errorf("%s: no label could be read: %w", t.dev.Name, firstErr)
	}
	return r, nil
}

func (t *Tracker) readAt(buf []byte, off int64) error {
	n, err := t.dev.R.ReadAt(buf, off)
	t.BytesRead += int64(n)
	if n < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("short read: %d of %d bytes", n, len(buf))
		}
		return err
	}
	return nil
}

// refreshConfig decodes label l's config again when the tail just read (t.edge) differs
// from the last one that decoded; it keeps the last known config when the area cannot
// be read, verified or decoded.
func (t *Tracker) refreshConfig(l int) {
	lb := &t.labels[l]
	base := LabelOffset(t.psize, l)
	if lb.tail != nil && bytes.Equal(lb.tail, t.edge[:configTail]) {
		return
	}
	if t.readAt(t.area, base+vdevPhysOffset) != nil {
		return
	}
	if _, err := verifyEmbedded(t.area, uint64(base+vdevPhysOffset)); err != nil {
		return
	}
	nv, err := UnpackNVList(t.area[:len(t.area)-eckSize])
	if err != nil {
		return
	}
	lb.tail = append(lb.tail[:0], t.area[len(t.area)-configTail:]...)
	lb.config, lb.info = nv, ConfigFromNVList(nv)
}

// refreshRing compares label l's ring just read (t.edge after the tail) slot by slot
// with the last one and decodes the slots that changed.
func (t *Tracker) refreshRing(l int, r *Refresh) {
	lb := &t.labels[l]
	ring := t.edge[configTail:]
	ringAt := LabelOffset(t.psize, l) + ringOffset
	size := 1 << t.shift
	n := ringSize >> t.shift
	if lb.slots == nil {
		lb.slots = make([]SlotValue, n)
	}
	for i := 0; i < n; i++ {
		at := i << t.shift
		cur := ring[at : at+size]
		if lb.ring != nil && bytes.Equal(lb.ring[at:at+size], cur) {
			continue
		}
		if !maybeUberblock(cur) {
			continue // never written, or not an uberblock: keep what was known
		}
		ub, err := DecodeUberblock(cur, uint64(ringAt+int64(at)))
		if err != nil {
			continue // torn or being written: keep the last known value
		}
		old := lb.slots[i]
		if old.Valid && old.Uberblock == ub {
			continue
		}
		lb.slots[i] = SlotValue{Valid: true, Uberblock: ub}
		r.Changed = append(r.Changed, SlotChange{Label: l, Index: i, Old: old, New: ub})
	}
	if lb.ring == nil {
		lb.ring = make([]byte, ringSize)
	}
	copy(lb.ring, ring)
}

// Leaf is what the Tracker knows of its leaf as a Leaf (as ReadLeaf would return it for
// the same bytes, with labels and slots that failed to read keeping their last known
// values): for code that judges leaves, such as Best and Identify, without reading the
// whole labels again.
func (t *Tracker) Leaf() *Leaf {
	lf := &Leaf{Name: t.dev.Name, PSize: t.psize, SlotSize: 1 << t.shift}
	for l := range t.labels {
		lb := &t.labels[l]
		lf.Labels[l] = Label{Index: l, Offset: LabelOffset(t.psize, l), Config: lb.config, Info: lb.info}
		if lb.config != nil {
			lf.hasConfig = true
			if lf.Ashift == 0 {
				lf.Ashift = lb.info.Ashift
			}
		}
		for i, s := range lb.slots {
			if s.Valid {
				lf.Labels[l].ValidSlots++
				lf.Slots = append(lf.Slots, Slot{Label: l, Index: i, Offset: LabelOffset(t.psize, l) + ringOffset + int64(i)<<t.shift, Uberblock: s.Uberblock})
			}
		}
	}
	return lf
}
