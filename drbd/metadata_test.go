package drbd

import (
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/storage/backing"
)

func TestMetadataModel(t *testing.T) {
	m := NewMetadata()
	if got := m.GI(5).String(); got != "0000000000000004:0000000000000000:0000000000000000:0000000000000000:0:0:0:0:1:0:0:0:0:0:0:0" {
		t.Fatalf("just created GI %s", got)
	}
	seeds, _, err := PlanSeeds(SeedInput{NodeID: 1, Provider: backing.ProviderZFSThin, Volumes: []SeedVolume{{0, day0Hex, true}}, Rand: fixedRand()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(seeds, 0); err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= MaxNodeID; n++ {
		want := fmt.Sprintf("%s:%s:0000000000000000:0000000000000000:1:1:0:0:1:0:0:0:0:0:0:0", randomHex, day0Hex)
		if got := m.GI(n).String(); got != want {
			t.Errorf("node id %d: %s, want %s", n, got, want)
		}
	}
	if err := m.SetGI(32, GI{}); err == nil {
		t.Fatal("SetGI accepted node id 32")
	}
}

func TestBackingKiB(t *testing.T) {
	for _, size := range []uint64{4, 1000, 1 << 20, 10<<20 + 3, 100 << 20} {
		for _, mp := range []int{1, 7, 31} {
			b := BackingKiB(size, mp)
			if b%4 != 0 {
				t.Errorf("BackingKiB(%d, %d) = %d, not a multiple of 4 KiB", size, mp, b)
			}
			if UsableBytes(b<<10, mp) < size<<10 {
				t.Errorf("BackingKiB(%d, %d) = %d offers only %d bytes", size, mp, b, UsableBytes(b<<10, mp))
			}
			if b > 4 && UsableBytes((b-4)<<10, mp) >= size<<10 {
				t.Errorf("BackingKiB(%d, %d) = %d is not the smallest", size, mp, b)
			}
		}
	}
	// 1 GiB with 7 slots: the bitmaps cover the backing device, metadata included:
	// 1 GiB + 264 KiB has 262208 bits (64-aligned) x 7 = 228 KiB of bitmaps, plus 36 KiB.
	if got := BackingKiB(1<<20, 7); got != 1<<20+264 {
		t.Errorf("BackingKiB(1 GiB, 7) = %d, want %d", got, 1<<20+264)
	}
}
