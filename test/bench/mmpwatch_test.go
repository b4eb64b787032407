package bench

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

// BenchmarkWatcherPoll16Leaves: bytes read and CPU per watcher poll of a 16-leaf pool
// (one mirror of 16 file leaves, 4 MiB each, synthetic labels in OpenZFS's layout),
// with one MMP write landing between polls as on a live pool. "before" is what the
// watcher did up to the second wave: read the four whole labels of every leaf (zfs.ReadLeaves,
// 1 MiB per leaf), verify every valid slot and decode every config, then find the best
// uberblock. "after" is mmp.Watcher.Poll: the rings and the last 4 KiB of each config
// area (zfs.Tracker), verifying only the slots that changed.
//
//	go test -run XXX -bench WatcherPoll16Leaves ./test/bench/
func BenchmarkWatcherPoll16Leaves(b *testing.B) {
	const leaves = 16
	devs, ims := sixteenLeafFiles(b)
	// One MMP write between polls: rewrite the MMP slot of one label of one leaf in
	// the files the watcher reads.
	seq := uint64(0)
	size := ims[0].SlotSize()
	mmpWrite := func() {
		seq++
		leaf, l := int(seq%leaves), int(seq%zfs.Labels)
		u := ubAt(40, 1000+40+seq/10, leaves)
		u.MMPConfig = zfsimage.MMPConfig(1000, int64(seq%100), 10)
		off := zfsimage.SlotOffset(ims[leaf].LabelOffset(l), ims[leaf].Slots()-1, size)
		fh, err := os.OpenFile(devs[leaf].Name, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fh.WriteAt(zfsimage.UberblockSlot(u, off, size, binary.LittleEndian), off); err != nil {
			b.Fatal(err)
		}
		fh.Close()
	}
	run := func(b *testing.B, poll func() int64) {
		var bytes int64
		cpu0 := cpuTime()
		start := time.Now()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			mmpWrite()
			b.StartTimer()
			bytes += poll()
		}
		b.StopTimer()
		b.ReportMetric(float64(bytes)/float64(b.N)/1024, "KiB/poll")
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu_us/poll")
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "wall_us/poll")
	}
	b.Run("before", func(b *testing.B) {
		counting := make([]zfs.Device, len(devs))
		var n atomic.Int64
		for i, d := range devs {
			counting[i] = d
			counting[i].R = countReader{d.R, &n}
		}
		run(b, func() int64 {
			n.Store(0)
			lfs, err := zfs.ReadLeaves(counting, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := zfs.Best(lfs); !ok {
				b.Fatal("no uberblock")
			}
			return n.Load()
		})
	})
	b.Run("after", func(b *testing.B) {
		w, err := mmp.NewWatcher(devs, 0x11111111, mmp.WatchOptions{SelfWriting: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, func() int64 {
			obs, err := w.Poll()
			if err != nil || obs.Foreign {
				b.Fatalf("poll: %+v %v", obs, err)
			}
			return obs.BytesRead
		})
	})
}

func ubAt(txg, ts uint64, leaves int) zfs.Uberblock {
	return zfs.Uberblock{Magic: zfs.UberblockMagic, Version: 5000, TXG: txg, Timestamp: ts, GUIDSum: zfsimage.MirrorGUIDSum(77, leaves),
		MMPMagic: zfs.MMPMagic, MMPDelay: uint64(time.Second), MMPConfig: zfsimage.MMPConfig(1000, 0, 10),
		RootBP: zfs.BlockPointer{Birth: txg, Checksum: [4]uint64{txg, 1, 2, 3}}}
}

// countReader counts the bytes read through it (ReadLeaves reads 8 leaves at once).
type countReader struct {
	r io.ReaderAt
	n *atomic.Int64
}

func (c countReader) ReadAt(p []byte, off int64) (int, error) {
	k, err := c.r.ReadAt(p, off)
	c.n.Add(int64(k))
	return k, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sixteenLeafFiles writes 16 leaf files of 4 MiB (one mirror of pool tank, ashift 12,
// last written by hostid 0x11111111, rings full of history) and opens them with
// O_DIRECT as the agents do.
func sixteenLeafFiles(b *testing.B) ([]zfs.Device, []*zfsimage.Image) {
	const leaves = 16
	dir := b.TempDir()
	var devs []zfs.Device
	var ims []*zfsimage.Image
	for i := range leaves {
		im := zfsimage.New(4<<20, 12, false)
		for l := range zfs.Labels {
			im.WriteConfig(l, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 20, 0x11111111, "host-a", 12, i, leaves))
			for txg := uint64(1); txg <= 40; txg++ { // a ring full of history
				im.WriteUberblock(l, int(txg%uint64(im.Slots()-1)), ubAt(txg, 1000+txg, leaves))
			}
		}
		p := filepath.Join(dir, "leaf"+string(rune('a'+i))+".img")
		if err := os.WriteFile(p, im.Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
		d, f, err := zfs.OpenDevice(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		devs = append(devs, d)
		ims = append(ims, im)
	}
	return devs, ims
}

// BenchmarkActivityCheckReread16Leaves: one re-read of the activity check on a quiet
// 16-leaf pool (the files of BenchmarkWatcherPoll16Leaves, O_DIRECT). "before" is what the
// check did until stop 37 (mmp.Checker.ReadBest: the four whole labels of every leaf, every
// config verified and decoded, Identify); "after" is a whole check (hostid B on a pool A
// wrote: a check is needed) re-reading every 20 ms through zfs.Tracker, its time divided
// by its re-reads.
//
//	go test -run XXX -bench ActivityCheckReread16Leaves -benchtime 5x ./test/bench/
func BenchmarkActivityCheckReread16Leaves(b *testing.B) {
	devs, _ := sixteenLeafFiles(b)
	b.Run("before", func(b *testing.B) {
		cpu0, start := cpuTime(), time.Now()
		for range b.N {
			if _, err := (mmp.Checker{}).ReadBest(devs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu_us/reread")
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "wall_us/reread")
	})
	b.Run("after", func(b *testing.B) {
		reads := 0
		cpu0, start := cpuTime(), time.Now()
		for range b.N {
			v := mmp.Checker{ReadEvery: 20 * time.Millisecond, Jitter: func() uint64 { return 0 }}.Check(context.Background(), devs, 0x22222222, &benchClock{now: time.Unix(1_800_000_000, 0)})
			if !v.Importable || v.Reads == 0 {
				b.Fatalf("verdict %+v", v)
			}
			reads += v.Reads
		}
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(reads), "cpu_us/reread")
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(reads), "wall_us/reread")
	})
}

// benchClock advances only when the check sleeps.
type benchClock struct{ now time.Time }

func (c *benchClock) Now() time.Time { return c.now }

func (c *benchClock) Sleep(_ context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return nil
}
