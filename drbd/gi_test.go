package drbd

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseGIAndString(t *testing.T) {
	tests := []struct {
		in       string
		complete bool
		out      string // String() of the parsed GI; "" = same as in
		check    func(t *testing.T, g GI)
	}{
		{
			// drbdmeta 9.22 get-gi right after create-md
			in:       "0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0",
			complete: true,
			check: func(t *testing.T, g GI) {
				if g.Current() != UUIDJustCreated || !g.Flag(GIALClean) || g.Flag(GIConsistent) {
					t.Fatalf("fields wrong: %+v", g)
				}
			},
		},
		{
			in:  "ABCDEF0123456780:1234567890ABCDE0:::1:1",
			out: "ABCDEF0123456780:1234567890ABCDE0:::1:1",
			check: func(t *testing.T, g GI) {
				if g.IsSet(GIHistory1) || g.IsSet(GIPrimary) || !g.Flag(GIWasUpToDate) || g.Bitmap() != 0x1234567890ABCDE0 {
					t.Fatalf("fields wrong: %+v", g)
				}
			},
		},
		{in: ":1234567890ABCDE0::::", check: func(t *testing.T, g GI) {
			if g.IsSet(GICurrent) || g.Bitmap() != 0x1234567890ABCDE0 {
				t.Fatalf("fields wrong: %+v", g)
			}
		}},
		{in: "1234567890ABCDE0:::::"},
		{in: "1234567890ABCDE0::::1:1"},
		{in: "", out: ":::::"},
		{in: "a", out: "000000000000000A:::::"},
		{in: "0x12:::::", out: "0000000000000012:::::"},
		{in: "::::::::::::::1", out: "::::::::::::::1"},
		{in: "::::::::::::::1:", out: "::::::::::::::1"},
		{in: "::::::1\n", out: "::::::1"},
	}
	for _, tt := range tests {
		g, err := ParseGI(tt.in)
		if err != nil {
			t.Fatalf("ParseGI(%q): %v", tt.in, err)
		}
		if g.Complete() != tt.complete {
			t.Errorf("ParseGI(%q).Complete() = %v", tt.in, g.Complete())
		}
		want := tt.out
		if want == "" {
			want = tt.in
		}
		if got := g.String(); got != want {
			t.Errorf("ParseGI(%q).String() = %q, want %q", tt.in, got, want)
		}
		if tt.check != nil {
			tt.check(t, g)
		}
		again, err := ParseGI(g.String())
		if err != nil || again != g {
			t.Errorf("round trip of %q: %v %+v", tt.in, err, again)
		}
	}
}

func TestParseGIErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"zz:::::", "GI field 1 (current): UUID \"zz\" must be 1 to 16 hex digits"},
		{":0x:::", "GI field 2 (bitmap)"},
		{"::11111111111111111::", "GI field 3 (history1)"},
		{"a:::::2", "GI field 6 (was-up-to-date) must be 0 or 1, got \"2\""},
		{"a::::x", "GI field 5 (consistent) must be 0 or 1"},
		{"1:2:3:4:1:1:1:1:1:1:1:1:1:1:1:1:1", "has 17 fields, at most 16 allowed"},
		{" 1:::::", "current"},
	}
	for _, tt := range tests {
		_, err := ParseGI(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseGI(%q) = %v, want an error saying %q", tt.in, err, tt.msg)
		}
	}
}

func TestGIFieldNames(t *testing.T) {
	want := "current bitmap history1 history2 consistent was-up-to-date primary crashed-primary al-clean al-disabled " +
		"primary-lost-quorum connected peer-outdated fencing peer-full-sync peer-device-seen"
	var names []string
	for f := GICurrent; f <= GIPeerDeviceSeen; f++ {
		names = append(names, f.String())
	}
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("field names\n got %s\nwant %s", got, want)
	}
	if GIField(16).String() != "GIField(16)" {
		t.Fatal("out-of-range field name")
	}
	for f := GICurrent; f <= GIPeerDeviceSeen; f++ {
		wantPeer := f == GIBitmap || f >= GIPeerConnected
		if f.IsPeer() != wantPeer {
			t.Errorf("%s IsPeer = %v", f, f.IsPeer())
		}
	}
}

func TestGIMergeIsSetGI(t *testing.T) {
	disk, _ := ParseGI("0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0")
	upd, _ := ParseGI("ABCDEF0123456780:1234567890ABCDE0:::1:1")
	got := disk.Merge(upd).String()
	if want := "ABCDEF0123456780:1234567890ABCDE0:0000000000000000:0000000000000000:1:1:0:0:1:0:0:0:0:0:0:0"; got != want {
		t.Fatalf("merge = %s, want %s", got, want)
	}
}

// seqReader yields the given 64-bit values, big-endian, then EOF.
type seqReader struct{ vals []uint64 }

func (r *seqReader) Read(p []byte) (int, error) {
	if len(r.vals) == 0 {
		return 0, io.EOF
	}
	if len(p) < 8 {
		return 0, errors.New("short buffer")
	}
	binary.BigEndian.PutUint64(p, r.vals[0])
	r.vals = r.vals[1:]
	return 8, nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestNewDay0GI(t *testing.T) {
	// 0, 4 and 5 (odd: becomes 4 once the primary bit is cleared) and 1 (becomes 0) are
	// drawn again; 0xFF…FF becomes 0xFF…FE.
	u, err := NewDay0GI(&seqReader{[]uint64{0, 4, 5, 1, ^uint64(0)}})
	if err != nil || u != UUID(^uint64(0)-1) {
		t.Fatalf("NewDay0GI = %s, %v; want FFFFFFFFFFFFFFFE", u, err)
	}
	// avoid: a value equal to one to avoid is drawn again.
	u, err = NewDay0GI(&seqReader{[]uint64{0x10, 0x11, 0x20}}, 0x10)
	if err != nil || u != 0x20 {
		t.Fatalf("NewDay0GI with avoid = %s, %v; want 0x20", u, err)
	}
	if _, err := NewDay0GI(&seqReader{[]uint64{0, 4}}); err == nil {
		t.Fatal("NewDay0GI did not report the exhausted reader")
	}
	if _, err := NewDay0GI(zeroReader{}); err == nil || !strings.Contains(err.Error(), "random source is broken") {
		t.Fatalf("NewDay0GI on an all-zero source = %v, want it to give up", err)
	}
	for range 1000 {
		u, err := NewDay0GI(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidDay0(u); err != nil {
			t.Fatalf("NewDay0GI drew %s: %v", u, err)
		}
	}
}

func TestValidDay0(t *testing.T) {
	for _, tt := range []struct {
		u   UUID
		msg string
	}{
		{0, "must not be 0"}, {4, "must not be 4 (UUID_JUST_CREATED)"}, {3, "must be even"}, {0x1234567890ABCDE1, "must be even"},
		{2, ""}, {6, ""}, {0x1234567890ABCDE0, ""},
	} {
		err := ValidDay0(tt.u)
		if (err == nil) != (tt.msg == "") || (err != nil && !strings.Contains(err.Error(), tt.msg)) {
			t.Errorf("ValidDay0(%s) = %v, want %q", tt.u, err, tt.msg)
		}
	}
}

func FuzzParseGI(f *testing.F) {
	for _, s := range []string{
		"0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0",
		"ABCDEF0123456780:1234567890ABCDE0:::1:1", ":DAY0::::", "", "::::::::::::::::", "0x:", "1:2:3:4:5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGI(s)
		if err != nil {
			return
		}
		again, err := ParseGI(g.String())
		if err != nil {
			t.Fatalf("ParseGI(%q).String() = %q does not parse: %v", s, g.String(), err)
		}
		if again != g {
			t.Fatalf("round trip of %q: %+v != %+v", s, again, g)
		}
	})
}
