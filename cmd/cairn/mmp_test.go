package main

import (
	"strings"
	"testing"

	"github.com/cairn-io/cairn/storage/mmp"
)

func TestParseHostID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0x1a2b3c4d", 0x1a2b3c4d, true},
		{"1A2B3C4D", 0x1a2b3c4d, true},
		{"0", 0, true},
		{" 0Xff ", 0xff, true},
		{"", 0, false},
		{"0x", 0, false},
		{"0x100000000", 0, false}, // more than 32 bits
		{"zz", 0, false},
		{"-1", 0, false},
	} {
		got, err := parseHostID(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseHostID(%q) = %#x, %v; want %#x ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestPrintVerdict(t *testing.T) {
	seq, iv, fail := uint64(3), uint64(1000), uint64(10)
	v := mmp.Verdict{Active: true, Code: mmp.CodeActivityDetected, Message: "pool \"tank\" is imported on host \"b\"",
		Pool: "tank", PoolGUID: 7, State: "active", LocalHostID: 1, CheckRequired: true,
		LastHost:  &mmp.Host{HostID: 0x22222222, Hostname: "b"},
		Uberblock: &mmp.Seen{Leaf: "/d0", Label: 1, Slot: 127, TXG: 9, Timestamp: 0, MMPValid: true, MMPDelayNS: 1e9, Seq: &seq, IntervalMS: &iv, FailIntervals: &fail},
		Changed:   &mmp.Seen{Leaf: "/d0", Label: 2, Slot: 127, TXG: 9, Timestamp: 1},
		Duration:  20e9, DurationCase: mmp.CaseFailIntervals, Reads: 2}
	var b strings.Builder
	printVerdict(&b, v)
	for _, want := range []string{"pool tank (guid 7, active): ACTIVE ON ANOTHER HOST [activity_detected]",
		"last host in the label: b (hostid 0x22222222)", "best uberblock: txg 9, timestamp 0 (1970-01-01T00:00:00Z), seq 3, on /d0 label 1 slot 127",
		"mmp: delay 1s, interval 1000 ms, fail intervals 10", "changed to: txg 9, timestamp 1", "check: 20s (fail_intervals"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
