package zfsimage

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FixturePath is the path of a real OpenZFS fixture leaf:
// storage/zfs/testdata/<image>/<leaf>.img.gz, wherever the caller's package is.
func FixturePath(image, leaf string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", image, leaf+".img.gz")
}

// Gunzip returns the whole content of the gzip file at src (a fixture leaf); any error
// fails the test.
func Gunzip(tb testing.TB, src string) []byte {
	tb.Helper()
	zr, closeSrc := openGzip(tb, src)
	defer closeSrc()
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatalf("gunzip %s: %v", src, err)
	}
	return b
}

// GunzipTo writes the content of the gzip file at src to dst (created or truncated).
func GunzipTo(tb testing.TB, src, dst string) {
	tb.Helper()
	zr, closeSrc := openGzip(tb, src)
	defer closeSrc()
	w, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(w, zr); err != nil {
		w.Close()
		tb.Fatalf("gunzip %s: %v", src, err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

func openGzip(tb testing.TB, src string) (io.Reader, func()) {
	tb.Helper()
	f, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		tb.Fatalf("gunzip %s: %v", src, err)
	}
	return zr, func() { f.Close() }
}
