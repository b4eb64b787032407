package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// Progress is how far an upload, a restore or a verification is.
type Progress struct {
	// BytesDone of BytesTotal bytes of the volumes were read (upload), written
	// (restore) or checked (verify).
	BytesDone  int64 `json:"bytes_done"`
	BytesTotal int64 `json:"bytes_total"`
	// ChunksSent and BytesSent are the chunks this upload put on the store (an
	// incremental or resumed one skips those the store has); ChunksSkipped those it
	// did not send because the store had them; ChunksZero the chunks of zeros.
	ChunksSent    int64 `json:"chunks_sent"`
	BytesSent     int64 `json:"bytes_sent"`
	ChunksSkipped int64 `json:"chunks_skipped"`
	ChunksZero    int64 `json:"chunks_zero"`
}

// Upload stores one backup: every volume's chunks, then the manifest.
type Upload struct {
	Store Store
	// Manifest is the backup to write: its names, and its volumes' numbers and sizes
	// (their chunks are filled in).
	Manifest Manifest
	// Open returns the image of a volume: its first SizeKiB are the data backed up.
	Open func(volume int) (io.ReaderAt, error)
	// Known are chunks the store holds already (the base backup's): not sent again.
	Known map[string]bool
	// Journal, when set, is a file recording every chunk this upload stored, read back
	// when it runs again: a resumed upload does not send them again.
	Journal string
	// Workers is how many chunks are sent at once (4).
	Workers int
	// OnProgress, when set, is called after every chunk (from one goroutine at a time).
	OnProgress func(Progress)
	// Throttle, when set, is called before a chunk of n bytes is sent and waits as long
	// as a bandwidth limit says (rate.Limiter.WaitN); its error stops the upload.
	Throttle func(ctx context.Context, n int) error
}

// Run uploads the backup and returns its manifest's SHA-256 and the progress at the
// end. The manifest is written last, after every chunk it names is stored: an error
// (ctx ended, the store failing) leaves no backup, only chunks a later Run reuses.
func (u *Upload) Run(ctx context.Context) (string, Progress, error) {
	m := u.Manifest
	m.Format, m.ChunkSize = Format, ChunkSize
	ciph := cipherOf(u.Store)
	if ciph != nil {
		m.Encryption = ciph.Encryption()
	}
	known := map[string]bool{}
	for c := range u.Known {
		known[c] = true
	}
	journal, err := openJournal(u.Journal)
	if err != nil {
		return "", Progress{}, err
	}
	defer journal.close()
	var p Progress
	for _, v := range m.Volumes {
		p.BytesTotal += v.SizeBytes()
	}
	workers := u.Workers
	if workers <= 0 {
		workers = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		data  []byte
		sum   string
		raw   [32]byte
		plain int64 // the chunk's size in the volume (data is larger when encrypted)
	}
	jobs := make(chan job)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		inFlight = map[string]bool{}
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		mu.Unlock()
	}
	report := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
		if u.OnProgress != nil {
			u.OnProgress(p)
		}
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if u.Throttle != nil {
					if err := u.Throttle(ctx, len(j.data)); err != nil {
						fail(err)
						continue
					}
				}
				if err := u.Store.Put(ctx, ChunkKey(j.sum), j.data, j.raw); err != nil {
					fail(fmt.Errorf("chunk %s: %w", j.sum, err))
					continue
				}
				if err := journal.add(j.sum); err != nil {
					fail(err)
					continue
				}
				report(func() { p.ChunksSent++; p.BytesSent += int64(len(j.data)); p.BytesDone += j.plain })
			}
		}()
	}
	readErr := func() error {
		defer close(jobs)
		for i := range m.Volumes {
			v := &m.Volumes[i]
			r, err := u.Open(v.Number)
			if err != nil {
				return fmt.Errorf("volume %d: %w", v.Number, err)
			}
			n := Chunks(v.SizeKiB)
			v.Chunks = make([]string, n)
			for c := 0; c < n; c++ {
				off := int64(c) * ChunkSize
				size := min(int64(ChunkSize), v.SizeBytes()-off)
				buf := make([]byte, size)
				if _, err := r.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("volume %d at %d: %w", v.Number, off, err)
				}
				if isZero(buf) {
					report(func() { p.ChunksZero++; p.BytesDone += size })
					continue
				}
				var sum string
				if ciph != nil {
					sum, buf = ciph.seal(buf) // named by an HMAC of the content; buf is what is stored
				} else {
					raw := sha256.Sum256(buf)
					sum = hex.EncodeToString(raw[:])
				}
				stored := sha256.Sum256(buf)
				v.Chunks[c] = sum
				mu.Lock()
				skip := known[sum] || inFlight[sum]
				inFlight[sum] = true
				mu.Unlock()
				if skip || journal.has(sum) {
					report(func() { p.ChunksSkipped++; p.BytesDone += size })
					continue
				}
				select {
				case jobs <- job{data: buf, sum: sum, raw: stored, plain: size}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	}()
	wg.Wait()
	if firstErr != nil {
		return "", p, firstErr
	}
	if readErr != nil {
		return "", p, readErr
	}
	b, sum, err := m.Encode()
	if err != nil {
		return "", p, err
	}
	if err := u.Store.Put(ctx, ManifestKey(m.Resource, m.ID), b, sha256.Sum256(b)); err != nil {
		return "", p, fmt.Errorf("manifest: %w", err)
	}
	return sum, p, nil
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// journal records the chunks an upload stored, one SHA-256 per line, so a resumed
// upload skips them. A line cut short by a crash is ignored.
type journal struct {
	mu   sync.Mutex
	f    *os.File
	seen map[string]bool
}

func openJournal(path string) (*journal, error) {
	j := &journal{seen: map[string]bool{}}
	if path == "" {
		return j, nil
	}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); sumRE.MatchString(line) {
				j.seen[line] = true
			}
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	j.f = f
	return j, nil
}

func (j *journal) has(sum string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seen[sum]
}

func (j *journal) add(sum string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seen[sum] = true
	if j.f == nil {
		return nil
	}
	_, err := j.f.WriteString(sum + "\n")
	return err
}

func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
	}
}
