package fsx

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtomicAndRemoveDurably(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, body := range []string{"one", "two"} {
		if err := WriteAtomic(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != body {
			t.Fatalf("read %q %v, want %q", b, err, body)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v, want 0600", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries, want only the file (no temporary left)", len(ents))
	}
	if err := WriteAtomic(filepath.Join(dir, "no", "such"), nil, 0o644); err == nil {
		t.Fatal("wrote into a missing directory")
	}
	for range 2 { // a missing file is not an error
		if err := RemoveDurably(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
}
