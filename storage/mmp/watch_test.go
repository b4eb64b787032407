package mmp_test

import (
	"context"
	"errors"
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

// TestWatchSelfWriting: host A owns the pool; its own progressing writes are not
// foreign, an out-of-order write or a label naming another hostid is.
func TestWatchSelfWriting(t *testing.T) {
	im := pool(zfs.StateActive, hostA)
	w, err := mmp.NewWatcher([]zfs.Device{im.Device("d0")}, hostA, mmp.WatchOptions{SelfWriting: true})
	if err != nil {
		t.Fatal(err)
	}
	if obs := poll(t, w); obs.Foreign || obs.Code != mmp.ObsQuiet || obs.Writes != 0 {
		t.Fatalf("quiet pool: %+v", obs)
	}
	// Our MMP thread: same txg, seq 1 then 2 in the same second, then a txg sync.
	mmpWrite(im, 9, 1000, 1)
	if obs := poll(t, w); obs.Foreign || obs.Code != mmp.ObsOwnWrites || obs.Writes != 1 {
		t.Fatalf("own MMP write: %+v", obs)
	}
	mmpWrite(im, 9, 1000, 2)
	u := ub(1000, 1000, 0, 10)
	u.TXG, u.Timestamp = 10, 1001
	for l := 0; l < zfs.Labels; l++ {
		im.WriteUberblock(l, 10, u)
	}
	if obs := poll(t, w); obs.Foreign || obs.Writes != 5 || obs.Newest.TXG != 10 {
		t.Fatalf("own txg sync: %+v", obs)
	}
	// Another host, imported from an older view, writes txg 10 at a timestamp that is
	// not newer than what we already wrote: a single writer never goes back.
	mmpWrite(im, 10, 1000, 7)
	obs := poll(t, w)
	if !obs.Foreign || obs.Code != mmp.ObsOutOfOrder {
		t.Fatalf("out-of-order write: %+v", obs)
	}
	// The other host rewrites the labels with its hostid.
	for l := 0; l < zfs.Labels; l++ {
		im.WriteConfig(l, zfsimage.PoolConfig("tank", 77, zfs.StateActive, 11, hostB, "host-b", 9))
	}
	obs = poll(t, w)
	if !obs.Foreign || obs.Code != mmp.ObsForeignHostID || obs.Writer == nil || obs.Writer.HostID != hostB || obs.Writer.Hostname != "host-b" {
		t.Fatalf("foreign label: %+v", obs)
	}
}

// TestWatchIdle: this host does not write; any change is foreign.
func TestWatchIdle(t *testing.T) {
	im := pool(zfs.StateExported, hostA)
	w, err := mmp.NewWatcher([]zfs.Device{im.Device("d0")}, hostA, mmp.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
	fail := false
	opts := mmp.WatchOptions{SelfWriting: true, ReadLeaf: func(d zfs.Device) (*zfs.Leaf, error) {
		if fail {
			return nil, errors.New("device gone")
		}
		return zfs.ReadLeaf(d)
	}}
	w, err := mmp.NewWatcher([]zfs.Device{im.Device("d0")}, hostA, opts)
	if err != nil {
		t.Fatal(err)
	}
	fail = true
	if _, err := w.Poll(); err == nil {
		t.Fatal("Poll on an unreadable leaf: no error")
	}
	fail = false
	if obs := poll(t, w); obs.Foreign {
		t.Fatalf("after recovery: %+v", obs)
	}
	if _, err := mmp.NewWatcher([]zfs.Device{{Name: "x", R: nil, Size: 10}}, hostA, opts); !errors.Is(err, zfs.ErrTooSmall) {
		t.Fatalf("NewWatcher on a tiny device: %v, want zfs.ErrTooSmall", err)
	}
}

func TestWatchLoop(t *testing.T) {
	im := pool(zfs.StateActive, hostA)
	clk := newClock()
	clk.onSleep = func(n int) {
		switch {
		case n < 5:
			mmpWrite(im, 9, 1000+uint64(n), 1) // our own heartbeat, one per poll
		case n == 5:
			mmpWrite(im, 9, 1001, 9) // older than what is on disk: somebody else
		}
	}
	obs, err := mmp.Watch(context.Background(), []zfs.Device{im.Device("d0")}, hostA, mmp.WatchOptions{SelfWriting: true}, 0, clk)
	if err != nil || !obs.Foreign || obs.Code != mmp.ObsOutOfOrder || clk.sleeps != 5 {
		t.Fatalf("Watch = %+v, %v after %d polls", obs, err, clk.sleeps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clk = newClock()
	clk.onSleep = func(n int) {
		if n == 3 {
			cancel()
		}
	}
	if _, err := mmp.Watch(ctx, []zfs.Device{im.Device("d0")}, hostA, mmp.WatchOptions{SelfWriting: true}, time.Second, clk); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Watch: %v", err)
	}
}
