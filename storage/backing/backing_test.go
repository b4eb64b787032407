package backing

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVolumeName(t *testing.T) {
	assert.Equal(t, "pvc-1_00000", VolumeName("pvc-1", 0))
	assert.Equal(t, "r1_00012", VolumeName("r1", 12))
	assert.Equal(t, "r1_123456", VolumeName("r1", 123456))
}

// The thin providers are the ones docs/resources.md lets start at day 0 ("Safe
// initial-sync skip") and snapshot ("Snapshots").
func TestThinProviders(t *testing.T) {
	thin := map[Provider]bool{ProviderLVMThin: true, ProviderZFS: true, ProviderZFSThin: true, ProviderFileThin: true}
	for _, p := range Providers {
		assert.True(t, p.Valid(), p)
		assert.Equal(t, thin[p], p.Thin(), p)
		assert.Equal(t, thin[p], p.ZeroesUnwritten(), p)
		assert.Equal(t, thin[p], CanSnapshot(p), p)
	}
	assert.False(t, Provider("lvm-thin").Valid())
}
