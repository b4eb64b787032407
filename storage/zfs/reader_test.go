package zfs_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

const imgSize = 4 << 20

// gunzipPrefix returns the first n bytes of a gzip-compressed fixture (label 0 and
// beyond) without inflating the whole leaf.
func gunzipPrefix(t testing.TB, path string, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(zr, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mmpUB(txg, ts, seq uint64) zfs.Uberblock {
	return zfs.Uberblock{Magic: zfs.UberblockMagic, Version: 5000, TXG: txg, GUIDSum: 42, Timestamp: ts, MMPMagic: zfs.MMPMagic,
		MMPDelay: 1_000_000_000, MMPConfig: zfsimage.MMPConfig(1000, int64(seq), 10)}
}

// synthetic makes a pool leaf with all four configs and a few slots per label.
func synthetic(ashift uint64, bigEndian bool) *zfsimage.Image {
	im := zfsimage.New(imgSize, ashift, bigEndian)
	for l := 0; l < zfs.Labels; l++ {
		im.WriteConfig(l, zfsimage.PoolConfig("tank", 77, zfs.StateActive, 9, 0x22222222, "host-b", ashift))
		im.WriteUberblock(l, 8, mmpUB(8, 100, 0))
		im.WriteUberblock(l, 9, mmpUB(9, 101, 0))
	}
	im.WriteUberblock(2, im.Slots()-1, mmpUB(9, 105, 3)) // the MMP slot, label 2 only
	return im
}

func TestNVListRoundTrip(t *testing.T) {
	in := &zfs.NVList{Pairs: []zfs.NVPair{
		{Name: "b", Type: 1, Value: true},
		{Name: "u32", Type: 6, Value: uint64(7)},
		{Name: "i32", Type: 5, Value: int64(-7)},
		{Name: "i64", Type: 7, Value: int64(-1 << 40)},
		{Name: "u64", Type: 8, Value: uint64(1 << 63)},
		{Name: "s", Type: 9, Value: "héllo"},
		{Name: "bytes", Type: 10, Value: []byte{1, 2, 3, 4, 5}},
		{Name: "u64s", Type: 16, Value: []uint64{1, 2, 3}},
		{Name: "strs", Type: 17, Value: []string{"a", "bcde", ""}},
		{Name: "nested", Type: 19, Value: &zfs.NVList{Pairs: []zfs.NVPair{{Name: "x", Type: 8, Value: uint64(1)}}}},
		{Name: "children", Type: 20, Value: []*zfs.NVList{
			{Pairs: []zfs.NVPair{{Name: "type", Type: 9, Value: "file"}}},
			{Pairs: []zfs.NVPair{{Name: "type", Type: 9, Value: "disk"}}},
		}},
		{Name: "bv", Type: 21, Value: true},
	}}
	out, err := zfs.UnpackNVList(zfsimage.Pack(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n in %+v\nout %+v", in, out)
	}
	if c, _ := out.NVLists("children"); len(c) != 2 {
		t.Fatalf("children: %v", c)
	}
}

func TestNVListErrors(t *testing.T) {
	good := zfsimage.Pack(zfsimage.PoolConfig("tank", 1, 0, 1, 1, "h", 9))
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter than the 4-byte header"},
		{"native", append([]byte{0, 1, 0, 0}, good[4:]...), "native encoding"},
		{"unknown encoding", append([]byte{7, 1, 0, 0}, good[4:]...), "unknown encoding 7"},
		{"truncated", good[:len(good)/2], "out of range"},
		{"bad version", append([]byte{1, 1, 0, 0, 0, 0, 0, 9}, good[8:]...), "version 9"},
		{"no end marker", good[:len(good)-8], "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := zfs.UnpackNVList(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// A pair size beyond the buffer.
	bad := append([]byte(nil), good...)
	bad[12], bad[13] = 0x7f, 0xff
	if _, err := zfs.UnpackNVList(bad); err == nil || !strings.Contains(err.Error(), "pair size") {
		t.Fatalf("err = %v, want pair size out of range", err)
	}
}

func TestReadLeafSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ashift uint64
		big    bool
		slot   int
	}{
		{"ashift9-le", 9, false, 1 << 10},
		{"ashift12-le", 12, false, 1 << 12},
		{"ashift12-be", 12, true, 1 << 12},
		{"ashift16-be", 16, true, 1 << 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := synthetic(tc.ashift, tc.big)
			lf, err := zfs.ReadLeaf(im.Device("d0"))
			if err != nil {
				t.Fatal(err)
			}
			if lf.SlotSize != tc.slot || lf.Ashift != tc.ashift {
				t.Fatalf("slot size %d ashift %d, want %d %d", lf.SlotSize, lf.Ashift, tc.slot, tc.ashift)
			}
			if len(lf.Slots) != 9 {
				t.Fatalf("%d valid slots, want 9", len(lf.Slots))
			}
			best, ok := lf.Best()
			if !ok || best.Label != 2 || best.Index != im.Slots()-1 || best.Timestamp != 105 || best.MMPSeq() != 3 {
				t.Fatalf("best = %+v", best)
			}
			if best.ByteSwapped != tc.big {
				t.Fatalf("ByteSwapped = %v", best.ByteSwapped)
			}
			for _, lb := range lf.Labels {
				if lb.Err != nil || lb.Info.HostID != 0x22222222 || lb.Info.Hostname != "host-b" || lb.Info.PoolName != "tank" {
					t.Fatalf("label %d: %+v err %v", lb.Index, lb.Info, lb.Err)
				}
			}
		})
	}
}

func TestReadLeafDamage(t *testing.T) {
	t.Run("corrupt slot and config", func(t *testing.T) {
		im := synthetic(9, false)
		im.Corrupt(im.LabelOffset(2) + 128<<10 + 127<<10 + 20) // inside the MMP slot
		im.Corrupt(im.LabelOffset(1) + 16<<10 + 30)            // inside label 1's config
		lf, err := zfs.ReadLeaf(im.Device("d0"))
		if err != nil {
			t.Fatal(err)
		}
		if best, _ := lf.Best(); best.Timestamp != 101 {
			t.Fatalf("best after corrupting the MMP slot: %+v", best)
		}
		if err := lf.Labels[1].Err; !errors.Is(err, zfs.ErrChecksum) {
			t.Fatalf("label 1 err = %v, want a checksum error", err)
		}
		if lf.Labels[1].ValidSlots != 2 {
			t.Fatalf("label 1 slots still read: %d", lf.Labels[1].ValidSlots)
		}
	})
	t.Run("zeros", func(t *testing.T) {
		_, err := zfs.ReadLeaf(zfs.Device{Name: "z", R: bytes.NewReader(make([]byte, imgSize)), Size: imgSize})
		if !errors.Is(err, zfs.ErrNotZFS) || !strings.Contains(err.Error(), "z: ") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("random", func(t *testing.T) {
		b := make([]byte, imgSize)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if _, err := zfs.ReadLeaf(zfs.Device{Name: "r", R: bytes.NewReader(b), Size: imgSize}); !errors.Is(err, zfs.ErrNotZFS) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("too small", func(t *testing.T) {
		_, err := zfs.ReadLeaf(zfs.Device{Name: "s", R: bytes.NewReader(make([]byte, 1000)), Size: 1000})
		if !errors.Is(err, zfs.ErrTooSmall) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("truncated fixture", func(t *testing.T) {
		b := zfsimage.Gunzip(t, "testdata/single-exported/disk0.img.gz")
		// The size claims the whole leaf but only the first half can be read: labels
		// 2 and 3 fail with a short read, 0 and 1 still serve.
		lf, err := zfs.ReadLeaf(zfs.Device{Name: "t", R: bytes.NewReader(b[:len(b)/2]), Size: int64(len(b))})
		if err != nil {
			t.Fatal(err)
		}
		for l := 2; l < 4; l++ {
			if err := lf.Labels[l].Err; err == nil || !strings.Contains(err.Error(), "short read") {
				t.Fatalf("label %d err = %v", l, err)
			}
		}
		if lf.Labels[0].Config == nil || lf.Labels[1].Config == nil {
			t.Fatal("labels 0 and 1 lost")
		}
		// Nothing readable at all: a clear error.
		_, err = zfs.ReadLeaf(zfs.Device{Name: "t", R: bytes.NewReader(nil), Size: int64(len(b))})
		if !errors.Is(err, zfs.ErrNotZFS) || !strings.Contains(err.Error(), "short read") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestBestOverMirror: the best uberblock over both mirror leaves is the maximum over
// every slot of every label of both, and its label config is the other host's.
func TestBestOverMirror(t *testing.T) {
	var leaves []*zfs.Leaf
	var all []zfs.Uberblock
	for _, p := range []string{"testdata/mirror-active/disk0.img.gz", "testdata/mirror-active/disk1.img.gz"} {
		b := zfsimage.Gunzip(t, p)
		lf, err := zfs.ReadLeaf(zfs.Device{Name: p, R: bytes.NewReader(b), Size: int64(len(b))})
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, lf)
		for _, s := range lf.Slots {
			all = append(all, s.Uberblock)
		}
	}
	f, ok := zfs.Best(leaves)
	if !ok || !f.HasConfig {
		t.Fatalf("no best: %+v", f)
	}
	for _, u := range all {
		if zfs.Compare(u, f.Slot.Uberblock) > 0 {
			t.Fatalf("slot %+v beats the best %+v", u, f.Slot)
		}
	}
	if f.Config.HostID != 0x22222222 || f.Config.Hostname != "host-b" || f.Config.State != zfs.StateActive {
		t.Fatalf("config = %+v", f.Config)
	}
	if !f.Slot.MMPOn() || f.Slot.Index != 31 {
		t.Fatalf("best is not an MMP slot write: %+v", f.Slot)
	}
}

func TestCompare(t *testing.T) {
	noMMP := zfs.Uberblock{TXG: 5, Timestamp: 10}
	for _, tc := range []struct {
		a, b zfs.Uberblock
		want int
	}{
		{mmpUB(5, 10, 0), mmpUB(6, 1, 0), -1},
		{mmpUB(5, 11, 0), mmpUB(5, 10, 9), 1},
		{mmpUB(5, 10, 2), mmpUB(5, 10, 3), -1},
		{mmpUB(5, 10, 3), mmpUB(5, 10, 3), 0},
		{noMMP, mmpUB(5, 10, 1), -1}, // no MMP counts as seq 0
		{noMMP, mmpUB(5, 10, 0), 0},
	} {
		if got := zfs.Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%+v, %+v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
