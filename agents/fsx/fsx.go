// Package fsx writes and removes the agents' small files durably: a crash or a power
// loss leaves either the old file or the new one, never a torn or vanished one.
package fsx

import (
	"os"
	"path/filepath"
)

// WriteAtomic writes data to path so that readers and a crash see either the old file
// or the new one: a temporary file in the same directory, fsync, rename, fsync of the
// directory.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	return SyncDir(dir)
}

// RemoveDurably removes path (a missing file is not an error) and fsyncs its directory.
func RemoveDurably(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs dir, making a rename or removal in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
