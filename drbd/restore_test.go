package drbd

import (
	"testing"

	"github.com/cairn-io/cairn/storage/backing"
)

// Replicas restored together from one snapshot connect without a resync (their data is
// the same copy); a replica added to the restored definition later (fresh metadata,
// forced full sync) is fully synced from a restored one and never bitmap-synced; and a
// restored replica never takes a day-0 replica for one holding its data.
func TestRestoreSeedsSyncModel(t *testing.T) {
	const c = UUID(0x5A5A5A5A5A5A5A50)
	day0 := UUID(0x1234567890ABCDE0)
	restored := func(id int) Metadata {
		seeds, err := PlanRestoreSeeds(id, map[int]UUID{0: c})
		if err != nil {
			t.Fatal(err)
		}
		m := NewMetadata()
		if err := m.Apply(seeds, 0); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := restored(0), restored(1)
	if kind, _ := DecideSync(a.GI(1), b.GI(0)); kind != SyncNone {
		t.Fatalf("two restored replicas: %s, want none", kind)
	}
	fresh := NewMetadata() // a later replica: create-md, no seeds (full sync forced)
	if kind, aSource := DecideSync(a.GI(2), fresh.GI(0)); kind != SyncFull || !aSource {
		t.Fatalf("restored vs a later replica: %s (restored is source: %v), want a full sync from the restored one", kind, aSource)
	}
	// Had the later replica been seeded day-0 style (current = day 0), DRBD must not
	// skip or bitmap-sync the restored data.
	seeds, _, err := PlanSeeds(SeedInput{NodeID: 2, Provider: backing.ProviderFileThin, Volumes: []SeedVolume{{Number: 0, Day0GI: day0.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	dz := NewMetadata()
	if err := dz.Apply(seeds, 0); err != nil {
		t.Fatal(err)
	}
	if kind, _ := DecideSync(a.GI(2), dz.GI(0)); kind == SyncNone || kind == SyncBitmap {
		t.Fatalf("restored vs a day-0 seeded replica: %s; it would serve data it does not hold", kind)
	}
	if _, err := PlanRestoreSeeds(1, map[int]UUID{0: UUIDJustCreated}); err == nil {
		t.Fatal("the just-created UUID was accepted as restore data")
	}
}
