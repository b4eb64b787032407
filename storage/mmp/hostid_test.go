package mmp

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadHostID(t *testing.T) {
	dir := t.TempDir()
	spl, etc := filepath.Join(dir, "spl"), filepath.Join(dir, "hostid")
	if got := ReadHostID(spl, etc); got != 0 {
		t.Fatalf("nothing there: %#x", got)
	}
	// /etc/hostid as zgenhostid writes it: 4 bytes, little-endian.
	if err := os.WriteFile(etc, []byte{0xf0, 0x21, 0x3c, 0x8a}, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ReadHostID(spl, etc); got != 0x8a3c21f0 {
		t.Fatalf("/etc/hostid: %#x", got)
	}
	// The SPL module's hostid wins when set, as in OpenZFS; 0 there falls back.
	os.WriteFile(spl, []byte("0\n"), 0o644)
	if got := ReadHostID(spl, etc); got != 0x8a3c21f0 {
		t.Fatalf("spl 0: %#x", got)
	}
	os.WriteFile(spl, []byte("1234abcd\n"), 0o644)
	if got := ReadHostID(spl, etc); got != 0x1234abcd {
		t.Fatalf("spl: %#x", got)
	}
	// A short /etc/hostid is no hostid.
	os.Remove(spl)
	os.WriteFile(etc, []byte{1, 2}, 0o644)
	if got := ReadHostID(spl, etc); got != 0 {
		t.Fatalf("short file: %#x", got)
	}
}
