package volume

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// CanReflink reports whether the file system of dir clones files (the FICLONE ioctl,
// what `cp --reflink` uses): it clones a small file it creates there and removes both.
// false with a nil error means the file system has no reflinks (EOPNOTSUPP, EINVAL,
// EXDEV, ENOTTY); an error means dir could not be tried.
func CanReflink(dir string) (bool, error) {
	src, err := os.CreateTemp(dir, ".cairn-reflink-*")
	if err != nil {
		return false, fmt.Errorf("reflink probe in %s: %w", dir, err)
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.Write(make([]byte, 4096)); err != nil {
		return false, fmt.Errorf("reflink probe in %s: %w", dir, err)
	}
	dst, err := os.CreateTemp(dir, ".cairn-reflink-*")
	if err != nil {
		return false, fmt.Errorf("reflink probe in %s: %w", dir, err)
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTTY):
		return false, nil
	}
	return false, fmt.Errorf("reflink probe in %s: %w", dir, err)
}
