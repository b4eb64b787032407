package zfs

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

func TestLabelBuffersAligned(t *testing.T) {
	for i := 0; i < 8; i++ {
		b := labelBufs.Get().(*[]byte)
		if p := uintptr(unsafe.Pointer(&(*b)[0])); p%4096 != 0 || len(*b) != LabelSize {
			t.Fatalf("buffer at %#x len %d: not 4 KiB aligned", p, len(*b))
		}
		defer labelBufs.Put(b)
	}
}

// TestOpenDevice reads a real fixture through OpenDevice (O_DIRECT where the file system
// takes it, buffered otherwise) and gets the same leaf as from memory.
func TestOpenDevice(t *testing.T) {
	img := loadImage(t, "testdata/single-fast/disk0.img.gz")
	p := filepath.Join(t.TempDir(), "leaf.img")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	d, f, err := OpenDevice(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Logf("O_DIRECT: %v", d.Direct)
	if d.Size != int64(len(img)) {
		t.Fatalf("size %d, want %d", d.Size, len(img))
	}
	lf, err := ReadLeaf(d)
	if err != nil {
		t.Fatal(err)
	}
	best, ok := lf.Best()
	if !ok || best.MMPInterval() != 100 || len(lf.Slots) == 0 {
		t.Fatalf("best %+v", best)
	}
	if _, _, err := OpenDevice(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}
