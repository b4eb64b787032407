package drbdutils

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"
)

func TestParseGetGI(t *testing.T) {
	out := "ioctl(md_fd, BLKSSZGET) returned -1, assuming hard_sect_size is 512 Byte\n" +
		"0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0\n"
	g, err := ParseGetGI([]byte(out))
	if err != nil || g.Current() != drbd.UUIDJustCreated || !g.Complete() {
		t.Fatalf("ParseGetGI = %v, %v", g, err)
	}
	// set-gi prints the old and the new GI; the last complete one is the new one.
	setOut := "previously 0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0\n" +
		"set GI to  0000000000000012:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0\n"
	if _, err := ParseGetGI([]byte(setOut)); err == nil {
		t.Fatal("ParseGetGI accepted set-gi's prefixed lines")
	}
	for _, bad := range []string{"", "No valid meta data found\n", "0000000000000004:::::\n"} {
		if _, err := ParseGetGI([]byte(bad)); err == nil || !strings.Contains(err.Error(), "no complete 16-field GI") {
			t.Errorf("ParseGetGI(%q) = %v, want an error", bad, err)
		}
	}
}

// FuzzParseGetGI: whatever drbdmeta prints, parsing it never panics, and what it
// returns is a complete GI.
func FuzzParseGetGI(f *testing.F) {
	f.Add("0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0")
	f.Add("No valid meta data found")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGetGI(bytes.Repeat([]byte(s+"\n"), 2))
		if err == nil && !g.Complete() {
			t.Fatalf("ParseGetGI(%q) = %s, not a complete GI", s, g)
		}
	})
}
