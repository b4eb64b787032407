package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-io/cairn/internal/fsx"
	"golang.org/x/sys/unix"
)

// File keeps volumes as image files <Dir>/<name>.img: preallocated (provider file) or
// sparse (file_thin, Thin set). The path Create returns is the image file: drbdmeta
// works on it directly, while DRBD attaches block devices only: put a loop device over
// it with Loop.Attach (and Loop.Detach before Remove).
type File struct {
	Dir  string
	Thin bool
}

var _ Provider = (*File)(nil)

// zeroChunk is the write size of the zero-filling fallback when fallocate is refused.
const zeroChunk = 1 << 20

// Path is <Dir>/<name>.img.
func (f *File) Path(name string) string { return filepath.Join(f.Dir, name+".img") }

// Create makes the image file, creating Dir if needed. A thin file is sparse (it
// takes no blocks until written); a thick one has every block allocated, by
// fallocate or, where the file system refuses it, by writing zeros. The file appears
// under its name only once complete (written to a temporary name, synced, renamed), so
// a crash never leaves a short image that a later Create would reuse. An existing
// file of exactly sizeKiB is reused as it is; another size, or a directory or device
// under that name, is an error wrapping ErrMismatch.
func (f *File) Create(ctx context.Context, name string, sizeKiB uint64) (string, error) {
	if err := checkCreate(name, sizeKiB); err != nil {
		return "", err
	}
	if sizeKiB > 1<<53 {
		return "", fmt.Errorf("volume %s: size_kib %d is too large", name, sizeKiB)
	}
	path := f.Path(name)
	size := int64(sizeKiB) * 1024
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("volume %s: %s exists and is not a regular file: %w", name, path, ErrMismatch)
		}
		if fi.Size() != size {
			return "", mismatch(name, uint64(fi.Size()), sizeKiB, "")
		}
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	if err := os.MkdirAll(f.Dir, 0o750); err != nil {
		return "", fmt.Errorf("volume %s: pool directory: %w", name, err)
	}
	tmp, err := os.CreateTemp(f.Dir, "."+name+".img.*.tmp")
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if f.Thin {
		err = tmp.Truncate(size)
	} else {
		err = preallocate(ctx, tmp, size)
	}
	if err != nil {
		return "", fmt.Errorf("volume %s: allocate %d KiB in %s: %w", name, sizeKiB, f.Dir, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	ok = true
	_ = fsx.SyncDir(f.Dir) // best effort: the volume is there either way
	return path, nil
}

// preallocate allocates every block of f up to size: fallocate, or zeros written in
// chunks (checking ctx) where the file system does not support it.
func preallocate(ctx context.Context, f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("fallocate: %w", err)
	}
	return zeroFill(ctx, f, size)
}

// zeroFill writes zeros to f up to size, a chunk at a time, stopping when ctx ends.
func zeroFill(ctx context.Context, f *os.File, size int64) error {
	buf := make([]byte, zeroChunk)
	for off := int64(0); off < size; off += zeroChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(zeroChunk), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes the image file; a missing file is not an error.
func (f *File) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := os.Remove(f.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	_ = fsx.SyncDir(f.Dir) // best effort: the volume is there either way
	return nil
}

// Exists reports whether the image file exists (a missing Dir means no volume).
func (f *File) Exists(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	_, err := os.Stat(f.Path(name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("volume %s: %w", name, err)
	}
}
