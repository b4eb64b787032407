package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cairn-io/cairn/storage/backing"
	"github.com/stretchr/testify/require"
)

// allocated returns the bytes the file system allocated for path.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	return st.Blocks * 512
}

// The same contract on both file providers, for real.
func TestFileProviders(t *testing.T) {
	const sizeKiB = 8192 // 8 MiB
	ctx := context.Background()
	for _, provider := range []backing.Provider{backing.ProviderFile, backing.ProviderFileThin} {
		t.Run(string(provider), func(t *testing.T) {
			root := t.TempDir()
			p, err := For(provider, "/pool1", root, nil)
			require.NoError(t, err)
			name := backing.VolumeName("r1", 0)
			path := filepath.Join(root, "pool1", "r1_00000.img")
			require.Equal(t, path, p.Path(name))

			ok, err := p.Exists(ctx, name)
			require.NoError(t, err)
			require.False(t, ok, "exists before create (pool directory missing)")

			got, err := p.Create(ctx, name, sizeKiB)
			require.NoError(t, err)
			require.Equal(t, path, got)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, int64(sizeKiB*1024), fi.Size())
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
			if provider == backing.ProviderFileThin {
				require.Less(t, allocated(t, path), int64(64<<10), "thin file is not sparse")
			} else {
				require.GreaterOrEqual(t, allocated(t, path), int64(sizeKiB*1024), "thick file is not preallocated")
			}
			entries, err := os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			require.Len(t, entries, 1, "temporary files left behind")

			ok, err = p.Exists(ctx, name)
			require.NoError(t, err)
			require.True(t, ok)

			// Idempotent: the same size is reused, untouched (data survives).
			require.NoError(t, os.WriteFile(path+".marker", nil, 0o600))
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("drbd"), 4096)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			got, err = p.Create(ctx, name, sizeKiB)
			require.NoError(t, err)
			require.Equal(t, path, got)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, "drbd", string(b[4096:4100]))

			// Another size is refused, never resized.
			_, err = p.Create(ctx, name, sizeKiB*2)
			require.ErrorIs(t, err, ErrMismatch)
			require.EqualError(t, err, "volume r1_00000: exists with 8192 KiB, want 16384 KiB: existing volume does not fit (resize or remove it by hand)")
			fi, err = os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, int64(sizeKiB*1024), fi.Size())

			// A second volume next to it.
			_, err = p.Create(ctx, backing.VolumeName("r1", 1), 1)
			require.NoError(t, err)

			require.NoError(t, p.Remove(ctx, name))
			_, err = os.Stat(path)
			require.True(t, errors.Is(err, os.ErrNotExist))
			require.NoError(t, p.Remove(ctx, name), "remove twice")
			ok, err = p.Exists(ctx, name)
			require.NoError(t, err)
			require.False(t, ok)
			ok, err = p.Exists(ctx, backing.VolumeName("r1", 1))
			require.NoError(t, err)
			require.True(t, ok)
		})
	}
}

func TestFileRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := &File{Dir: dir}
	_, err := f.Create(ctx, "../escape", 4)
	require.ErrorContains(t, err, `volume name "../escape": must be`)
	_, err = f.Create(ctx, "r1_00000", 0)
	require.EqualError(t, err, "volume r1_00000: size_kib must be > 0")
	require.Error(t, f.Remove(ctx, "a/b"))
	_, err = f.Exists(ctx, "")
	require.Error(t, err)

	require.NoError(t, os.Mkdir(f.Path("r2_00000"), 0o700))
	_, err = f.Create(ctx, "r2_00000", 4)
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "is not a regular file")

	// A pool directory that cannot be created.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o600))
	_, err = (&File{Dir: filepath.Join(dir, "file", "sub")}).Create(ctx, "r3_00000", 4)
	require.ErrorContains(t, err, "volume r3_00000: ")
	require.ErrorContains(t, err, "not a directory")
}

// The zero-filling fallback (file systems without fallocate) allocates every block
// and stops when its context ends.
func TestZeroFill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	size := int64(zeroChunk*2 + 4096)
	require.NoError(t, zeroFill(context.Background(), f, 0, size))
	fi, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, size, fi.Size())
	require.GreaterOrEqual(t, allocated(t, path), size)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, zeroFill(ctx, f, 0, size), context.Canceled)
}

// Grow on both file providers, for real: data kept, thin stays sparse, thick is
// allocated, a smaller or equal size changes nothing, a missing file is ErrNotFound.
func TestFileGrow(t *testing.T) {
	ctx := context.Background()
	for _, provider := range []backing.Provider{backing.ProviderFile, backing.ProviderFileThin} {
		t.Run(string(provider), func(t *testing.T) {
			p, err := For(provider, "/pool1", t.TempDir(), nil)
			require.NoError(t, err)
			name := backing.VolumeName("r1", 0)
			path, err := p.Create(ctx, name, 4096)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, append(make([]byte, 4096), []byte("keep")...), 0o600))
			require.NoError(t, os.Truncate(path, 4096*1024))

			require.NoError(t, p.Grow(ctx, name, 8192))
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, int64(8192*1024), fi.Size())
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, "keep", string(b[4096:4100]), "data lost by the grow")
			if provider == backing.ProviderFileThin {
				require.Less(t, allocated(t, path), int64(64<<10), "thin file grew allocated")
			} else {
				require.GreaterOrEqual(t, allocated(t, path)-allocated(t, path)%4096, int64(4096*1024), "thick file's new range is not allocated")
			}

			require.NoError(t, p.Grow(ctx, name, 4096), "a smaller size is no shrink")
			require.NoError(t, p.Grow(ctx, name, 8192), "the same size again")
			fi, err = os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, int64(8192*1024), fi.Size())
			require.ErrorIs(t, p.Grow(ctx, backing.VolumeName("r9", 0), 8192), ErrNotFound)
		})
	}
}
