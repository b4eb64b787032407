package mmp_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

func poll(t *testing.T, w *mmp.Watcher) mmp.Observation {
	t.Helper()
	obs, err := w.Poll()
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func watcher(t *testing.T, hostid uint32, self bool, devs ...zfs.Device) *mmp.Watcher {
	t.Helper()
	w, err := mmp.NewWatcher(devs, hostid, mmp.WatchOptions{SelfWriting: self})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// mirror makes a two-leaf mirror pool imported by host A at txg 20 (config txg 20).
func mirror() []*zfsimage.Image {
	ims := []*zfsimage.Image{zfsimage.New(4<<20, 9, false), zfsimage.New(4<<20, 9, false)}
	for i, im := range ims {
		for l := 0; l < zfs.Labels; l++ {
			im.WriteConfig(l, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 20, hostA, "host-a", 9, i, 2))
		}
	}
	sync(ims, 20, 1000)
	return ims
}

// syncUB is the uberblock one writer commits for txg (its root block pointer is born in
// that txg).
func syncUB(txg, ts uint64) zfs.Uberblock {
	u := ub(1000, 1000, 0, 10)
	u.TXG, u.Timestamp, u.GUIDSum = txg, ts, zfsimage.MirrorGUIDSum(77, 2)
	u.RootBP.Birth, u.RootBP.Checksum = txg, [4]uint64{txg, 1, 2, 3}
	return u
}

// sync writes txg into its sync slot on every label of every leaf, as spa_sync does.
func sync(ims []*zfsimage.Image, txg, ts uint64) {
	for _, im := range ims {
		for l := 0; l < zfs.Labels; l++ {
			im.WriteUberblock(l, int(txg%uint64(im.Slots()-1)), syncUB(txg, ts))
		}
	}
}

// mmpOn writes an MMP uberblock carrying txg (as of its issue) to one label of one leaf.
func mmpOn(im *zfsimage.Image, l int, txg, ts, seq uint64) {
	u := syncUB(txg, ts)
	u.MMPConfig = zfsimage.MMPConfig(1000, int64(seq), 10)
	im.WriteUberblock(l, im.Slots()-1, u)
}

func devices(ims []*zfsimage.Image) []zfs.Device {
	var out []zfs.Device
	for i, im := range ims {
		out = append(out, im.Device(string(rune('a'+i))))
	}
	return out
}

// TestWatchOwnWritesOutOfOrder (issue 12, item 1): OpenZFS's own MMP writes complete in
// any order across leaves, and one carrying txg N-1 can land after txg N is synced. The
// old rule ("one writer's (txg, timestamp, seq) only grows") fenced such a pool.
func TestWatchOwnWritesOutOfOrder(t *testing.T) {
	ims := mirror()
	w := watcher(t, hostA, true, devices(ims)...)
	mmpOn(ims[0], 1, 20, 1001, 1)
	mmpOn(ims[1], 2, 20, 1001, 2)
	if obs := poll(t, w); obs.Foreign || obs.Code != mmp.ObsOwnWrites {
		t.Fatalf("own MMP writes: %+v", obs)
	}
	sync(ims, 21, 1001)
	mmpOn(ims[0], 3, 21, 1001, 3)
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("own txg sync: %+v", obs)
	}
	// An MMP write issued before txg 21 was synced, on a slow leaf, lands now: txg 20,
	// an older (timestamp, seq) than the newest on disk.
	mmpOn(ims[1], 0, 20, 1001, 2)
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("a late MMP write of our own (txg 20 after 21): %+v", obs)
	}
	// And it goes on: many syncs, MMP writes interleaved late and early.
	for txg := uint64(22); txg < 400; txg++ {
		sync(ims, txg, 1000+txg/3)
		mmpOn(ims[txg%2], int(txg%4), txg-1, 1000+txg/3, txg%7)
		if obs := poll(t, w); obs.Foreign {
			t.Fatalf("txg %d: %+v", txg, obs)
		}
	}
}

// flaky fails every read while fail is set.
type flaky struct {
	r    io.ReaderAt
	from int64 // only reads at or after this offset fail
	fail atomic.Bool
}

func (f *flaky) ReadAt(p []byte, off int64) (int, error) {
	if f.fail.Load() && off >= f.from {
		return 0, errors.New("EIO")
	}
	return f.r.ReadAt(p, off)
}

// TestWatchTransientReadError (issue 12, item 2): a label that fails one read keeps its
// last known slots; the old watcher made it a hole, and on the next good read every old
// slot looked new and the oldest looked out of order.
func TestWatchTransientReadError(t *testing.T) {
	ims := mirror()
	dev := ims[0].Device("a")
	fl := &flaky{r: dev.R, from: zfs.LabelOffset(dev.Size&^(zfs.LabelSize-1), 2)}
	dev.R = fl
	w := watcher(t, hostA, true, dev, ims[1].Device("b"))
	for txg := uint64(21); txg < 25; txg++ {
		sync(ims, txg, 1001)
	}
	poll(t, w)
	fl.fail.Store(true)
	sync(ims, 25, 1002)
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("while labels 2 and 3 of a fail: %+v", obs)
	}
	fl.fail.Store(false)
	sync(ims, 26, 1002)
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("after the labels read again: %+v", obs)
	}
	// A whole leaf unreadable is listed, not an error; all leaves unreadable is one.
	fl.from = 0
	fl.fail.Store(true)
	obs := poll(t, w)
	if obs.Foreign || len(obs.Unreadable) != 1 || obs.Unreadable[0] != "a" {
		t.Fatalf("one leaf unreadable: %+v", obs)
	}
}

// TestWatchStaleLeg (issue 12, item 3): a leg OpenZFS does not write (offline, faulted,
// missing) keeps the previous owner's hostid in its labels; after a failover import the
// old watcher fenced at its first poll.
func TestWatchStaleLeg(t *testing.T) {
	ims := []*zfsimage.Image{zfsimage.New(4<<20, 9, false), zfsimage.New(4<<20, 9, false)}
	for l := 0; l < zfs.Labels; l++ {
		// Leg b went offline while host B owned the pool (config txg 15, hostid B);
		// host A imported the pool at txg 20 and rewrote leg a's labels.
		ims[0].WriteConfig(l, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 20, hostA, "host-a", 9, 0, 2, 1))
		ims[1].WriteConfig(l, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 15, hostB, "host-b", 9, 1, 2))
		ims[1].WriteUberblock(l, 15, syncUB(15, 900))
	}
	sync(ims[:1], 20, 1000)
	w := watcher(t, hostA, true, devices(ims)...)
	for txg := uint64(21); txg < 30; txg++ {
		sync(ims[:1], txg, 1000+txg)
		mmpOn(ims[0], int(txg%4), txg, 1000+txg, 1)
		if obs := poll(t, w); obs.Foreign {
			t.Fatalf("txg %d with a stale offline leg: %+v", txg, obs)
		}
	}
}

// TestWatchSecondWriter: the rules that catch a second host.
func TestWatchSecondWriter(t *testing.T) {
	t.Run("label rewritten with another hostid", func(t *testing.T) {
		ims := mirror()
		w := watcher(t, hostA, true, devices(ims)...)
		poll(t, w)
		for l := 0; l < zfs.Labels; l++ {
			ims[1].WriteConfig(l, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 21, hostB, "host-b", 9, 1, 2))
		}
		obs := poll(t, w)
		if !obs.Foreign || obs.Code != mmp.ObsForeignHostID || obs.Writer == nil || obs.Writer.HostID != hostB || obs.Writer.Hostname != "host-b" {
			t.Fatalf("foreign label: %+v", obs)
		}
	})
	t.Run("the newest config names another host (adopting a pool held elsewhere)", func(t *testing.T) {
		ims := mirror()
		w := watcher(t, hostB, true, devices(ims)...)
		if obs := poll(t, w); !obs.Foreign || obs.Code != mmp.ObsForeignHostID {
			t.Fatalf("watching as B a pool whose labels name A: %+v", obs)
		}
	})
	t.Run("same txg, another root block pointer", func(t *testing.T) {
		ims := mirror()
		w := watcher(t, hostA, true, devices(ims)...)
		sync(ims, 21, 1001)
		poll(t, w)
		other := syncUB(22, 1001)
		other.RootBP.Checksum[0] = 999 // host B committed txg 22 too, with other contents
		sync(ims, 22, 1002)
		poll(t, w)
		ims[1].WriteUberblock(2, 22, other)
		if obs := poll(t, w); !obs.Foreign || obs.Code != mmp.ObsTXGFork {
			t.Fatalf("txg fork: %+v", obs)
		}
	})
	t.Run("sync slot rewound", func(t *testing.T) {
		ims := mirror()
		w := watcher(t, hostA, true, devices(ims)...)
		n := uint64(ims[0].Slots() - 1)
		sync(ims, 21+n, 1001) // the slot of txg 21 now holds 21+n, written in our watch
		poll(t, w)
		u := syncUB(21, 1002) // a writer still at txg 21
		u.RootBP.Checksum[1] = 7
		ims[0].WriteUberblock(0, int(21%n), u)
		if obs := poll(t, w); !obs.Foreign || obs.Code != mmp.ObsSyncRewound || obs.Previous == nil || obs.Previous.TXG != 21+n {
			t.Fatalf("rewound sync slot: %+v", obs)
		}
	})
	t.Run("config rewritten behind the synced txg", func(t *testing.T) {
		ims := mirror()
		w := watcher(t, hostA, true, devices(ims)...)
		sync(ims, 30, 1001)
		poll(t, w)
		ims[0].WriteConfig(3, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 25, hostA, "host-a", 9, 0, 2))
		if obs := poll(t, w); !obs.Foreign || obs.Code != mmp.ObsConfigBehind {
			t.Fatalf("config behind: %+v", obs)
		}
	})
}

// TestWatchIdle: this host does not write; any change is foreign.
func TestWatchIdle(t *testing.T) {
	im := pool(zfs.StateExported, hostA)
	w := watcher(t, hostA, false, im.Device("d0"))
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("quiet: %+v", obs)
	}
	mmpWrite(im, 9, 1001, 1)
	obs := poll(t, w)
	if !obs.Foreign || obs.Code != mmp.ObsActivity || obs.Writes != 1 {
		t.Fatalf("idle write: %+v", obs)
	}
	if obs := poll(t, w); obs.Foreign || obs.Code != mmp.ObsQuiet {
		t.Fatalf("next poll without a new write: %+v", obs)
	}
}

func TestWatchReadErrors(t *testing.T) {
	im := pool(zfs.StateActive, hostA)
	dev := im.Device("d0")
	fl := &flaky{r: dev.R}
	dev.R = fl
	w := watcher(t, hostA, true, dev)
	fl.fail.Store(true)
	if _, err := w.Poll(); err == nil {
		t.Fatal("Poll with no readable leaf: no error")
	}
	fl.fail.Store(false)
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("after recovery: %+v", obs)
	}
	if _, err := mmp.NewWatcher([]zfs.Device{{Name: "x", R: nil, Size: 10}}, hostA, mmp.WatchOptions{}); !errors.Is(err, zfs.ErrTooSmall) {
		t.Fatalf("NewWatcher on a tiny device: %v, want zfs.ErrTooSmall", err)
	}
	fl.fail.Store(true)
	if _, err := mmp.NewWatcher([]zfs.Device{dev}, hostA, mmp.WatchOptions{}); err == nil {
		t.Fatal("NewWatcher on an unreadable leaf: no error")
	}
}

// TestWatchReadsLess: a poll reads the rings and the config tails (528 KiB per leaf),
// not the whole labels (1 MiB).
func TestWatchReadsLess(t *testing.T) {
	ims := mirror()
	w := watcher(t, hostA, true, devices(ims)...)
	obs := poll(t, w)
	if want := int64(2 * 4 * (128<<10 + 4<<10)); obs.BytesRead != want {
		t.Fatalf("bytes read %d, want %d", obs.BytesRead, want)
	}
}

func TestWatchLoop(t *testing.T) {
	ims := mirror()
	clk := newClock()
	clk.onSleep = func(n int) {
		switch {
		case n < 5:
			mmpOn(ims[0], n%4, 20, 1000+uint64(n), 1) // our own heartbeat
		case n == 5:
			for l := 0; l < zfs.Labels; l++ {
				ims[1].WriteConfig(l, zfsimage.MirrorConfig("tank", 77, zfs.StateActive, 21, hostB, "host-b", 9, 1, 2))
			}
		}
	}
	obs, err := mmp.Watch(context.Background(), devices(ims), hostA, mmp.WatchOptions{SelfWriting: true}, 0, clk)
	if err != nil || !obs.Foreign || obs.Code != mmp.ObsForeignHostID || clk.sleeps != 5 {
		t.Fatalf("Watch = %+v, %v after %d polls", obs, err, clk.sleeps)
	}
	ims = mirror()
	ctx, cancel := context.WithCancel(context.Background())
	clk = newClock()
	clk.onSleep = func(n int) {
		if n == 3 {
			cancel()
		}
	}
	if _, err := mmp.Watch(ctx, devices(ims), hostA, mmp.WatchOptions{SelfWriting: true}, time.Second, clk); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Watch: %v", err)
	}
}
