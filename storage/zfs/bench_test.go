package zfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-io/cairn/storage/zfs/zfsimage"

	"github.com/cairn-io/cairn/storage/zfs"
)

// sixteenLeaves writes 16 sparse 64 MiB leaf files into dir: the two real mirror-active
// leaves, each replicated 8 times (only the label areas are written; the rest is a hole).
func sixteenLeaves(b *testing.B, dir string) []zfs.Device {
	b.Helper()
	var devs []zfs.Device
	for i := 0; i < 16; i++ {
		img := gunzipCached(b, fmt.Sprintf("testdata/mirror-active/disk%d.img.gz", i%2))
		p := filepath.Join(dir, fmt.Sprintf("leaf%02d.img", i))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		size := int64(len(img))
		for _, off := range []int64{0, size - 2*zfs.LabelSize} {
			if _, err := f.WriteAt(img[off:off+2*zfs.LabelSize], off); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Truncate(size); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		devs = append(devs, zfs.Device{Name: p, R: f, Size: size})
	}
	return devs
}

var gunzipped = map[string][]byte{}

func gunzipCached(b *testing.B, p string) []byte {
	if img, ok := gunzipped[p]; ok {
		return img
	}
	img := zfsimage.Gunzip(b, p)
	gunzipped[p] = img
	return img
}

// BenchmarkPoolReadIteration16Leaves measures one iteration of the activity check on a
// 16-leaf pool (zfs.ReadLeaves, 8 leaves at a time, as the check reads them): read all
// four labels of every leaf from files (page cache, then O_DIRECT), verify every
// checksum, decode configs and slots, pick the best uberblock. The check repeats this
// once a second, so it must stay far below 1 s.
func BenchmarkPoolReadIteration16Leaves(b *testing.B) {
	devs := sixteenLeaves(b, b.TempDir())
	b.Run("buffered", func(b *testing.B) { benchIteration(b, devs) })
	// O_DIRECT, as zfs.OpenDevice opens leaves: every read goes to the disk.
	direct := make([]zfs.Device, len(devs))
	for i, d := range devs {
		dd, f, err := zfs.OpenDevice(d.Name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		if !dd.Direct {
			b.Skip("O_DIRECT refused by the file system of TMPDIR")
		}
		direct[i] = dd
	}
	b.Run("direct", func(b *testing.B) { benchIteration(b, direct) })
}

func benchIteration(b *testing.B, devs []zfs.Device) {
	b.SetBytes(int64(len(devs)) * zfs.Labels * zfs.LabelSize)
	b.ReportAllocs()
	for b.Loop() {
		leaves, err := zfs.ReadLeaves(devs, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := zfs.Best(leaves); !ok {
			b.Fatal("no best uberblock")
		}
	}
}
