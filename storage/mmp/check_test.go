package mmp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
	"github.com/rs/zerolog"
)

const (
	hostA = 0x11111111
	hostB = 0x22222222
)

// fakeClock advances only when the check sleeps; onSleep runs after each sleep with
// the number of sleeps so far (a test writes "another host's" uberblock there).
type fakeClock struct {
	now     time.Time
	sleeps  int
	onSleep func(n int)
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.now = c.now.Add(d)
	c.sleeps++
	if c.onSleep != nil {
		c.onSleep(c.sleeps)
	}
	return nil
}

func newClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

// pool makes a one-leaf multihost pool last written by host B, interval 1 s, fail 10.
func pool(state uint64, hostid uint64) *zfsimage.Image {
	im := zfsimage.New(4<<20, 9, false)
	for l := 0; l < zfs.Labels; l++ {
		im.WriteConfig(l, zfsimage.PoolConfig("tank", 77, state, 9, hostid, "host-b", 9))
		u := ub(1000, 1000, 0, 10)
		u.TXG, u.Timestamp = 9, 1000
		im.WriteUberblock(l, 9, u)
	}
	return im
}

// mmpWrite writes an MMP slot as the other host's MMP thread would.
func mmpWrite(im *zfsimage.Image, txg, ts, seq uint64) {
	u := ub(1000, 1000, int64(seq), 10)
	u.TXG, u.Timestamp = txg, ts
	im.WriteUberblock(1, im.Slots()-1, u)
}

func noJitter() uint64 { return 0 }

func TestCheckQuietPool(t *testing.T) {
	im := pool(zfs.StateActive, hostB)
	clk := newClock()
	var logs bytes.Buffer
	c := mmp.Checker{Jitter: noJitter, Log: zerolog.New(&logs).Level(zerolog.DebugLevel)}
	v := c.Check(context.Background(), []zfs.Device{im.Device("d0")}, hostA, clk)
	if !v.Importable || v.Code != mmp.CodeNoActivity || v.ExitCode() != 0 {
		t.Fatalf("verdict %+v", v)
	}
	// fail 10 × 1 s × 2 = 20 s, read at 0, 1, …, 19 s.
	if v.Duration != 20*time.Second || v.DurationCase != mmp.CaseFailIntervals || v.Reads != 20 || v.Elapsed != 20*time.Second {
		t.Fatalf("duration %v (%s) reads %d elapsed %v", v.Duration, v.DurationCase, v.Reads, v.Elapsed)
	}
	if v.LastHost == nil || v.LastHost.HostID != hostB || v.LastHost.Hostname != "host-b" || v.Pool != "tank" || v.State != "active" {
		t.Fatalf("pool/host: %+v %+v", v, v.LastHost)
	}
	if n := strings.Count(logs.String(), `"message":"activity check: re-read"`); n != 20 {
		t.Fatalf("%d re-read debug events, want 20:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"level":"info","pool":"tank","code":"no_activity"`) {
		t.Fatalf("no info summary:\n%s", logs.String())
	}
}

// TestCheckRereadsThroughTheTracker: a re-read of a quiet leaf reads, per label, the
// uberblock ring and the config area's last 4 KiB (132 KiB, zfs.Tracker), not the whole
// label (256 KiB) nor the configs again (issue 32: 16 leaves took ~25 ms of every 100 ms).
func TestCheckRereadsThroughTheTracker(t *testing.T) {
	bytesFor := func(every time.Duration) (int64, int) {
		d := pool(zfs.StateActive, hostB).Device("d0")
		cr := &countingReader{r: d.R}
		d.R = cr
		v := mmp.Checker{Jitter: noJitter, ReadEvery: every}.Check(context.Background(), []zfs.Device{d}, hostA, newClock())
		if !v.Importable {
			t.Fatalf("verdict %+v", v)
		}
		return cr.n, v.Reads
	}
	b1, r1 := bytesFor(time.Second)
	b2, r2 := bytesFor(500 * time.Millisecond)
	if r2 <= r1 {
		t.Fatalf("reads %d and %d", r1, r2)
	}
	if per := (b2 - b1) / int64(r2-r1); per != zfs.Labels*(4<<10+128<<10) {
		t.Fatalf("%d bytes per re-read, want %d", per, zfs.Labels*(4<<10+128<<10))
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

func TestCheckJitterExtendsTheWatch(t *testing.T) {
	im := pool(zfs.StateActive, hostB)
	c := mmp.Checker{Jitter: func() uint64 { return 100 }} // +10 %
	v := c.Check(context.Background(), []zfs.Device{im.Device("d0")}, hostA, newClock())
	if v.Duration != 22*time.Second || v.Reads != 22 || v.JitterPct != 10 || !v.Importable {
		t.Fatalf("verdict %+v", v)
	}
	// The default jitter stays within 0-25 %.
	for i := 0; i < 20; i++ {
		v := mmp.Checker{}.Check(context.Background(), []zfs.Device{im.Device("d0")}, hostA, newClock())
		if v.Duration < 20*time.Second || v.Duration >= 25*time.Second {
			t.Fatalf("duration %v outside [20 s, 25 s)", v.Duration)
		}
	}
}

func TestCheckDetectsActivity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(im *zfsimage.Image)
	}{
		{"mmp seq", func(im *zfsimage.Image) { mmpWrite(im, 9, 1000, 1) }},
		{"timestamp", func(im *zfsimage.Image) { mmpWrite(im, 9, 1001, 0) }},
		{"txg", func(im *zfsimage.Image) { mmpWrite(im, 10, 1000, 0) }},
		{"older write on another slot does not count", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := pool(zfs.StateActive, hostB)
			clk := newClock()
			clk.onSleep = func(n int) {
				if n == 3 {
					if tc.write != nil {
						tc.write(im)
					} else {
						mmpWrite(im, 8, 999, 5) // not better than the best: invisible
					}
				}
			}
			v := mmp.Checker{Jitter: noJitter}.Check(context.Background(), []zfs.Device{im.Device("d0")}, hostA, clk)
			if tc.write == nil {
				if !v.Importable {
					t.Fatalf("verdict %+v", v)
				}
				return
			}
			if !v.Active || v.Importable || v.Code != mmp.CodeActivityDetected || v.ExitCode() != 1 {
				t.Fatalf("verdict %+v", v)
			}
			// Written after the third sleep, seen by the third re-read (the first
			// re-read comes after one period, not at the start).
			if v.Reads != 3 || v.Changed == nil || v.Uberblock.TXG != 9 {
				t.Fatalf("reads %d changed %+v", v.Reads, v.Changed)
			}
			if !strings.Contains(v.Message, `host "host-b" (hostid 0x22222222)`) {
				t.Fatalf("message %q", v.Message)
			}
		})
	}
}

func TestCheckNotNeededOrRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("no hostid", func(t *testing.T) {
		v := mmp.Check(ctx, []zfs.Device{pool(zfs.StateActive, hostB).Device("d0")}, 0, newClock())
		if v.Code != mmp.CodeNoHostID || v.ExitCode() != 2 || v.Reads != 0 || !v.CheckRequired {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("exported by this host", func(t *testing.T) {
		v := mmp.Check(ctx, []zfs.Device{pool(zfs.StateExported, hostA).Device("d0")}, hostA, newClock())
		if !v.Importable || v.Code != mmp.CodeExportedByThisHost || v.Reads != 0 || v.CheckRequired {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("exported by another host is checked", func(t *testing.T) {
		v := mmp.Checker{Jitter: noJitter}.Check(ctx, []zfs.Device{pool(zfs.StateExported, hostB).Device("d0")}, hostA, newClock())
		if !v.Importable || v.Code != mmp.CodeNoActivity || v.Reads != 20 {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("destroyed", func(t *testing.T) {
		v := mmp.Check(ctx, []zfs.Device{pool(zfs.StateDestroyed, hostB).Device("d0")}, hostA, newClock())
		if !v.Importable || v.Code != mmp.CodePoolDestroyed {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("destroyed multihost pool without a hostid", func(t *testing.T) {
		// OpenZFS refuses any multihost pool without a hostid (ZFS-8000-EY).
		v := mmp.Check(ctx, []zfs.Device{pool(zfs.StateDestroyed, hostB).Device("d0")}, 0, newClock())
		if v.Importable || v.Code != mmp.CodeNoHostID || v.ExitCode() != 2 {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("exported by this host but fenced here: checked", func(t *testing.T) {
		v := mmp.Checker{Jitter: noJitter, AlwaysCheck: true}.Check(ctx, []zfs.Device{pool(zfs.StateExported, hostA).Device("d0")}, hostA, newClock())
		if !v.Importable || v.Code != mmp.CodeNoActivity || v.Reads != 20 || !v.CheckRequired {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("no leaves", func(t *testing.T) {
		if v := mmp.Check(ctx, nil, hostA, newClock()); v.Code != mmp.CodeInvalidArgument || v.ExitCode() != 2 {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("not zfs", func(t *testing.T) {
		d := zfs.Device{Name: "/dev/zero-ish", R: bytes.NewReader(make([]byte, 2<<20)), Size: 2 << 20}
		v := mmp.Check(ctx, []zfs.Device{d}, hostA, newClock())
		if v.Code != mmp.CodeUnreadableVdev || v.ExitCode() != 2 || !strings.Contains(v.Message, "/dev/zero-ish") || !strings.Contains(v.Message, "not a ZFS leaf vdev") {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("read fails during the watch", func(t *testing.T) {
		d := pool(zfs.StateActive, hostB).Device("d0")
		dead := &failAfter{r: d.R}
		d.R = dead
		clk := newClock()
		clk.onSleep = func(n int) {
			if n == 4 {
				dead.on = true // the device dies before the 4th re-read
			}
		}
		v := mmp.Checker{Jitter: noJitter}.Check(ctx, []zfs.Device{d}, hostA, clk)
		if v.Code != mmp.CodeUnreadableVdev || v.Importable || v.Reads != 4 || !strings.Contains(v.Message, "input/output error") || !strings.Contains(v.Message, "d0") {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("mixed pools", func(t *testing.T) {
		other := zfsimage.New(4<<20, 9, false)
		for l := 0; l < zfs.Labels; l++ {
			other.WriteConfig(l, zfsimage.PoolConfig("other", 99, zfs.StateActive, 9, hostB, "host-b", 9))
			other.WriteUberblock(l, 9, ub(1000, 1000, 0, 10))
		}
		v := mmp.Check(ctx, []zfs.Device{pool(zfs.StateActive, hostB).Device("d0"), other.Device("d1")}, hostA, newClock())
		if v.Code != mmp.CodeMixedPools || v.ExitCode() != 2 {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		clk := newClock()
		clk.onSleep = func(n int) {
			if n == 2 {
				cancel()
			}
		}
		v := mmp.Checker{Jitter: noJitter}.Check(ctx, []zfs.Device{pool(zfs.StateActive, hostB).Device("d0")}, hostA, clk)
		if v.Code != mmp.CodeCanceled || v.ExitCode() != 2 {
			t.Fatalf("verdict %+v", v)
		}
	})
}

func TestVerdictJSON(t *testing.T) {
	v := mmp.Checker{Jitter: noJitter}.Check(context.Background(), []zfs.Device{pool(zfs.StateActive, hostB).Device("d0")}, hostA, newClock())
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"importable":true`, `"code":"no_activity"`, `"local_hostid":"0x11111111"`,
		`"last_host":{"hostid":"0x22222222","hostname":"host-b"}`, `"duration_ms":20000`, `"reads":20`,
		`"mmp_interval_ms":1000`, `"mmp_fail_intervals":10`, `"mmp_seq":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

// fixture opens the leaves of a real OpenZFS image from storage/zfs/testdata.
func fixture(t *testing.T, image string, leaves ...string) []zfs.Device {
	t.Helper()
	var devs []zfs.Device
	for _, l := range leaves {
		p := zfsimage.FixturePath(image, l)
		b := zfsimage.Gunzip(t, p)
		devs = append(devs, zfs.Device{Name: p, R: bytes.NewReader(b), Size: int64(len(b))})
	}
	return devs
}

// TestCheckOnRealPools runs the check on pools written by OpenZFS 2.1.11 (the images do
// not change, so a needed check ends importable after its full duration).
func TestCheckOnRealPools(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		image    string
		leaves   []string
		hostid   uint32
		code     string
		duration time.Duration
		host     uint32
	}{
		{"single-exported", []string{"disk0"}, hostA, mmp.CodeExportedByThisHost, 0, hostA},
		{"single-exported", []string{"disk0"}, hostB, mmp.CodeNoActivity, 20 * time.Second, hostA},
		{"mirror-exported", []string{"disk0", "disk1"}, hostA, mmp.CodeExportedByThisHost, 0, hostA},
		{"mirror-active", []string{"disk0", "disk1"}, hostA, mmp.CodeNoActivity, 20 * time.Second, hostB},
		{"mirror-active", []string{"disk1"}, hostB, mmp.CodeNoActivity, 20 * time.Second, hostB}, // crashed here: checked anyway
		{"single-off", []string{"disk0"}, hostB, mmp.CodeMMPOff, 0, hostA},
		{"single-off", []string{"disk0"}, 0, mmp.CodeMMPOff, 0, hostA},
		{"single-fast", []string{"disk0"}, hostA, mmp.CodeNoActivity, 2 * time.Second, 0x33333333},
		{"single-fast", []string{"disk0"}, 0, mmp.CodeNoHostID, 0, 0x33333333},
	} {
		t.Run(tc.image+"/"+tc.code, func(t *testing.T) {
			v := mmp.Checker{Jitter: noJitter}.Check(ctx, fixture(t, tc.image, tc.leaves...), tc.hostid, newClock())
			if v.Code != tc.code || v.Duration != tc.duration {
				t.Fatalf("code %s duration %v, want %s %v (%s)", v.Code, v.Duration, tc.code, tc.duration, v.Message)
			}
			if v.LastHost == nil || uint32(v.LastHost.HostID) != tc.host {
				t.Fatalf("last host %+v, want %#x", v.LastHost, tc.host)
			}
			if v.Uberblock == nil || v.Uberblock.TXG == 0 || v.Pool != "pool-"+tc.image {
				t.Fatalf("uberblock %+v pool %q", v.Uberblock, v.Pool)
			}
		})
	}
}

// TestCheckLabelNewerThanUberblock: no label config qualifies for the best uberblock (all
// are from a later txg), so even a pool "exported by this host" is checked, as OpenZFS
// does without a label; the verdict still names the pool.
func TestCheckLabelNewerThanUberblock(t *testing.T) {
	im := zfsimage.New(4<<20, 9, false)
	for l := 0; l < zfs.Labels; l++ {
		im.WriteConfig(l, zfsimage.PoolConfig("tank", 77, zfs.StateExported, 20, hostA, "host-a", 9))
		im.WriteUberblock(l, 9, ub(1000, 1000, 0, 10))
	}
	v := mmp.Checker{Jitter: noJitter}.Check(context.Background(), []zfs.Device{im.Device("d0")}, hostA, newClock())
	if !v.CheckRequired || v.Code != mmp.CodeNoActivity || v.Reads != 20 || v.Pool != "tank" || v.LastHost == nil {
		t.Fatalf("verdict %+v", v)
	}
}

// TestCheckShortDurationStillWatches: a pool whose interval makes the check shorter than
// the 1 s re-read period is re-read every interval and once at the end, so a write in
// the middle is seen (before, the only re-read came at the start).
func TestCheckShortDurationStillWatches(t *testing.T) {
	im := zfsimage.New(4<<20, 9, false)
	for l := 0; l < zfs.Labels; l++ {
		im.WriteConfig(l, zfsimage.PoolConfig("tank", 77, zfs.StateActive, 9, hostB, "host-b", 9))
		u := ub(100, 100, 0, 2) // 2 fail intervals × 100 ms × 2 = 400 ms
		u.TXG = 9
		im.WriteUberblock(l, 9, u)
	}
	clk := newClock()
	var slept []time.Duration
	last := clk.now
	clk.onSleep = func(n int) {
		slept = append(slept, clk.now.Sub(last))
		last = clk.now
		if n == 2 {
			mmpWrite(im, 9, 1000, 3)
		}
	}
	v := mmp.Checker{Jitter: noJitter}.Check(context.Background(), []zfs.Device{im.Device("d0")}, hostA, clk)
	if v.Duration != 400*time.Millisecond {
		t.Fatalf("duration %v", v.Duration)
	}
	if !v.Active || v.Code != mmp.CodeActivityDetected || v.Reads != 2 {
		t.Fatalf("a write 200 ms into a 400 ms check: verdict %+v (sleeps %v)", v, slept)
	}
	if slept[0] != 100*time.Millisecond {
		t.Fatalf("re-read period %v, want the pool's 100 ms interval", slept[0])
	}

	// Quiet: reads until the end, the last one at the expiry.
	im2 := zfsimage.New(4<<20, 9, false)
	for l := 0; l < zfs.Labels; l++ {
		im2.WriteConfig(l, zfsimage.PoolConfig("tank", 77, zfs.StateActive, 9, hostB, "host-b", 9))
		u := ub(100, 100, 0, 2)
		u.TXG = 9
		im2.WriteUberblock(l, 9, u)
	}
	clk2 := newClock()
	start := clk2.now
	v = mmp.Checker{Jitter: noJitter}.Check(context.Background(), []zfs.Device{im2.Device("d0")}, hostA, clk2)
	if !v.Importable || v.Reads != 4 || clk2.now.Sub(start) != 400*time.Millisecond {
		t.Fatalf("quiet short check: verdict %+v, took %v", v, clk2.now.Sub(start))
	}
}

// TestCheckIdentifiesLeaves: the leaves given must be one pool's, all of it, each with a
// readable config (issue 12, item 6).
func TestCheckIdentifiesLeaves(t *testing.T) {
	ctx := context.Background()
	t.Run("a leaf without a config does not compete for the best uberblock", func(t *testing.T) {
		stray := zfsimage.New(4<<20, 9, false)
		for l := 0; l < zfs.Labels; l++ {
			u := ub(1000, 1000, 0, 10)
			u.TXG = 500 // a stray, higher txg that would hide the pool's live writer
			stray.WriteUberblock(l, 5, u)
		}
		v := mmp.Checker{Jitter: noJitter}.Check(ctx, []zfs.Device{pool(zfs.StateActive, hostB).Device("d0"), stray.Device("stray")}, hostA, newClock())
		if v.Importable || v.Code != mmp.CodeLeafWithoutConfig || !strings.Contains(v.Message, "stray") {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("guid sum", func(t *testing.T) {
		im := pool(zfs.StateActive, hostB)
		for l := 0; l < zfs.Labels; l++ {
			u := ub(1000, 1000, 0, 10)
			u.TXG, u.GUIDSum = 12, 12345
			im.WriteUberblock(l, 12, u)
		}
		v := mmp.Checker{Jitter: noJitter}.Check(ctx, []zfs.Device{im.Device("d0")}, hostA, newClock())
		if v.Importable || v.Code != mmp.CodeGUIDSumMismatch {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("same leaf twice", func(t *testing.T) {
		im := pool(zfs.StateActive, hostB)
		v := mmp.Checker{Jitter: noJitter}.Check(ctx, []zfs.Device{im.Device("d0"), im.Device("d0-again")}, hostA, newClock())
		if v.Importable || v.Code != mmp.CodeDuplicateLeaf {
			t.Fatalf("verdict %+v", v)
		}
	})
}

// TestCheckIdentifiesRealPools runs Identify on the real OpenZFS fixtures: both legs of
// a mirror and each leg alone are the whole pool (one top-level vdev), and the trees add
// up to the uberblocks' guid sum.
func TestCheckIdentifiesRealPools(t *testing.T) {
	for _, dir := range []string{"mirror-active", "single-exported"} {
		files, _ := filepath.Glob(filepath.Join("..", "zfs", "testdata", dir, "*.img.gz"))
		if len(files) == 0 {
			t.Fatalf("no fixture under %s", dir)
		}
		var leaves []*zfs.Leaf
		for _, f := range files {
			b := zfsimage.Gunzip(t, f)
			lf, err := zfs.ReadLeaf(zfs.Device{Name: f, R: bytes.NewReader(b), Size: int64(len(b))})
			if err != nil {
				t.Fatal(err)
			}
			leaves = append(leaves, lf)
		}
		best, _ := zfs.Best(leaves)
		id, err := mmp.Identify(leaves, &best.Slot.Uberblock)
		if err != nil || !id.Complete || id.GUIDSum != best.Slot.GUIDSum {
			t.Fatalf("%s: identity %+v, err %v", dir, id, err)
		}
		if _, err := mmp.Identify(leaves[:1], &best.Slot.Uberblock); err != nil {
			t.Fatalf("%s: one leaf: %v", dir, err)
		}
	}
}

// failAfter reads r until on, then fails every read.
type failAfter struct {
	r  io.ReaderAt
	on bool
}

func (f *failAfter) ReadAt(p []byte, off int64) (int, error) {
	if f.on {
		return 0, errors.New("input/output error")
	}
	return f.r.ReadAt(p, off)
}
