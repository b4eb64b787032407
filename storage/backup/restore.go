package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// getChunk reads chunk sum (decrypted with c, when set) and checks its content against
// its name.
func getChunk(ctx context.Context, st Store, c *Cipher, sum string) ([]byte, error) {
	b, err := st.Get(ctx, ChunkKey(sum))
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sum, err)
	}
	if c != nil {
		plain, err := c.open(sum, b)
		if err == nil && len(plain) > ChunkSize {
			err = fmt.Errorf("chunk %s: %d bytes, more than a chunk", sum, len(plain))
		}
		return plain, err
	}
	got := sha256.Sum256(b)
	if hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("chunk %s: content hashes to %s (corrupt on the store)", sum, hex.EncodeToString(got[:]))
	}
	if len(b) > ChunkSize {
		return nil, fmt.Errorf("chunk %s: %d bytes, more than a chunk", sum, len(b))
	}
	return b, nil
}

// RestoreWorkers is how many chunks a restore reads at once by default: the hash check
// and the write run beside the GETs, so more are in flight than an upload needs
// (BenchmarkBackupS3: restore_vs_raw_get).
const RestoreWorkers = 8

// Restore writes volume v of backup m into w (the first SizeKiB bytes), every chunk
// checked against its SHA-256 before it is written, workers chunks at a time
// (RestoreWorkers when 0). Chunks of zeros are written as zeros unless zeroed (w reads zeros where nothing
// was written: a new sparse file, a thin volume). onProgress, when set, is called
// after every chunk, from one goroutine at a time.
func Restore(ctx context.Context, st Store, m Manifest, v VolumeManifest, w io.WriterAt, zeroed bool, workers int, onProgress func(Progress)) error {
	ciph, err := chunkCipher(st, m)
	if err != nil {
		return err
	}
	if workers <= 0 {
		workers = RestoreWorkers
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		p        = Progress{BytesTotal: v.SizeBytes()}
		wg       sync.WaitGroup
	)
	idx := make(chan int)
	zeros := make([]byte, ChunkSize)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				off := int64(i) * ChunkSize
				size := min(int64(ChunkSize), v.SizeBytes()-off)
				err := func() error {
					if v.Chunks[i] == "" {
						if zeroed {
							return nil
						}
						_, err := w.WriteAt(zeros[:size], off)
						return err
					}
					b, err := getChunk(ctx, st, ciph, v.Chunks[i])
					if err != nil {
						return err
					}
					if int64(len(b)) != size {
						return fmt.Errorf("chunk %s: %d bytes where volume %d's chunk %d has %d", v.Chunks[i], len(b), v.Number, i, size)
					}
					_, err = w.WriteAt(b, off)
					return err
				}()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				if err == nil {
					p.BytesDone += size
					if onProgress != nil {
						onProgress(p)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range v.Chunks {
		select {
		case idx <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(idx)
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("volume %d: %w", v.Number, firstErr)
	}
	return ctx.Err()
}

// Verify reads every chunk backup m names and checks its hash and size. It returns
// the chunks that are missing or corrupt (each with why) and the progress; err is an
// error that stopped it (ctx, the store).
func Verify(ctx context.Context, st Store, m Manifest, onProgress func(Progress)) (bad map[string]string, p Progress, err error) {
	ciph, err := chunkCipher(st, m)
	if err != nil {
		return nil, p, err
	}
	sizes := map[string]int64{}
	for _, v := range m.Volumes {
		for c, sum := range v.Chunks {
			if sum != "" {
				sizes[sum] = min(int64(ChunkSize), v.SizeBytes()-int64(c)*ChunkSize)
			}
		}
	}
	sums := make([]string, 0, len(sizes))
	for s := range sizes {
		sums = append(sums, s)
		p.BytesTotal += sizes[s]
	}
	sort.Strings(sums)
	bad = map[string]string{}
	for _, sum := range sums {
		if err := ctx.Err(); err != nil {
			return bad, p, err
		}
		b, err := getChunk(ctx, st, ciph, sum)
		switch {
		case err != nil:
			bad[sum] = err.Error()
		case int64(len(b)) != sizes[sum]:
			bad[sum] = fmt.Sprintf("%d bytes, the backup needs %d", len(b), sizes[sum])
		}
		p.BytesDone += sizes[sum]
		if onProgress != nil {
			onProgress(p)
		}
	}
	return bad, p, nil
}

// ChunkGrace is how old an unreferenced chunk must be before Delete removes it by
// default: a younger one may belong to an upload whose manifest is not written yet.
const ChunkGrace = time.Hour

// Delete removes backup id of resource: its manifest first (from then on it is not
// listed), then every chunk no other backup on the store names and that is older than
// grace (a chunk newer than that may belong to an upload under way, whose manifest is
// not written yet). It returns how many chunks it removed.
func Delete(ctx context.Context, st Store, resource, id string, grace time.Duration, now time.Time) (int, error) {
	if err := st.Delete(ctx, ManifestKey(resource, id)); err != nil {
		return 0, fmt.Errorf("backup %s of %s: %w", id, resource, err)
	}
	return Collect(ctx, st, grace, now)
}

// Collect removes every chunk that no backup on st names and that is older than grace.
// A manifest that cannot be read stops it (its chunks might be removed otherwise).
func Collect(ctx context.Context, st Store, grace time.Duration, now time.Time) (int, error) {
	all, err := List(ctx, st, "")
	if err != nil {
		return 0, fmt.Errorf("collect: %w", err)
	}
	used := map[string]bool{}
	for _, b := range all {
		for c := range b.StoredChunks() {
			used[c] = true
		}
	}
	chunks, err := st.List(ctx, chunkPrefix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range chunks {
		if len(o.Key) < 64 {
			continue
		}
		if sum := o.Key[len(o.Key)-64:]; used[sum] || now.Sub(o.Modified) < grace {
			continue
		}
		if err := st.Delete(ctx, o.Key); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
