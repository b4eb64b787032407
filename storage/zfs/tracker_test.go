package zfs_test

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

// TestTrackerMatchesReadLeaf: on every real OpenZFS fixture, a Tracker's first Refresh
// finds exactly the slots and configs ReadLeaf finds (ashift 9 and 12 leaves alike).
func TestTrackerMatchesReadLeaf(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.img.gz")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "testdata/"), func(t *testing.T) {
			b := zfsimage.Gunzip(t, f)
			d := zfs.Device{Name: f, R: bytes.NewReader(b), Size: int64(len(b))}
			lf, err := zfs.ReadLeaf(d)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := zfs.NewTracker(d)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tr.Refresh()
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, c := range r.Changed {
				got = append(got, slotString(c.Label, c.Index, c.New))
			}
			for _, s := range lf.Slots {
				want = append(want, slotString(s.Label, s.Index, s.Uberblock))
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("tracker slots differ from ReadLeaf's:\n%d vs %d", len(got), len(want))
			}
			if tr.SlotsPerLabel() != (128<<10)/lf.SlotSize {
				t.Fatalf("slots per label %d, slot size %d", tr.SlotsPerLabel(), lf.SlotSize)
			}
			for l := range zfs.Labels {
				c, _, ok := tr.Config(l)
				if !ok || c != lf.Labels[l].Info {
					t.Fatalf("label %d config: %+v %v, ReadLeaf %+v", l, c, ok, lf.Labels[l].Info)
				}
			}
			// Its Leaf is ReadLeaf's: the same best uberblock, configs and slots.
			tl := tr.Leaf()
			if len(tl.Slots) != len(lf.Slots) || tl.SlotSize != lf.SlotSize || tl.Ashift != lf.Ashift || tl.PSize != lf.PSize {
				t.Fatalf("Leaf: %d slots of %d bytes, ashift %d, psize %d; ReadLeaf %d of %d, %d, %d",
					len(tl.Slots), tl.SlotSize, tl.Ashift, tl.PSize, len(lf.Slots), lf.SlotSize, lf.Ashift, lf.PSize)
			}
			for i, s := range lf.Slots {
				if tl.Slots[i] != s {
					t.Fatalf("Leaf slot %d: %+v, ReadLeaf %+v", i, tl.Slots[i], s)
				}
			}
			for l := range zfs.Labels {
				if tl.Labels[l].Info != lf.Labels[l].Info || tl.Labels[l].ValidSlots != lf.Labels[l].ValidSlots || tl.Labels[l].Offset != lf.Labels[l].Offset {
					t.Fatalf("Leaf label %d: %+v, ReadLeaf %+v", l, tl.Labels[l], lf.Labels[l])
				}
			}
			wb, _ := zfs.Best([]*zfs.Leaf{lf})
			gb, _ := zfs.Best([]*zfs.Leaf{tl})
			if wb.Slot != gb.Slot || wb.Config != gb.Config || wb.HasConfig != gb.HasConfig {
				t.Fatalf("Best over Leaf %+v, over ReadLeaf %+v", gb, wb)
			}
			// Nothing changed: nothing reported, and the configs are not read again.
			before := tr.BytesRead
			r, err = tr.Refresh()
			if err != nil || len(r.Changed) != 0 {
				t.Fatalf("second refresh: %d changes, %v", len(r.Changed), err)
			}
			if n := tr.BytesRead - before; n != 4*(4<<10+128<<10) {
				t.Fatalf("second refresh read %d bytes", n)
			}
		})
	}
}

func slotString(l, i int, u zfs.Uberblock) string {
	return strings.Join([]string{itoa(l), itoa(i), itoa(int(u.TXG)), itoa(int(u.Timestamp)), itoa(int(u.MMPConfig)), itoa(int(u.RootBP.Birth))}, "/")
}

// failing fails reads while on.
type failing struct {
	r  io.ReaderAt
	on atomic.Bool
}

func (f *failing) ReadAt(p []byte, off int64) (int, error) {
	if f.on.Load() {
		return 0, errors.New("EIO")
	}
	return f.r.ReadAt(p, off)
}

// TestTrackerKeepsWhatItKnew: a torn slot and a failed read keep the last known values;
// a slot rewritten is reported once with its old value.
func TestTrackerKeepsWhatItKnew(t *testing.T) {
	im := zfsimage.New(4<<20, 12, false)
	for l := range zfs.Labels {
		im.WriteConfig(l, zfsimage.PoolConfig("tank", 77, zfs.StateActive, 9, 1, "h", 12))
		im.WriteUberblock(l, 9, zfs.Uberblock{TXG: 9, Timestamp: 100})
	}
	fr := &failing{r: im}
	tr, err := zfs.NewTracker(zfs.Device{Name: "d", R: fr, Size: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := tr.Refresh(); err != nil || len(r.Changed) != 4 || tr.SlotsPerLabel() != 32 {
		t.Fatalf("baseline: %+v %v, %d slots", r.Changed, err, tr.SlotsPerLabel())
	}
	// Torn: slot 9 of label 1 corrupted mid-write.
	im.Corrupt(zfsimage.SlotOffset(im.LabelOffset(1), 9, 4096) + 100)
	if r, _ := tr.Refresh(); len(r.Changed) != 0 || !tr.Slot(1, 9).Valid || tr.Slot(1, 9).TXG != 9 {
		t.Fatalf("torn slot: %+v, known %+v", r.Changed, tr.Slot(1, 9))
	}
	// All reads fail: an error, what was known stays.
	fr.on.Store(true)
	if _, err := tr.Refresh(); err == nil {
		t.Fatal("no error with every read failing")
	}
	fr.on.Store(false)
	im.WriteUberblock(1, 9, zfs.Uberblock{TXG: 40, Timestamp: 200})
	r, err := tr.Refresh()
	if err != nil || len(r.Changed) != 1 || r.Changed[0].Old.TXG != 9 || r.Changed[0].New.TXG != 40 {
		t.Fatalf("rewritten slot: %+v %v", r.Changed, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
