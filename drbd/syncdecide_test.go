package drbd

import "testing"

func TestDecideSync(t *testing.T) {
	gi := func(s string) GI {
		g, err := ParseGI(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	tests := []struct {
		name    string
		a, b    string
		kind    SyncKind
		aSource bool
	}{
		{"both just created", "4:0:0:0", "4:0:0:0", SyncNone, false},
		{"a just created: full from b", "4:0:0:0", "A0:0:0:0", SyncFull, false},
		{"b just created: full from a", "A0:0:0:0", "4:0:0:0", SyncFull, true},
		{"equal current", "A0:0:0:0", "A0:B0:0:0", SyncNone, false},
		{"equal current, primary bit masked", "A1:0:0:0", "A0:0:0:0", SyncNone, false},
		{"first replica vs day-0 replica: bitmap from the first", "A0:D0:0:0", "D0:0:0:0", SyncBitmap, true},
		{"day-0 replica vs first replica: bitmap from the first", "D0:0:0:0", "A0:D0:0:0", SyncBitmap, false},
		{"peer's current in my history: full from me", "A0:0:C0:0", "C0:0:0:0", SyncFull, true},
		{"my current in peer's history: full from peer", "C0:0:0:0", "A0:0:0:C0", SyncFull, false},
		{"unrelated", "A0:0:0:0", "C0:0:0:0", SyncUnrelated, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, src := DecideSync(gi(tt.a), gi(tt.b))
			if k != tt.kind || (k == SyncBitmap || k == SyncFull) && src != tt.aSource {
				t.Fatalf("DecideSync(%s, %s) = %s (a source %v), want %s (a source %v)", tt.a, tt.b, k, src, tt.kind, tt.aSource)
			}
		})
	}
}
