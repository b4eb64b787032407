package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/storage/backup/httpstore"
)

// BenchmarkShip: a backup shipped to another cluster (docs/backups.md "Shipping to
// another cluster"), against a real serve (its HTTP API and its received store on a
// JetStream object store, fsynced as the serve's streams are), each figure beside its
// raw counterpart measured in the same run with the same concurrency:
//   - ship: backup.Upload of a 256 MiB volume of random data through the serve's HTTP
//     API (httpstore), against raw PUTs of the same chunks into the object store from
//     the serve's own process (ship_vs_objstore_put: what the HTTP hop and the checks
//     cost over the store's bound);
//   - restore on the target: backup.Restore read the way the target's agents read, in
//     pieces through a serve over NATS (server.ReceivedReader), against raw GETs from
//     the object store (restore_vs_objstore_get), and against the bound of a GET
//     followed by its hash (restore_vs_serial_bound).
func BenchmarkShip(b *testing.B) {
	const chunks = 256
	size := int64(chunks * backup.ChunkSize)
	for range b.N {
		s := servertest.Start(b)
		for _, c := range [][2]string{
			{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
			{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		} {
			if r := servertest.Submit(s, c[0], c[1]); !r.OK {
				b.Fatalf("%s: %+v", c[0], r.Error)
			}
		}
		ctx := context.Background()
		img := make([]byte, size)
		if _, err := rand.Read(img); err != nil {
			b.Fatal(err)
		}
		target, err := httpstore.New(httpstore.Config{URL: "http://" + s.HTTPAddr}, nil)
		if err != nil {
			b.Fatal(err)
		}
		putRaw := func(round int) time.Duration {
			return timeIt(func() error {
				return eachOf(chunks, 4, func(i int) error {
					c := img[i*backup.ChunkSize : (i+1)*backup.ChunkSize]
					return s.Received.Put(ctx, fmt.Sprintf("raw%d/%03d", round, i), c, sha256.Sum256(c))
				})
			}, b)
		}
		getRaw := func() time.Duration {
			return timeIt(func() error {
				return eachOf(chunks, backup.RestoreWorkers, func(i int) error { _, err := s.Received.Get(ctx, fmt.Sprintf("raw0/%03d", i)); return err })
			}, b)
		}
		rawPut := putRaw(0)
		var sum string
		shipTook := timeIt(func() error {
			u := &backup.Upload{Store: target, Workers: 4,
				Manifest: backup.Manifest{ID: "full", Resource: "bench", Snapshot: "full", CreatedAt: time.Now().UTC(),
					Volumes: []backup.VolumeManifest{{Number: 0, SizeKiB: uint64(size / 1024)}}},
				Open: func(int) (io.ReaderAt, error) { return bytes.NewReader(img), nil }}
			var err error
			sum, _, err = u.Run(ctx)
			return err
		}, b)
		rawPut = (rawPut + putRaw(1)) / 2

		reader := server.ReceivedReader{NC: s.NC, Subject: events.NewNames("cairn").AgentReceived("n1")}
		m, _, err := backup.ReadManifest(ctx, reader, "bench", "full", sum)
		if err != nil {
			b.Fatal(err)
		}
		rawGet := getRaw()
		out := newWriterAt(size)
		restoreTook := timeIt(func() error { return backup.Restore(ctx, reader, m, m.Volumes[0], out, true, 0, nil) }, b)
		rawGet = (rawGet + getRaw()) / 2
		if !bytes.Equal(out.buf, img) {
			b.Fatal("the restored image differs")
		}
		hashTook := timeIt(func() error {
			for i := range chunks {
				sha256.Sum256(img[i*backup.ChunkSize : (i+1)*backup.ChunkSize])
			}
			return nil
		}, b)
		mib := float64(size) / (1 << 20)
		bound := 1 / (rawGet.Seconds()/mib + hashTook.Seconds()/mib)
		b.ReportMetric(bound, "restore_serial_bound_MiB/s")
		b.ReportMetric(mib/restoreTook.Seconds()/bound, "restore_vs_serial_bound")
		b.ReportMetric(mib/rawPut.Seconds(), "objstore_put_MiB/s")
		b.ReportMetric(mib/shipTook.Seconds(), "ship_MiB/s")
		b.ReportMetric(rawPut.Seconds()/shipTook.Seconds(), "ship_vs_objstore_put")
		b.ReportMetric(mib/rawGet.Seconds(), "objstore_get_MiB/s")
		b.ReportMetric(mib/restoreTook.Seconds(), "restore_MiB/s")
		b.ReportMetric(rawGet.Seconds()/restoreTook.Seconds(), "restore_vs_objstore_get")
	}
}

// writerAt is an io.WriterAt in memory.
type writerAt struct{ buf []byte }

func newWriterAt(size int64) *writerAt { return &writerAt{buf: make([]byte, size)} }

func (w *writerAt) WriteAt(p []byte, off int64) (int, error) { return copy(w.buf[off:], p), nil }
