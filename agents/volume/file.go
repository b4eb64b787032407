package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-io/cairn/agents/fsx"
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

// preallocate allocates every block of f up to size (see growAllocated).
func preallocate(ctx context.Context, f *os.File, size int64) error {
	return growAllocated(ctx, f, 0, size)
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

// Grow lengthens the image file to sizeKiB: sparse for file_thin, allocated for file
// (fallocate of the new range, or zeros), then synced. The caller (DRBD's resize, or
// drbdmeta check-resize while detached) moves internal metadata to the new end.
func (f *File) Grow(ctx context.Context, name string, sizeKiB uint64) error {
	if err := checkCreate(name, sizeKiB); err != nil {
		return err
	}
	path := f.Path(name)
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume %s: %s: %w", name, path, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	size := int64(sizeKiB) * 1024
	if fi.Size() >= size {
		return nil
	}
	if f.Thin {
		err = fh.Truncate(size)
	} else {
		err = growAllocated(ctx, fh, fi.Size(), size)
	}
	if err != nil {
		return fmt.Errorf("volume %s: grow to %d KiB in %s: %w", name, sizeKiB, f.Dir, err)
	}
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// growAllocated allocates the range [from, to) of f: fallocate, or zeros written where
// the file system does not support it.
func growAllocated(ctx context.Context, f *os.File, from, to int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, from, to-from)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("fallocate: %w", err)
	}
	return zeroFill(ctx, f, from, to)
}

// zeroFill writes zeros to f from from up to to, a chunk at a time, stopping when ctx
// ends.
func zeroFill(ctx context.Context, f *os.File, from, to int64) error {
	buf := make([]byte, zeroChunk)
	for off := from; off < to; off += zeroChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(zeroChunk), to-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
	return nil
}
