package zfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Label layout (vdev_impl.h): four labels of 256 KiB, two at the start and two at the end
// of the leaf; in each, the config nvlist at +16 KiB (112 KiB with an embedded checksum)
// and the uberblock ring at +128 KiB (128 KiB).
const (
	LabelSize      = 256 << 10
	Labels         = 4
	vdevPhysOffset = 16 << 10
	vdevPhysSize   = 112 << 10
	ringOffset     = 128 << 10
	ringSize       = 128 << 10
	minLabelShift  = 10 // UBERBLOCK_SHIFT
	maxLabelShift  = 13 // MAX_UBERBLOCK_SHIFT
	defaultAshift  = 9  // SPA_MINBLOCKSHIFT: what zdb assumes without a config
	// MinDeviceSize is the smallest leaf that holds the four labels.
	MinDeviceSize = Labels * LabelSize
)

// Pool states as stored in a label's config (pool_state_t).
const (
	StateActive            = 0
	StateExported          = 1
	StateDestroyed         = 2
	StateSpare             = 3
	StateL2Cache           = 4
	StateUninitialized     = 5
	StateUnavail           = 6
	StatePotentiallyActive = 7
)

// StateName returns the lower-case name of a pool state ("active", "exported", …), or
// "state N" for a number OpenZFS does not define.
func StateName(s uint64) string {
	names := []string{"active", "exported", "destroyed", "spare", "l2cache", "uninitialized", "unavail", "potentially_active"}
	if s < uint64(len(names)) {
		return names[s]
	}
	return fmt.Sprintf("state %d", s)
}

// Errors of ReadLeaf, to be matched with errors.Is.
var (
	ErrTooSmall = errors.New("device too small for ZFS labels")
	ErrNotZFS   = errors.New("not a ZFS leaf vdev")
)

// Device is a leaf vdev to read: a name for messages (the path), its content, and its
// size in bytes (the labels at the end are placed from it).
type Device struct {
	Name string
	R    io.ReaderAt
	Size int64
	// Direct is true when R bypasses the page cache (OpenDevice with O_DIRECT).
	Direct bool
}

// OpenDevice opens a file or block device read-only and finds its size by seeking to the
// end (which works for block devices, unlike stat). The caller closes the returned file.
//
// It opens with O_DIRECT where the file system allows it (block devices always do): the
// page cache is not kept coherent with writes that another host makes to shared storage,
// so a buffered re-read could keep serving the old uberblocks and hide a live writer.
// Device.Direct tells which way it was opened; ReadLeaf's buffers and offsets are aligned
// for O_DIRECT. Where O_DIRECT is refused (tmpfs, some FUSE file systems) the file is
// opened buffered, which is coherent for writers on this host only.
func OpenDevice(path string) (Device, *os.File, error) {
	direct := true
	f, err := os.OpenFile(path, os.O_RDONLY|oDirect, 0)
	if err != nil && oDirect != 0 && errors.Is(err, syscall.EINVAL) {
		direct = false
		f, err = os.Open(path)
	}
	if err != nil {
		return Device{}, nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return Device{}, nil, fmt.Errorf("%s: size: %w", path, err)
	}
	return Device{Name: path, R: f, Size: size, Direct: direct && oDirect != 0}, f, nil
}

// OpenDevices opens every path with OpenDevice; close releases them all. On an error
// (naming the path) nothing stays open.
func OpenDevices(paths []string) (devs []Device, close func(), err error) {
	var files []*os.File
	close = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, p := range paths {
		d, f, err := OpenDevice(p)
		if err != nil {
			close()
			return nil, func() {}, fmt.Errorf("cannot open leaf vdev %s: %w", p, err)
		}
		devs, files = append(devs, d), append(files, f)
	}
	return devs, close, nil
}

// LabelOffset is the physical offset of label l (0-3) on a leaf of psize bytes (psize
// already rounded down to a multiple of LabelSize), as vdev_label_offset computes it.
func LabelOffset(psize int64, l int) int64 {
	off := int64(l) * LabelSize
	if l >= Labels/2 {
		off += psize - Labels*LabelSize
	}
	return off
}

// SlotShift returns log2 of the uberblock slot size for a top-level vdev ashift:
// min(max(ashift, 10), 13).
func SlotShift(ashift uint64) uint {
	return uint(min(max(ashift, minLabelShift), maxLabelShift))
}

// LabelConfig is what the activity check needs from a label's config nvlist. Fields that
// the label does not hold are zero (Has* tell the two that matter apart from 0).
type LabelConfig struct {
	PoolName  string `json:"pool_name,omitempty"`
	PoolGUID  uint64 `json:"pool_guid,omitempty"`
	State     uint64 `json:"state"`
	HasState  bool   `json:"-"`
	TXG       uint64 `json:"txg"`
	HostID    uint64 `json:"hostid,omitempty"`
	HasHostID bool   `json:"-"`
	Hostname  string `json:"hostname,omitempty"`
	Version   uint64 `json:"version,omitempty"`
	GUID      uint64 `json:"guid,omitempty"`     // this leaf's guid
	TopGUID   uint64 `json:"top_guid,omitempty"` // its top-level vdev's guid
	Ashift    uint64 `json:"ashift,omitempty"`   // vdev_tree ashift; 0 when absent
	// VdevChildren is the number of top-level vdevs of the pool (vdev_children, holes
	// included); TopID the id of this leaf's top-level vdev (vdev_tree id).
	VdevChildren uint64 `json:"vdev_children,omitempty"`
	TopID        uint64 `json:"top_id"`
	// TreeGUIDSum is the sum (mod 2^64) of every guid in vdev_tree: the top-level vdev
	// and all vdevs beneath it, as ub_guid_sum adds them up.
	TreeGUIDSum uint64 `json:"tree_guid_sum,omitempty"`
	// Holes counts the hole_array entries (top-level ids that are holes).
	Holes int `json:"holes,omitempty"`
}

// ConfigFromNVList picks the LabelConfig fields out of a label's config nvlist. Missing
// pairs stay zero; it never fails.
func ConfigFromNVList(nv *NVList) LabelConfig {
	var c LabelConfig
	c.PoolName, _ = nv.String("name")
	c.PoolGUID, _ = nv.Uint64("pool_guid")
	c.State, c.HasState = nv.Uint64("state")
	c.TXG, _ = nv.Uint64("txg")
	c.HostID, c.HasHostID = nv.Uint64("hostid")
	c.Hostname, _ = nv.String("hostname")
	c.Version, _ = nv.Uint64("version")
	c.GUID, _ = nv.Uint64("guid")
	c.TopGUID, _ = nv.Uint64("top_guid")
	c.VdevChildren, _ = nv.Uint64("vdev_children")
	if v, ok := nv.Lookup("hole_array"); ok {
		if a, ok := v.([]uint64); ok {
			c.Holes = len(a)
		}
	}
	if tree, ok := nv.NVList("vdev_tree"); ok {
		c.Ashift, _ = tree.Uint64("ashift")
		c.TopID, _ = tree.Uint64("id")
		walkTree(tree, func(guid uint64) { c.TreeGUIDSum += guid })
	}
	return c
}

// TreeGUIDs lists every guid in a label config's vdev_tree (the top-level vdev and all
// beneath it); nil without a tree.
func TreeGUIDs(config *NVList) []uint64 {
	tree, ok := config.NVList("vdev_tree")
	if !ok {
		return nil
	}
	var out []uint64
	walkTree(tree, func(guid uint64) { out = append(out, guid) })
	return out
}

// walkTree calls fn with the guid of v and of every vdev beneath it.
func walkTree(v *NVList, fn func(guid uint64)) {
	if g, ok := v.Uint64("guid"); ok {
		fn(g)
	}
	kids, _ := v.NVLists("children")
	for _, k := range kids {
		walkTree(k, fn)
	}
}

// Label is one of the four labels of a leaf as read.
type Label struct {
	Index  int   `json:"index"`
	Offset int64 `json:"offset"`
	// Err is why the label's config could not be used (read error, checksum, nvlist);
	// its uberblock slots are read all the same.
	Err    error       `json:"-"`
	Config *NVList     `json:"-"`
	Info   LabelConfig `json:"config"`
	// ValidSlots counts the uberblock slots with a good checksum and magic.
	ValidSlots int `json:"valid_slots"`
}

// Slot is a valid uberblock slot.
type Slot struct {
	Label     int   `json:"label"`
	Index     int   `json:"slot"`
	Offset    int64 `json:"offset"` // physical offset of the slot on the leaf
	Uberblock `json:"uberblock"`
}

// Leaf is everything read from one leaf vdev.
type Leaf struct {
	Name      string   `json:"name"`
	PSize     int64    `json:"psize"` // size rounded down to a multiple of LabelSize
	Ashift    uint64   `json:"ashift"`
	SlotSize  int      `json:"slot_size"`
	Labels    [4]Label `json:"labels"`
	Slots     []Slot   `json:"-"`
	hasConfig bool
}

// alignedBuf returns n bytes starting on a 4 KiB boundary, as O_DIRECT reads need.
func alignedBuf(n int) []byte {
	const align = 4096
	raw := make([]byte, n+align)
	skip := (align - int(uintptr(unsafe.Pointer(&raw[0]))%align)) % align
	return raw[skip : skip+n : skip+n]
}

// labelBufs recycles the 256 KiB label buffers: the check re-reads every label of every
// leaf once a second. Nothing decoded keeps a reference into a buffer. Each buffer
// starts on a 4 KiB boundary, as O_DIRECT needs.
var labelBufs = sync.Pool{New: func() any {
	b := alignedBuf(LabelSize)
	return &b
}}

// ReadLeaf reads the four labels of a leaf with one read each, decodes every config whose
// checksum holds and every valid uberblock slot. The slot size comes from the ashift of
// the first good config's vdev_tree (9 when none has one, as zdb does). A label that
// cannot be read or verified is recorded in its Label.Err and skipped.
//
// Errors: ErrTooSmall when the device cannot hold four labels; ErrNotZFS when no label
// has a valid config and no slot holds a valid uberblock (non-ZFS data, zeros, a wiped
// or fully corrupted leaf). Both wrap the device name and the first label's reason.
func ReadLeaf(d Device) (*Leaf, error) {
	psize := d.Size &^ (LabelSize - 1)
	if d.Size < 0 || psize < MinDeviceSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, needs at least %d", d.Name, ErrTooSmall, d.Size, MinDeviceSize)
	}
	lf := &Leaf{Name: d.Name, PSize: psize, Ashift: defaultAshift}
	var raw [Labels]*[]byte // the labels' bytes, nil where the read failed
	defer func() {
		for _, b := range raw {
			if b != nil {
				labelBufs.Put(b)
			}
		}
	}()
	for l := 0; l < Labels; l++ {
		lb := &lf.Labels[l]
		lb.Index, lb.Offset = l, LabelOffset(psize, l)
		bp := labelBufs.Get().(*[]byte)
		buf := *bp
		n, err := d.R.ReadAt(buf, lb.Offset)
		if n < len(buf) {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("short read: %d of %d bytes", n, len(buf))
			}
			lb.Err = fmt.Errorf("label %d at %d: %w", l, lb.Offset, err)
			labelBufs.Put(bp)
			continue
		}
		raw[l] = bp
		phys := buf[vdevPhysOffset : vdevPhysOffset+vdevPhysSize]
		if _, err := verifyEmbedded(phys, uint64(lb.Offset+vdevPhysOffset)); err != nil {
			lb.Err = fmt.Errorf("label %d config: %w", l, err)
			continue
		}
		nv, err := UnpackNVList(phys[:len(phys)-eckSize])
		if err != nil {
			lb.Err = fmt.Errorf("label %d config: %w", l, err)
			continue
		}
		lb.Config, lb.Info = nv, ConfigFromNVList(nv)
		if !lf.hasConfig && lb.Info.Ashift != 0 {
			lf.Ashift = lb.Info.Ashift
		}
		lf.hasConfig = true
	}
	shift := SlotShift(lf.Ashift)
	lf.SlotSize = 1 << shift
	for l := 0; l < Labels; l++ {
		if raw[l] == nil {
			continue
		}
		buf := *raw[l]
		for i := 0; i < ringSize>>shift; i++ {
			at := ringOffset + i<<shift
			off := lf.Labels[l].Offset + int64(at)
			slot := buf[at : at+lf.SlotSize]
			if !maybeUberblock(slot) {
				continue // never written (zeros) or not an uberblock: skip without building an error
			}
			ub, err := DecodeUberblock(slot, uint64(off))
			if err != nil {
				continue
			}
			lf.Labels[l].ValidSlots++
			lf.Slots = append(lf.Slots, Slot{Label: l, Index: i, Offset: off, Uberblock: ub})
		}
	}
	if !lf.hasConfig && len(lf.Slots) == 0 {
		reason := "no label could be read"
		for _, lb := range lf.Labels {
			if lb.Err != nil {
				reason = lb.Err.Error()
				break
			}
		}
		return nil, fmt.Errorf("%s: %w: no valid label config and no valid uberblock (%s)", d.Name, ErrNotZFS, reason)
	}
	return lf, nil
}

// maybeUberblock is a cheap pre-check: both the uberblock magic and the checksum magic
// are there, in either byte order. DecodeUberblock decides.
func maybeUberblock(slot []byte) bool {
	m := binary.LittleEndian.Uint64(slot)
	e := binary.LittleEndian.Uint64(slot[len(slot)-eckSize:])
	return (m == UberblockMagic || m == bits.ReverseBytes64(UberblockMagic)) &&
		(e == eckMagic || e == bits.ReverseBytes64(eckMagic))
}

// Best returns the best valid uberblock slot of the leaf (see Compare); ok is false when
// the leaf has none.
func (lf *Leaf) Best() (best Slot, ok bool) {
	for _, s := range lf.Slots {
		if !ok || Compare(s.Uberblock, best.Uberblock) > 0 {
			best, ok = s, true
		}
	}
	return best, ok
}

// Config returns the label config to judge the leaf by, as vdev_label_read_config picks
// it for the best uberblock's txg: the good label with the highest config txg not above
// maxTXG, or a good label without a txg (spares, new vdevs) met first. maxTXG 0 means
// any txg. ok is false when no label qualifies: the check then treats the pool as
// possibly active, as OpenZFS does.
func (lf *Leaf) Config(maxTXG uint64) (c LabelConfig, label int, ok bool) {
	label = -1
	for i, lb := range lf.Labels {
		if lb.Config == nil {
			continue
		}
		if _, has := lb.Config.Uint64("txg"); (!has || lb.Info.TXG == 0) && !ok {
			return lb.Info, i, true
		}
		if (maxTXG == 0 || lb.Info.TXG <= maxTXG) && (!ok || lb.Info.TXG > c.TXG) {
			c, label, ok = lb.Info, i, true
		}
	}
	return c, label, ok
}

// Found is the best uberblock over a set of leaves, with the leaf it was read from and
// that leaf's label config.
type Found struct {
	Leaf      int         `json:"leaf"` // index into the leaves given
	LeafName  string      `json:"leaf_name"`
	Slot      Slot        `json:"slot"`
	Config    LabelConfig `json:"config"`
	HasConfig bool        `json:"-"`
	leaf      *Leaf
}

// AnyConfig returns the newest good label config of the best uberblock's leaf whatever
// its txg, for naming the pool when Config is missing; ok is false without any.
func (f Found) AnyConfig() (LabelConfig, bool) {
	if f.leaf == nil {
		return LabelConfig{}, false
	}
	c, _, ok := f.leaf.Config(0)
	return c, ok
}

// Best returns the best uberblock over all slots of all leaves (txg, timestamp, seq), as
// vdev_uberblock_load picks it. ok is false when no leaf holds a valid uberblock.
func Best(leaves []*Leaf) (f Found, ok bool) {
	for i, lf := range leaves {
		if lf == nil {
			continue
		}
		s, has := lf.Best()
		if !has || (ok && Compare(s.Uberblock, f.Slot.Uberblock) <= 0) {
			continue
		}
		f, ok = Found{Leaf: i, LeafName: lf.Name, Slot: s, leaf: lf}, true
	}
	if ok {
		f.Config, _, f.HasConfig = leaves[f.Leaf].Config(f.Slot.TXG)
	}
	return f, ok
}

// ReadLeaves reads every device with read (nil: ReadLeaf), up to 8 at a time (EachLeaf).
// leaves[i] belongs to devs[i]. On failure it returns the error of the lowest-numbered
// device that failed (and no leaves).
func ReadLeaves(devs []Device, read func(Device) (*Leaf, error)) ([]*Leaf, error) {
	if read == nil {
		read = ReadLeaf
	}
	leaves := make([]*Leaf, len(devs))
	errs := make([]error, len(devs))
	EachLeaf(len(devs), func(i int) { leaves[i], errs[i] = read(devs[i]) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return leaves, nil
}

// EachLeaf calls fn(0) .. fn(n-1), up to 8 at a time, and returns when all returned: with
// O_DIRECT each leaf costs several device round trips, and leaves are usually separate
// disks.
func EachLeaf(n int, fn func(i int)) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
