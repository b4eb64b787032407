// Package zfsimage writes synthetic ZFS leaf vdev images in memory: label configs as
// XDR nvlists and uberblock slots, each sealed with the embedded SHA-256 label checksum,
// in either byte order. It exists for tests of storage/zfs and storage/mmp (a pool whose
// uberblocks a test changes between reads); real fixtures come from OpenZFS itself
// (storage/zfs/testdata). An Image is safe for concurrent ReadAt and writes.
package zfsimage

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/cairn-io/cairn/storage/zfs"
)

const (
	eckMagic   = 0x0210da7ab10c7a11
	eckSize    = 40
	physOffset = 16 << 10
	physSize   = 112 << 10
	ringOffset = 128 << 10
	ringSize   = 128 << 10
)

// Image is one leaf vdev's bytes.
type Image struct {
	mu     sync.RWMutex
	buf    []byte
	psize  int64
	ashift uint64
	order  binary.ByteOrder
}

// New returns a zeroed image of size bytes (at least zfs.MinDeviceSize) whose slots are
// laid out for ashift and written big-endian when bigEndian (as a big-endian host would).
func New(size int64, ashift uint64, bigEndian bool) *Image {
	if size < zfs.MinDeviceSize {
		panic(fmt.Sprintf("zfsimage: size %d below %d", size, zfs.MinDeviceSize))
	}
	im := &Image{buf: make([]byte, size), psize: size &^ (zfs.LabelSize - 1), ashift: ashift, order: binary.LittleEndian}
	if bigEndian {
		im.order = binary.BigEndian
	}
	return im
}

// Device returns the image as a zfs.Device called name.
func (im *Image) Device(name string) zfs.Device {
	return zfs.Device{Name: name, R: im, Size: int64(len(im.buf))}
}

// ReadAt implements io.ReaderAt.
func (im *Image) ReadAt(p []byte, off int64) (int, error) {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if off < 0 || off >= int64(len(im.buf)) {
		return 0, io.EOF
	}
	n := copy(p, im.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Bytes returns a copy of the image.
func (im *Image) Bytes() []byte {
	im.mu.RLock()
	defer im.mu.RUnlock()
	return append([]byte(nil), im.buf...)
}

// SlotSize is the uberblock slot size for the image's ashift.
func (im *Image) SlotSize() int { return 1 << zfs.SlotShift(im.ashift) }

// Slots is the number of uberblock slots per label.
func (im *Image) Slots() int { return ringSize / im.SlotSize() }

// WriteConfig packs nv (XDR) into the config area of label l and seals it.
func (im *Image) WriteConfig(l int, nv *zfs.NVList) {
	im.mu.Lock()
	defer im.mu.Unlock()
	off := zfs.LabelOffset(im.psize, l) + physOffset
	copy(im.buf[off:off+physSize], ConfigArea(nv, zfs.LabelOffset(im.psize, l), im.order))
}

// WriteUberblock writes ub into slot s of label l, sealed. The Magic field is ignored:
// the uberblock magic is always written (use Corrupt to damage a slot).
func (im *Image) WriteUberblock(l, s int, ub zfs.Uberblock) {
	im.mu.Lock()
	defer im.mu.Unlock()
	size := im.SlotSize()
	off := SlotOffset(zfs.LabelOffset(im.psize, l), s, size)
	copy(im.buf[off:off+int64(size)], UberblockSlot(ub, off, size, im.order))
}

// ConfigOffset is the physical offset of the config area (vdev_phys) of the label at
// physical offset labelOff; ConfigArea's bytes go there.
func ConfigOffset(labelOff int64) int64 { return labelOff + physOffset }

// ConfigArea returns the sealed config area (vdev_phys, 112 KiB) of the label at physical
// offset labelOff holding nv packed as XDR, in byte order o. It panics when nv does not
// fit. Tools that rewrite a label on a real leaf (the fake zpool of the agent tests)
// write it at ConfigOffset(labelOff).
func ConfigArea(nv *zfs.NVList, labelOff int64, o binary.ByteOrder) []byte {
	packed := Pack(nv)
	if len(packed) > physSize-eckSize {
		panic("zfsimage: config too large")
	}
	area := make([]byte, physSize)
	copy(area, packed)
	seal(area, uint64(labelOff+physOffset), o)
	return area
}

// SlotOffset is the physical offset of uberblock slot s (of size bytes) in the label at
// physical offset labelOff.
func SlotOffset(labelOff int64, s, size int) int64 { return labelOff + ringOffset + int64(s*size) }

// UberblockSlot returns slot bytes (size bytes) holding ub, sealed for physical offset
// off, in byte order o. The Magic field is ignored: the uberblock magic is always written.
func UberblockSlot(ub zfs.Uberblock, off int64, size int, o binary.ByteOrder) []byte {
	slot := make([]byte, size)
	for i, v := range []uint64{zfs.UberblockMagic, ub.Version, ub.TXG, ub.GUIDSum, ub.Timestamp} {
		o.PutUint64(slot[8*i:], v)
	}
	zfs.EncodeBlockPointer(slot[40:168], ub.RootBP, o)
	for i, v := range []uint64{ub.SoftwareVersion, ub.MMPMagic, ub.MMPDelay, ub.MMPConfig, ub.CheckpointTXG} {
		o.PutUint64(slot[168+8*i:], v)
	}
	seal(slot, uint64(off), o)
	return slot
}

// Corrupt flips one byte at physical offset off (without resealing).
func (im *Image) Corrupt(off int64) {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.buf[off] ^= 0xff
}

// LabelOffset is the physical offset of label l of this image.
func (im *Image) LabelOffset(l int) int64 { return zfs.LabelOffset(im.psize, l) }

// seal writes the embedded checksum (zio_eck_t) at the end of buf, as OpenZFS does for
// ZIO_CHECKSUM_LABEL: SHA-256 of buf with the verifier {off,0,0,0} in place of the
// checksum, stored as big-endian digest words in the block's byte order.
func seal(buf []byte, off uint64, o binary.ByteOrder) {
	eck := buf[len(buf)-eckSize:]
	o.PutUint64(eck, eckMagic)
	clear(eck[8:])
	o.PutUint64(eck[8:], off)
	sum := sha256.Sum256(buf)
	for i := 0; i < 4; i++ {
		o.PutUint64(eck[8+8*i:], binary.BigEndian.Uint64(sum[8*i:]))
	}
}

// MMPConfig builds ub_mmp_config from its parts; a negative part is left invalid.
func MMPConfig(intervalMS, seq, fail int64) uint64 {
	var c uint64
	if intervalMS >= 0 {
		c |= uint64(intervalMS&0xffffff)<<8 | zfs.MMPIntervalValid
	}
	if seq >= 0 {
		c |= uint64(seq&0xffff)<<32 | zfs.MMPSeqValid
	}
	if fail >= 0 {
		c |= uint64(fail&0xffff)<<48 | zfs.MMPFailValid
	}
	return c
}

// PoolConfig returns a label config like OpenZFS writes for a single-file pool.
func PoolConfig(name string, poolGUID uint64, state uint64, txg uint64, hostid uint64, hostname string, ashift uint64) *zfs.NVList {
	tree := &zfs.NVList{Pairs: []zfs.NVPair{
		{Name: "type", Type: 9, Value: "file"},
		{Name: "id", Type: 8, Value: uint64(0)},
		{Name: "guid", Type: 8, Value: poolGUID + 1},
		{Name: "path", Type: 9, Value: "/dev/fake"},
		{Name: "ashift", Type: 8, Value: ashift},
		{Name: "is_log", Type: 8, Value: uint64(0)},
	}}
	pairs := []zfs.NVPair{
		{Name: "version", Type: 8, Value: uint64(5000)},
		{Name: "name", Type: 9, Value: name},
		{Name: "state", Type: 8, Value: state},
		{Name: "txg", Type: 8, Value: txg},
		{Name: "pool_guid", Type: 8, Value: poolGUID},
	}
	if hostid != 0 {
		pairs = append(pairs, zfs.NVPair{Name: "hostid", Type: 8, Value: hostid})
	}
	if hostname != "" {
		pairs = append(pairs, zfs.NVPair{Name: "hostname", Type: 9, Value: hostname})
	}
	pairs = append(pairs,
		zfs.NVPair{Name: "top_guid", Type: 8, Value: poolGUID + 1},
		zfs.NVPair{Name: "guid", Type: 8, Value: poolGUID + 1},
		zfs.NVPair{Name: "vdev_children", Type: 8, Value: uint64(1)},
		zfs.NVPair{Name: "vdev_tree", Type: 19, Value: tree},
		zfs.NVPair{Name: "features_for_read", Type: 19, Value: &zfs.NVList{}},
	)
	return &zfs.NVList{Pairs: pairs}
}

// MirrorConfig is the label config of leaf `leaf` (0-based) of a pool whose one
// top-level vdev is a mirror of n file leaves: mirror guid poolGUID+1, leaf i guid
// poolGUID+10+i. offline lists the leaves the tree marks offline.
func MirrorConfig(name string, poolGUID, state, txg, hostid uint64, hostname string, ashift uint64, leaf, n int, offline ...int) *zfs.NVList {
	kids := make([]*zfs.NVList, n)
	for i := range kids {
		kids[i] = &zfs.NVList{Pairs: []zfs.NVPair{
			{Name: "type", Type: 9, Value: "file"},
			{Name: "id", Type: 8, Value: uint64(i)},
			{Name: "guid", Type: 8, Value: poolGUID + 10 + uint64(i)},
			{Name: "path", Type: 9, Value: fmt.Sprintf("/dev/fake%d", i)},
		}}
		for _, o := range offline {
			if o == i {
				kids[i].Pairs = append(kids[i].Pairs, zfs.NVPair{Name: "offline", Type: 8, Value: uint64(1)})
			}
		}
	}
	tree := &zfs.NVList{Pairs: []zfs.NVPair{
		{Name: "type", Type: 9, Value: "mirror"},
		{Name: "id", Type: 8, Value: uint64(0)},
		{Name: "guid", Type: 8, Value: poolGUID + 1},
		{Name: "ashift", Type: 8, Value: ashift},
		{Name: "is_log", Type: 8, Value: uint64(0)},
		{Name: "children", Type: 20, Value: kids},
	}}
	nv := PoolConfig(name, poolGUID, state, txg, hostid, hostname, ashift)
	for i, p := range nv.Pairs {
		switch p.Name {
		case "guid":
			nv.Pairs[i].Value = poolGUID + 10 + uint64(leaf)
		case "vdev_tree":
			nv.Pairs[i].Value = tree
		}
	}
	return nv
}

// MirrorGUIDSum is the ub_guid_sum of a pool made with MirrorConfig of n leaves.
func MirrorGUIDSum(poolGUID uint64, n int) uint64 {
	sum := poolGUID + poolGUID + 1
	for i := range n {
		sum += poolGUID + 10 + uint64(i)
	}
	return sum
}

// PoolGUIDSum is the ub_guid_sum of a pool made with PoolConfig: the pool guid (the
// root vdev's) plus its one leaf's (poolGUID+1).
func PoolGUIDSum(poolGUID uint64) uint64 { return poolGUID + poolGUID + 1 }

// SetLabel overwrites label l with raw (at most zfs.LabelSize bytes; the rest zeroed).
func (im *Image) SetLabel(l int, raw []byte) {
	im.mu.Lock()
	defer im.mu.Unlock()
	off := zfs.LabelOffset(im.psize, l)
	lb := im.buf[off : off+zfs.LabelSize]
	clear(lb)
	copy(lb, raw)
}

// Reseal recomputes the embedded checksums of label l's config area and of every one of
// its uberblock slots, in the image's byte order, whatever they hold: after a test has
// damaged the contents on purpose, the reader then gets past the checksums to the parsing.
func (im *Image) Reseal(l int) {
	im.mu.Lock()
	defer im.mu.Unlock()
	off := zfs.LabelOffset(im.psize, l)
	seal(im.buf[off+physOffset:off+physOffset+physSize], uint64(off+physOffset), im.order)
	size := int64(1 << zfs.SlotShift(im.ashift))
	for s := int64(0); s < ringSize/size; s++ {
		at := off + ringOffset + s*size
		seal(im.buf[at:at+size], uint64(at), im.order)
	}
}
