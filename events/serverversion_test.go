package events

import "testing"

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		have string
		ok   bool
	}{{"2.12.0", true}, {"2.15.2", true}, {"v2.12.1-beta.1", true}, {"3.0.0", true}, {"2.11.9", false}, {"2.9.10", false}, {"1.99.99", false}} {
		ok, err := versionAtLeast(tt.have, MinServerVersion)
		if err != nil || ok != tt.ok {
			t.Errorf("versionAtLeast(%q, %s) = %v, %v; want %v", tt.have, MinServerVersion, ok, err, tt.ok)
		}
	}
	for _, bad := range []string{"", "2.12", "two.12.0"} {
		if _, err := versionAtLeast(bad, MinServerVersion); err == nil {
			t.Errorf("versionAtLeast(%q) accepted a malformed version", bad)
		}
	}
}
