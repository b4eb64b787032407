package drbd

import (
	"strings"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/backing"
)

const (
	day0Hex = "1234567890ABCDE0"
	// randomHex is what seqReader{0xABCDEF0123456781} draws: the primary bit cleared.
	randomHex = "ABCDEF0123456780"
)

func fixedRand() *seqReader { return &seqReader{[]uint64{0xABCDEF0123456781}} }

// seedsByNode indexes a plan's seeds of one volume by node id.
func seedsByNode(t *testing.T, seeds []Seed, volume int) map[int]string {
	t.Helper()
	m := map[int]string{}
	for _, s := range seeds {
		if s.Volume != volume {
			continue
		}
		if _, dup := m[s.NodeID]; dup {
			t.Fatalf("two seeds for volume %d node id %d", volume, s.NodeID)
		}
		m[s.NodeID] = s.GI
	}
	return m
}

func TestPlanSeeds(t *testing.T) {
	first := ":" + day0Hex + "::::"
	tests := []struct {
		name     string
		in       SeedInput
		fullSync bool
		own      string // the own node id's GI; "" = no seeds
		other    string // every other node id's GI
	}{
		{
			name:  "first replica",
			in:    SeedInput{NodeID: 0, Provider: backing.ProviderZFSThin, Volumes: []SeedVolume{{0, day0Hex, true}}, Rand: fixedRand()},
			own:   randomHex + ":" + day0Hex + ":::1:1",
			other: first,
		},
		{
			name:  "first replica on a thick provider: its content is the data",
			in:    SeedInput{NodeID: 3, Provider: backing.ProviderLVM, Volumes: []SeedVolume{{0, day0Hex, true}}, Rand: fixedRand()},
			own:   randomHex + ":" + day0Hex + ":::1:1",
			other: first,
		},
		{
			name: "first replica with force_initial_sync: nothing to sync from",
			in: SeedInput{NodeID: 0, Provider: backing.ProviderLVMThin, ForceInitialSync: true,
				Volumes: []SeedVolume{{0, day0Hex, true}}, Rand: fixedRand()},
			own:   randomHex + ":" + day0Hex + ":::1:1",
			other: first,
		},
		{
			name:  "later replica on zfs_thin",
			in:    SeedInput{NodeID: 2, Provider: backing.ProviderZFSThin, Volumes: []SeedVolume{{0, day0Hex, false}}},
			own:   day0Hex + "::::1:1",
			other: day0Hex + ":::::",
		},
		{
			name:  "later replica on zfs (zvols read zeros)",
			in:    SeedInput{NodeID: 1, Provider: backing.ProviderZFS, Volumes: []SeedVolume{{0, day0Hex, false}}},
			own:   day0Hex + "::::1:1",
			other: day0Hex + ":::::",
		},
		{
			name:  "later replica on lvm_thin",
			in:    SeedInput{NodeID: 1, Provider: backing.ProviderLVMThin, Volumes: []SeedVolume{{0, day0Hex, false}}},
			own:   day0Hex + "::::1:1",
			other: day0Hex + ":::::",
		},
		{
			name:  "later replica on file_thin",
			in:    SeedInput{NodeID: 1, Provider: backing.ProviderFileThin, Volumes: []SeedVolume{{0, day0Hex, false}}},
			own:   day0Hex + "::::1:1",
			other: day0Hex + ":::::",
		},
		{
			name:     "later replica on thick lvm",
			in:       SeedInput{NodeID: 1, Provider: backing.ProviderLVM, Volumes: []SeedVolume{{0, day0Hex, false}}},
			fullSync: true,
		},
		{
			name:     "later replica on a preallocated file",
			in:       SeedInput{NodeID: 1, Provider: backing.ProviderFile, Volumes: []SeedVolume{{0, day0Hex, false}}},
			fullSync: true,
		},
		{
			name:     "later replica with force_initial_sync",
			in:       SeedInput{NodeID: 1, Provider: backing.ProviderZFSThin, ForceInitialSync: true, Volumes: []SeedVolume{{0, day0Hex, false}}},
			fullSync: true,
		},
		{
			name:     "tiebreaker promoted to diskful",
			in:       SeedInput{NodeID: 2, Provider: backing.ProviderZFSThin, FromDiskless: true, Volumes: []SeedVolume{{0, day0Hex, false}}},
			fullSync: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seeds, fullSync, err := PlanSeeds(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if fullSync != tt.fullSync {
				t.Fatalf("fullSync = %v, want %v", fullSync, tt.fullSync)
			}
			if tt.own == "" {
				if len(seeds) != 0 {
					t.Fatalf("seeds %v, want none", seeds)
				}
				return
			}
			by := seedsByNode(t, seeds, 0)
			if len(by) != MaxNodeID+1 || len(seeds) != MaxNodeID+1 {
				t.Fatalf("%d seeds, want one per node id 0..31", len(seeds))
			}
			for n := 0; n <= MaxNodeID; n++ {
				want := tt.other
				if n == tt.in.NodeID {
					want = tt.own
				}
				if by[n] != want {
					t.Errorf("node id %d: GI %q, want %q", n, by[n], want)
				}
			}
			for i := 1; i < len(seeds); i++ {
				if seeds[i].NodeID <= seeds[i-1].NodeID {
					t.Fatalf("seeds not ordered by node id: %v", seeds)
				}
			}
		})
	}
}

func TestPlanSeedsPerVolume(t *testing.T) {
	// Volume 0 starts on this replica; volume 1 already holds data elsewhere and this
	// replica is on thick storage: volume 0 is seeded, volume 1 syncs fully.
	seeds, fullSync, err := PlanSeeds(SeedInput{NodeID: 1, Provider: backing.ProviderLVM, Rand: fixedRand(),
		Volumes: []SeedVolume{{0, day0Hex, true}, {1, "2222222222222222", false}}})
	if err != nil {
		t.Fatal(err)
	}
	if !fullSync || len(seedsByNode(t, seeds, 0)) != 32 || len(seedsByNode(t, seeds, 1)) != 0 {
		t.Fatalf("fullSync %v, seeds %v", fullSync, seeds)
	}
	// Two first volumes draw two current UUIDs.
	seeds, _, err = PlanSeeds(SeedInput{NodeID: 0, Provider: backing.ProviderZFSThin, Rand: &seqReader{[]uint64{0x100, 0x200}},
		Volumes: []SeedVolume{{0, day0Hex, true}, {1, day0Hex, true}}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := seedsByNode(t, seeds, 0)[0], seedsByNode(t, seeds, 1)[0]; !strings.HasPrefix(a, "0000000000000100:") || !strings.HasPrefix(b, "0000000000000200:") {
		t.Fatalf("own seeds %q %q", a, b)
	}
}

func TestPlanSeedsFirstCurrentNeverDay0(t *testing.T) {
	// The random source first yields the day-0 UUID itself: drawn again.
	seeds, _, err := PlanSeeds(SeedInput{NodeID: 0, Provider: backing.ProviderZFSThin, Volumes: []SeedVolume{{0, day0Hex, true}},
		Rand: &seqReader{[]uint64{0x1234567890ABCDE0, 0x1234567890ABCDE1, 0x42}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := seedsByNode(t, seeds, 0)[0]; got != "0000000000000042:"+day0Hex+":::1:1" {
		t.Fatalf("own seed %q", got)
	}
}

func TestPlanSeedsErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    SeedInput
		field string
		msg   string
	}{
		{"node id too big", SeedInput{NodeID: 32}, "node_id", "node id must be 0..31"},
		{"negative node id", SeedInput{NodeID: -1}, "node_id", "node id must be 0..31"},
		{"day0 not hex", SeedInput{Volumes: []SeedVolume{{0, "xyz", false}}}, "volumes[0].day0_gi", "1 to 16 hex digits"},
		{"day0 odd", SeedInput{Volumes: []SeedVolume{{0, "3", false}}}, "volumes[0].day0_gi", "must be even"},
		{"day0 is UUID_JUST_CREATED", SeedInput{Volumes: []SeedVolume{{0, "4", false}}}, "volumes[0].day0_gi", "UUID_JUST_CREATED"},
		{"day0 missing", SeedInput{Volumes: []SeedVolume{{0, "", false}}}, "volumes[0].day0_gi", "hex digits"},
		{"first without rand", SeedInput{Volumes: []SeedVolume{{0, day0Hex, true}}}, "rand", "needs a random source"},
		{"volume twice", SeedInput{Volumes: []SeedVolume{{0, day0Hex, false}, {0, day0Hex, false}}}, "volumes[1].number", "volume 0 is listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := PlanSeeds(tt.in)
			if fe := cairn.FieldError(err, tt.field); fe == nil || !strings.Contains(fe.Message, tt.msg) {
				t.Fatalf("PlanSeeds = %v, want invalid_argument on %s saying %q", err, tt.field, tt.msg)
			}
		})
	}
}

func TestPlanSeedsRandFails(t *testing.T) {
	_, _, err := PlanSeeds(SeedInput{Volumes: []SeedVolume{{0, day0Hex, true}}, Rand: &seqReader{}})
	if err == nil || !strings.Contains(err.Error(), "planning the seeds of volume 0: drawing a day-0 UUID: EOF") {
		t.Fatalf("PlanSeeds with an exhausted random source = %v", err)
	}
}

func TestMaxPeers(t *testing.T) {
	for _, tt := range []struct{ replicas, want int }{
		{1, 7}, {2, 7}, {3, 7}, {7, 7}, {8, 8}, {20, 20}, {31, 31}, {32, 31}, {100, 31},
	} {
		if got := MaxPeers(tt.replicas); got != tt.want {
			t.Errorf("MaxPeers(%d) = %d, want %d", tt.replicas, got, tt.want)
		}
		// Always a spare slot beyond the peers, up to DRBD's limit.
		if got := MaxPeers(tt.replicas); tt.replicas <= 31 && got < tt.replicas {
			t.Errorf("MaxPeers(%d) = %d leaves no spare slot", tt.replicas, got)
		}
	}
}
