package main

import (
	"encoding/json"
	"testing"
)

// A replica whose report shows a resync under way says to which peer, what is left,
// and the rate and time left the agent measured (drbd.PeerVolumeStatus).
func TestSyncNote(t *testing.T) {
	var o map[string]any
	if err := json.Unmarshal([]byte(`{"peers":[{"node":"n2","volumes":[{"volume":0,"out_of_sync_kib":60000,"sync_rate_kib_s":4000,"sync_eta_s":15}]},
		{"node":"n3","volumes":[{"volume":0,"out_of_sync_kib":0}]},{"node":"n4","volumes":[{"volume":0,"out_of_sync_kib":512}]}]}`), &o); err != nil {
		t.Fatal(err)
	}
	if got, want := syncNote(o), "(sync n2: 60000 KiB left, 4000 KiB/s, 15s; sync n4: 512 KiB left)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	// A report with a rate and no time left (an agent of another version) is no panic.
	if got := syncNote(map[string]any{"peers": []any{map[string]any{"node": "n2", "volumes": []any{map[string]any{"out_of_sync_kib": 8.0, "sync_rate_kib_s": 4.0}}}}}); got != "(sync n2: 8 KiB left, 4 KiB/s)" {
		t.Fatalf("rate without eta: %q", got)
	}
	if got := syncNote(map[string]any{}); got != "" {
		t.Fatalf("no peers: %q", got)
	}
}
