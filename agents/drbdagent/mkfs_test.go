package drbdagent

import (
	"context"
	"os"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/test/testtools"
)

// TestMkfsAndTheSignatureGuard makes each filesystem type Cairn knows with the real
// tools in an image of a volume's size, and checks the guard on what blkid then finds:
// the same type counts as made, another is refused, nothing is made over it.
func TestMkfsAndTheSignatureGuard(t *testing.T) {
	testtools.Need(t, "mkfs.ext4", "mkfs.xfs", "blkid")
	ctx := context.Background()
	ex := &execx.Runner{Log: zerolog.Nop()}
	const sizeKiB = 320 << 10 // mkfs.xfs wants 300 MiB at least
	for _, typ := range []string{drbd.FilesystemExt4, drbd.FilesystemXFS} {
		t.Run(typ, func(t *testing.T) {
			o := drbd.FilesystemOrder{Volume: 0, Type: typ, Params: "-L vol0"}
			img, err := mkfsImage(ctx, ex, t.TempDir(), o, sizeKiB)
			require.NoError(t, err)
			defer os.Remove(img)
			sig, err := probeSignature(ctx, ex, img, sizeKiB*1024)
			require.NoError(t, err)
			assert.Equal(t, typ, sig)
			out, err := ex.Run(ctx, []string{"blkid", "-o", "value", "-s", "LABEL", img}, execx.Options{})
			require.NoError(t, err)
			assert.Equal(t, "vol0\n", string(out), "MkfsParams reach mkfs")

			mk, err := checkSignature(sig, o)
			assert.NoError(t, err)
			assert.False(t, mk, "the same type: made before, not made again")
			other := drbd.FilesystemOrder{Type: drbd.FilesystemXFS}
			if typ == drbd.FilesystemXFS {
				other.Type = drbd.FilesystemExt4
			}
			mk, err = checkSignature(sig, other)
			assert.False(t, mk)
			assert.ErrorContains(t, err, "never makes a filesystem ("+other.Type+") over data")
		})
	}
	empty, err := os.CreateTemp(t.TempDir(), "empty")
	require.NoError(t, err)
	require.NoError(t, empty.Truncate(sizeKiB*1024))
	require.NoError(t, empty.Close())
	sig, err := probeSignature(ctx, ex, empty.Name(), sizeKiB*1024)
	require.NoError(t, err)
	assert.Empty(t, sig)

	_, err = mkfsArgv(drbd.FilesystemOrder{Type: drbd.FilesystemXFS, User: "root"}, "/dev/null")
	assert.ErrorContains(t, err, "ext4 only")
	argv, err := mkfsArgv(drbd.FilesystemOrder{Type: drbd.FilesystemExt4, User: "0", Group: "0", Params: "-m 0"}, "/dev/drbd1000")
	require.NoError(t, err)
	assert.Equal(t, []string{"mkfs.ext4", "-q", "-F", "-E", "nodiscard,root_owner=0:0", "-m", "0", "/dev/drbd1000"}, argv)
}
