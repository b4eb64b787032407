package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-io/cairn/projections"
)

// The operator's capacity of a thin pool is what it holds; it promises that times the
// over-provisioning ratio, as a reported total does (issue 28: a file_thin pool was
// charged the full size of every replica against its capacity). A thick pool promises
// its capacity.
func TestAThinPoolPromisesItsCapacityTimesTheRatio(t *testing.T) {
	thin := projections.StoragePool{Provider: "file_thin", CapacityKiB: 10 << 20, AllocatedKiB: 30 << 20}
	assert.Equal(t, uint64(170<<20), thin.FreeKiB(), "20 x 10 GiB promised, 30 GiB given to disks")
	thin.Overprovision = 2
	assert.Equal(t, uint64(0), thin.FreeKiB(), "2 x 10 GiB is less than what disks took")
	thin.AllocatedKiB = 5 << 20
	assert.Equal(t, uint64(15<<20), thin.FreeKiB())
	thin.Reported = &projections.CapacityReport{TotalKiB: 100 << 20, FreeKiB: 1 << 20, At: time.Now()}
	assert.Equal(t, uint64(2<<20), thin.FreeKiB(), "the report's free x ratio is smaller")

	thick := projections.StoragePool{Provider: "lvm", CapacityKiB: 10 << 20, AllocatedKiB: 4 << 20}
	assert.Equal(t, uint64(6<<20), thick.FreeKiB())
}
