// Package zfs reads what OpenZFS keeps at the edges of a leaf vdev: the four labels, each
// with its XDR-packed config nvlist and its ring of uberblocks, including the multihost
// (MMP) fields that the activity check reads. It only reads: no kernel, no zpool, no
// writes. Layouts and checksums follow OpenZFS 2.1 (vdev_impl.h, uberblock_impl.h,
// zio_checksum.c) and are checked against labels written by the real libzpool (testdata/).
package zfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// On-disk magic numbers.
const (
	UberblockMagic = 0x00bab10c         // ub_magic ("oo-ba-bloc")
	MMPMagic       = 0xa11cea11         // ub_mmp_magic ("all-see-all")
	eckMagic       = 0x0210da7ab10c7a11 // zec_magic of an embedded checksum (zio_eck_t)
	eckSize        = 40                 // zio_eck_t: magic + 4 checksum words
	uberblockBytes = 208                // the uberblock_t fields this package decodes
)

// MMP valid bits of ub_mmp_config (bits 0-7).
const (
	MMPIntervalValid = 0x01 // bits 8-31 hold the write interval in ms
	MMPSeqValid      = 0x02 // bits 32-47 hold the sequence number
	MMPFailValid     = 0x04 // bits 48-63 hold the fail intervals
)

// ErrChecksum reports a label area or uberblock slot whose embedded checksum is missing
// or does not match its contents.
var ErrChecksum = errors.New("embedded checksum mismatch")

// Uberblock is the decoded head of an uberblock slot (uberblock_t), in host order
// whatever the byte order it was written in.
type Uberblock struct {
	Magic           uint64 `json:"-"`
	Version         uint64 `json:"version"`
	TXG             uint64 `json:"txg"`
	GUIDSum         uint64 `json:"guid_sum"`
	Timestamp       uint64 `json:"timestamp"` // seconds since 1970, UTC
	SoftwareVersion uint64 `json:"software_version"`
	MMPMagic        uint64 `json:"mmp_magic"`
	MMPDelay        uint64 `json:"mmp_delay_ns"` // 0 with a valid magic: multihost off
	MMPConfig       uint64 `json:"mmp_config"`
	CheckpointTXG   uint64 `json:"checkpoint_txg"`
	// RootBP is ub_rootbp, the block pointer of the MOS this txg committed: two
	// uberblocks of one txg from one writer always carry the same one.
	RootBP BlockPointer `json:"root_bp"`
	// ByteSwapped is true when the slot was written big-endian (byte-swapped magic).
	ByteSwapped bool `json:"byte_swapped,omitempty"`
}

// BlockPointer is a blkptr_t (spa.h) as stored: three DVAs (two words each), the
// properties word, padding, physical and logical birth txg, fill count and checksum.
type BlockPointer struct {
	DVA       [3][2]uint64 `json:"dva"`
	Prop      uint64       `json:"prop"`
	PhysBirth uint64       `json:"phys_birth"`
	Birth     uint64       `json:"birth"`
	Fill      uint64       `json:"fill"`
	Checksum  [4]uint64    `json:"cksum"`
}

// MMPValid reports whether the uberblock carries MMP fields (both magics match).
func (u Uberblock) MMPValid() bool { return u.Magic == UberblockMagic && u.MMPMagic == MMPMagic }

// MMPOn reports whether the pool was multihost when this uberblock was written: MMP fields
// valid and a non-zero mmp_delay. Pools older than MMP, or with multihost=off, are not.
func (u Uberblock) MMPOn() bool { return u.MMPValid() && u.MMPDelay != 0 }

// IntervalValid reports whether MMPInterval is meaningful.
func (u Uberblock) IntervalValid() bool { return u.MMPValid() && u.MMPConfig&MMPIntervalValid != 0 }

// SeqValid reports whether MMPSeq is meaningful.
func (u Uberblock) SeqValid() bool { return u.MMPValid() && u.MMPConfig&MMPSeqValid != 0 }

// FailValid reports whether MMPFailIntervals is meaningful.
func (u Uberblock) FailValid() bool { return u.MMPValid() && u.MMPConfig&MMPFailValid != 0 }

// MMPInterval is the writer's zfs_multihost_interval in ms (bits 8-31 of ub_mmp_config).
func (u Uberblock) MMPInterval() uint64 { return (u.MMPConfig >> 8) & 0xffffff }

// MMPSeq is the MMP write sequence within the current second (bits 32-47).
func (u Uberblock) MMPSeq() uint64 { return (u.MMPConfig >> 32) & 0xffff }

// MMPFailIntervals is the writer's zfs_multihost_fail_intervals (bits 48-63).
func (u Uberblock) MMPFailIntervals() uint64 { return u.MMPConfig >> 48 }

// seqOrZero is the sequence used for ordering: 0 unless MMP and seq are valid.
func (u Uberblock) seqOrZero() uint64 {
	if u.SeqValid() {
		return u.MMPSeq()
	}
	return 0
}

// Compare orders uberblocks as OpenZFS picks the best one (vdev_uberblock_compare): by
// txg, then timestamp, then MMP sequence (0 when not valid). It returns -1, 0 or +1.
func Compare(a, b Uberblock) int {
	switch {
	case a.TXG != b.TXG:
		return cmp3(a.TXG, b.TXG)
	case a.Timestamp != b.Timestamp:
		return cmp3(a.Timestamp, b.Timestamp)
	default:
		return cmp3(a.seqOrZero(), b.seqOrZero())
	}
}

func cmp3(a, b uint64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// DecodeUberblock decodes one uberblock slot read from physical offset off of its leaf.
// It verifies the embedded checksum first (the slot's last 40 bytes, SHA-256 with the
// {off,0,0,0} verifier), then the magic in either byte order. Returns an error wrapping
// ErrChecksum for a slot that was never written or is torn, or naming the bad magic.
func DecodeUberblock(slot []byte, off uint64) (Uberblock, error) {
	if len(slot) < uberblockBytes+eckSize {
		return Uberblock{}, fmt.Errorf("uberblock slot of %d bytes is too small", len(slot))
	}
	if _, err := verifyEmbedded(slot, off); err != nil {
		return Uberblock{}, err
	}
	var u Uberblock
	var order binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint64(slot) == UberblockMagic:
		order, u.ByteSwapped = binary.LittleEndian, false
	case binary.BigEndian.Uint64(slot) == UberblockMagic:
		order, u.ByteSwapped = binary.BigEndian, true
	default:
		return Uberblock{}, fmt.Errorf("uberblock at offset %d: bad magic %#x (want %#x)", off, binary.LittleEndian.Uint64(slot), UberblockMagic)
	}
	w := func(i int) uint64 { return order.Uint64(slot[i:]) }
	u.Magic = UberblockMagic
	u.Version = w(8)
	u.TXG = w(16)
	u.GUIDSum = w(24)
	u.Timestamp = w(32)
	u.RootBP = decodeBlockPointer(slot[40:168], order)
	u.SoftwareVersion = w(168)
	u.MMPMagic = w(176)
	u.MMPDelay = w(184)
	u.MMPConfig = w(192)
	u.CheckpointTXG = w(200)
	return u, nil
}

// verifyEmbedded checks the zio_eck_t at the end of buf, as OpenZFS checks label areas
// and uberblock slots (ZIO_CHECKSUM_LABEL): the SHA-256 of buf with the checksum words
// replaced by the verifier {off,0,0,0}, as four big-endian words, must equal the stored
// words. The eck's magic tells the byte order the block was written in; that order is
// returned. Errors wrap ErrChecksum.
func verifyEmbedded(buf []byte, off uint64) (binary.ByteOrder, error) {
	eck := buf[len(buf)-eckSize:]
	var order binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint64(eck) == eckMagic:
		order = binary.LittleEndian
	case binary.BigEndian.Uint64(eck) == eckMagic:
		order = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w at offset %d: no checksum magic", ErrChecksum, off)
	}
	var verifier [32]byte
	order.PutUint64(verifier[:], off)
	h := sha256.New()
	h.Write(buf[:len(buf)-32])
	h.Write(verifier[:])
	var sum [32]byte
	h.Sum(sum[:0])
	var want [32]byte
	for i := 0; i < 4; i++ {
		// The checksum words are the big-endian words of the digest, stored in the
		// block's byte order.
		order.PutUint64(want[8*i:], binary.BigEndian.Uint64(sum[8*i:]))
	}
	if !bytes.Equal(want[:], eck[8:]) {
		return nil, fmt.Errorf("%w at offset %d", ErrChecksum, off)
	}
	return order, nil
}

// decodeBlockPointer decodes the 128 bytes of a blkptr_t: dva[3] (0-47), blk_prop (48),
// blk_pad[2] (56-71), blk_phys_birth (72), blk_birth (80), blk_fill (88), blk_cksum (96).
func decodeBlockPointer(b []byte, order binary.ByteOrder) BlockPointer {
	w := func(i int) uint64 { return order.Uint64(b[i:]) }
	var bp BlockPointer
	for d := 0; d < 3; d++ {
		bp.DVA[d] = [2]uint64{w(16 * d), w(16*d + 8)}
	}
	bp.Prop, bp.PhysBirth, bp.Birth, bp.Fill = w(48), w(72), w(80), w(88)
	for i := 0; i < 4; i++ {
		bp.Checksum[i] = w(96 + 8*i)
	}
	return bp
}

// EncodeBlockPointer writes bp into the 128 bytes of b, decodeBlockPointer's inverse
// (test images and the fake zpool write uberblocks with it).
func EncodeBlockPointer(b []byte, bp BlockPointer, order binary.ByteOrder) {
	for d := 0; d < 3; d++ {
		order.PutUint64(b[16*d:], bp.DVA[d][0])
		order.PutUint64(b[16*d+8:], bp.DVA[d][1])
	}
	order.PutUint64(b[48:], bp.Prop)
	order.PutUint64(b[72:], bp.PhysBirth)
	order.PutUint64(b[80:], bp.Birth)
	order.PutUint64(b[88:], bp.Fill)
	for i := 0; i < 4; i++ {
		order.PutUint64(b[96+8*i:], bp.Checksum[i])
	}
}
