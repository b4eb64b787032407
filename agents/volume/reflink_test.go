package volume

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CanReflink agrees with coreutils: `cp --reflink=always` succeeds exactly where the
// file system clones files (ext4 and tmpfs: no; btrfs, XFS with reflink=1: yes).
func TestCanReflinkAgreesWithCp(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		d, err := os.MkdirTemp(dir, "reflink")
		require.NoError(t, err)
		defer os.RemoveAll(d)
		can, err := CanReflink(d)
		require.NoError(t, err)
		src := filepath.Join(d, "src")
		require.NoError(t, os.WriteFile(src, make([]byte, 8192), 0o644))
		cpErr := exec.Command("cp", "--reflink=always", src, filepath.Join(d, "dst")).Run()
		assert.Equal(t, cpErr == nil, can, "%s: CanReflink says %v, cp --reflink=always: %v", dir, can, cpErr)
		entries, err := os.ReadDir(d)
		require.NoError(t, err)
		for _, e := range entries {
			assert.NotContains(t, e.Name(), ".cairn-reflink", "the probe left a file behind")
		}
		t.Logf("%s: reflinks %v", dir, can)
	}
	_, err := CanReflink(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}
