package drbdagent

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The simulated kernel's data model: the data of a simulated DRBD device is the first
// SizeKiB of its disk file (the internal metadata sits at the end). `cairn sim write`
// writes real blocks there on the writer's disk and on every diskful peer connected to
// it, as DRBD replicates a Primary's writes (whether the peer's own I/O is suspended or
// not); a sync copies the source's data to the target. The oracle: whenever a handshake
// declares two disks in sync without a resync, their data is compared byte for byte,
// and a difference is recorded on both ends of the connection (simSyncRec.Diverged) and
// logged. It does not share the GIs' assumption: it looks at the data only.

// dataChunk is the unit the data is compared and copied in.
const dataChunk = 1 << 20

// nextData returns the offset of the first byte at or after off that is not in a hole
// of f (SEEK_DATA), or end when there is none before end.
func nextData(f *os.File, off, end int64) int64 {
	n, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if err != nil {
		if errors.Is(err, unix.ENXIO) {
			return end // only a hole from off to the end of the file
		}
		return off // no SEEK_DATA here: read everything
	}
	return min(n, end)
}

// eachDataChunk calls fn with every dataChunk-aligned range of [0, n) that holds data
// in a or b; ranges that are holes in both (zeros in both) are skipped.
func eachDataChunk(a, b *os.File, n int64, fn func(off, size int64) error) error {
	for pos := int64(0); pos < n; {
		next := min(nextData(a, pos, n), nextData(b, pos, n))
		if next >= n {
			return nil
		}
		start := next &^ (dataChunk - 1)
		size := min(int64(dataChunk), n-start)
		if err := fn(start, size); err != nil {
			return err
		}
		pos = start + size
	}
	return nil
}

// readFull reads size bytes at off (zeros past the end of the file).
func readFull(f *os.File, buf []byte, off int64) error {
	clear(buf)
	_, err := f.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// compareData compares the first n bytes of the files a and b; it returns the offset
// of the first 4 KiB block that differs, or -1 when they are equal.
func compareData(a, b string, n int64) (int64, error) {
	fa, err := os.Open(a)
	if err != nil {
		return 0, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return 0, err
	}
	defer fb.Close()
	ba, bb := make([]byte, dataChunk), make([]byte, dataChunk)
	at := int64(-1)
	errEqual := errors.New("differ")
	err = eachDataChunk(fa, fb, n, func(off, size int64) error {
		if err := readFull(fa, ba[:size], off); err != nil {
			return err
		}
		if err := readFull(fb, bb[:size], off); err != nil {
			return err
		}
		if bytes.Equal(ba[:size], bb[:size]) {
			return nil
		}
		for i := int64(0); i < size; i += 4096 {
			if !bytes.Equal(ba[i:min(i+4096, size)], bb[i:min(i+4096, size)]) {
				at = off + i
				break
			}
		}
		return errEqual
	})
	if errors.Is(err, errEqual) {
		err = nil
	}
	return at, err
}

// copyData makes the first n bytes of dst those of src (a finished sync).
func copyData(src, dst string, n int64) error {
	fs, err := os.Open(src)
	if err != nil {
		return err
	}
	defer fs.Close()
	fd, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fd.Close()
	buf := make([]byte, dataChunk)
	return eachDataChunk(fs, fd, n, func(off, size int64) error {
		if err := readFull(fs, buf[:size], off); err != nil {
			return err
		}
		_, err := fd.WriteAt(buf[:size], off)
		return err
	})
}

// copyRange makes bytes [from, to) of dst those of src.
func copyRange(src, dst string, from, to int64) error {
	fs, err := os.Open(src)
	if err != nil {
		return err
	}
	defer fs.Close()
	fd, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.NewOffsetWriter(fd, from), io.NewSectionReader(fs, from, to-from)); err != nil {
		fd.Close()
		return err
	}
	return fd.Close()
}

// writeData writes data at off into every file of paths.
func writeData(paths []string, off int64, data []byte) error {
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(data, off)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// divergencesFile is the log of the data oracle's findings in the simulation directory.
const divergencesFile = ".divergences"

// recordDivergence appends one finding of the data oracle to dir's log (it outlives the
// connection and the resource).
func recordDivergence(dir, line string) error {
	f, err := os.OpenFile(filepath.Join(dir, divergencesFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SimDivergences lists every time a handshake under the simulation directory dir
// declared two disks in sync while their data differed (the data oracle), one line
// each; none is what every test of the simulated kernel expects.
func SimDivergences(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, divergencesFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n"), nil
}
