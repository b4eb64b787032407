package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/storage/backup/s3store"
	"github.com/cairn-io/cairn/test/testtools"
)

// BenchmarkBackupS3: the backup format against a real S3 server (SeaweedFS on this
// machine), each figure beside its raw counterpart measured in the same run on the same
// server with the same concurrency (4 PUTs, backup.RestoreWorkers GETs at once), the raw
// runs before and after the measured one (their mean is the base):
//   - backup: a full backup (backup.Upload: read, hash, PUT with Content-MD5, journal,
//     manifest) of a 256 MiB volume of random data, against raw PUTs of the same 256
//     chunks of 1 MiB through the same client (backup_vs_raw_put);
//   - restore: backup.Restore of it into a file (GET, SHA-256 check, write) against raw
//     GETs of the same objects (restore_vs_raw_get), and against the bound of a GET
//     followed by its hash (restore_vs_serial_bound; sha256_MiB/s is one core's);
//   - incremental after 1 % of the volume changed, as 1 % of its 1 MiB chunks
//     (clustered writes: inc_clustered_sent_pct) and as 1 % of its 4 KiB blocks spread
//     uniformly (inc_scattered_sent_pct): bytes sent as a percentage of the volume.
func BenchmarkBackupS3(b *testing.B) {
	const chunks = 256
	size := int64(chunks * backup.ChunkSize)
	for range b.N {
		s3 := testtools.StartS3(b)
		st, err := s3store.New(s3store.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Region: "us-east-1", AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, PathStyle: true})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		img := make([]byte, size)
		if _, err := rand.Read(img); err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(b.TempDir(), "vol.img")
		if err := os.WriteFile(path, img, 0o644); err != nil {
			b.Fatal(err)
		}

		// The raw runs go before and after the measured one; their mean is the base
		// (the server's caches and the machine's other work are then on both sides).
		putRaw := func() time.Duration {
			return timeIt(func() error {
				return eachOf(chunks, 4, func(i int) error {
					c := img[i*backup.ChunkSize : (i+1)*backup.ChunkSize]
					return st.Put(ctx, fmt.Sprintf("raw/%03d", i), c, sha256.Sum256(c))
				})
			}, b)
		}
		getRaw := func() time.Duration {
			return timeIt(func() error {
				return eachOf(chunks, backup.RestoreWorkers, func(i int) error { _, err := st.Get(ctx, fmt.Sprintf("raw/%03d", i)); return err })
			}, b)
		}
		rawPut := putRaw()
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		upload := func(id, base string, known map[string]bool, r io.ReaderAt) (backup.Progress, string) {
			u := &backup.Upload{Store: st, Known: known, Workers: 4,
				Manifest: backup.Manifest{ID: id, Resource: "bench", Snapshot: id, Base: base, CreatedAt: time.Now().UTC(),
					Volumes: []backup.VolumeManifest{{Number: 0, SizeKiB: uint64(size / 1024)}}},
				Open: func(int) (io.ReaderAt, error) { return r, nil }}
			sum, p, err := u.Run(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return p, sum
		}
		var full backup.Progress
		var sum string
		backupTook := timeIt(func() error { full, sum = upload("full", "", nil, f); return nil }, b)
		f.Close()
		rawPut = (rawPut + putRaw()) / 2
		if full.BytesSent != size {
			b.Fatalf("the full backup sent %d bytes of %d", full.BytesSent, size)
		}

		rawGet := getRaw()
		m, _, err := backup.ReadManifest(ctx, st, "bench", "full", sum)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(b.TempDir(), "restored.img"))
		if err != nil {
			b.Fatal(err)
		}
		restoreTook := timeIt(func() error { return backup.Restore(ctx, st, m, m.Volumes[0], out, true, 0, nil) }, b)
		out.Close()
		rawGet = (rawGet + getRaw()) / 2
		got, _ := os.ReadFile(out.Name())
		if !bytes.Equal(got, img) {
			b.Fatal("the restored image differs")
		}

		// 1 % changed, clustered: 1 % of the chunks (one write each).
		clustered := bytes.Clone(img)
		for _, c := range mrand.Perm(chunks)[:max(1, chunks/100)] {
			clustered[c*backup.ChunkSize+17] ^= 0xff
		}
		pc, _ := upload("inc-clustered", "full", m.StoredChunks(), bytes.NewReader(clustered))
		// 1 % changed, scattered: 1 % of the 4 KiB blocks anywhere.
		scattered := bytes.Clone(img)
		blocks := int(size / 4096)
		for _, blk := range mrand.Perm(blocks)[:blocks/100] {
			scattered[blk*4096] ^= 0xff
		}
		ps, _ := upload("inc-scattered", "full", m.StoredChunks(), bytes.NewReader(scattered))

		// What checking costs: SHA-256 of the whole image on one core. A restore that
		// hashes every chunk it GETs, on a machine whose cores the server shares, is
		// bounded by 1/(1/raw_get + 1/sha256) when GET and hash do not overlap.
		hashTook := timeIt(func() error {
			for i := range chunks {
				sha256.Sum256(img[i*backup.ChunkSize : (i+1)*backup.ChunkSize])
			}
			return nil
		}, b)
		mib := float64(size) / (1 << 20)
		bound := 1 / (rawGet.Seconds()/mib + hashTook.Seconds()/mib)
		b.ReportMetric(mib/hashTook.Seconds(), "sha256_MiB/s")
		b.ReportMetric(bound, "restore_serial_bound_MiB/s")
		b.ReportMetric(mib/restoreTook.Seconds()/bound, "restore_vs_serial_bound")
		b.ReportMetric(mib/rawPut.Seconds(), "raw_put_MiB/s")
		b.ReportMetric(mib/backupTook.Seconds(), "backup_MiB/s")
		b.ReportMetric(rawPut.Seconds()/backupTook.Seconds(), "backup_vs_raw_put")
		b.ReportMetric(mib/rawGet.Seconds(), "raw_get_MiB/s")
		b.ReportMetric(mib/restoreTook.Seconds(), "restore_MiB/s")
		b.ReportMetric(rawGet.Seconds()/restoreTook.Seconds(), "restore_vs_raw_get")
		b.ReportMetric(100*float64(pc.BytesSent)/float64(size), "inc_clustered_sent_pct")
		b.ReportMetric(100*float64(ps.BytesSent)/float64(size), "inc_scattered_sent_pct")
	}
}

func timeIt(f func() error, b *testing.B) time.Duration {
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// eachOf runs f(0..n-1), workers at a time (parallel), and returns the first error.
func eachOf(n, workers int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	parallel(workers, n, func(i int) {
		if err := f(i); err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	return first
}
