package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memStore is an in-memory Store for the format's unit tests (the end-to-end tests run
// against a real S3 server, test/backup_test.go). failAfter, when > 0, makes every Put
// after that many fail, as a store going away does.
type memStore struct {
	mu        sync.Mutex
	objs      map[string][]byte
	mod       map[string]time.Time
	puts      int
	failAfter int
}

func newMem() *memStore { return &memStore{objs: map[string][]byte{}, mod: map[string]time.Time{}} }

func (m *memStore) Put(_ context.Context, key string, data []byte, sum [32]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failAfter > 0 && m.puts >= m.failAfter {
		return errors.New("connection refused")
	}
	if sha256.Sum256(data) != sum {
		return fmt.Errorf("checksum mismatch: %w", ErrPermanent)
	}
	m.puts++
	m.objs[key] = bytes.Clone(data)
	m.mod[key] = time.Now()
	return nil
}

func (m *memStore) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return bytes.Clone(b), nil
}

func (m *memStore) List(_ context.Context, prefix string) ([]Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Object
	for k, b := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Object{Key: k, Size: int64(len(b)), Modified: m.mod[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *memStore) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

func (m *memStore) chunks() int {
	objs, _ := m.List(context.Background(), chunkPrefix)
	return len(objs)
}

// image is a volume image of n chunks plus a partial one: data in the first half of
// the chunks, zeros in the rest (a thin volume).
func image(t *testing.T, n int) []byte {
	b := make([]byte, n*ChunkSize+4096)
	_, err := rand.Read(b[:n/2*ChunkSize])
	require.NoError(t, err)
	return b
}

func upload(st Store, id, base string, img []byte, known map[string]bool, journal string) (string, Progress, error) {
	u := &Upload{Store: st, Known: known, Journal: journal,
		Manifest: Manifest{ID: id, Resource: "r1", Snapshot: id, Base: base, CreatedAt: time.Now().UTC(),
			Volumes: []VolumeManifest{{Number: 0, SizeKiB: uint64(len(img) / 1024)}}},
		Open: func(int) (io.ReaderAt, error) { return bytes.NewReader(img), nil }}
	return u.Run(context.Background())
}

func restored(t *testing.T, st Store, id, sum string) []byte {
	m, _, err := ReadManifest(context.Background(), st, "r1", id, sum)
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(t.TempDir(), "img"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, Restore(context.Background(), st, m, m.Volumes[0], f, false, 3, nil))
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	return b
}

func TestFullIncrementalRestore(t *testing.T) {
	st := newMem()
	img := image(t, 40)
	sum, p, err := upload(st, "b1", "", img, nil, "")
	require.NoError(t, err)
	require.Equal(t, int64(20), p.ChunksSent, "the 20 chunks with data")
	require.Equal(t, int64(21), p.ChunksZero, "20 chunks of zeros and the tail are not sent")
	require.Equal(t, img, restored(t, st, "b1", sum))

	// 1 of 40 chunks changes: an incremental sends that one only.
	m1, _, _ := ReadManifest(context.Background(), st, "r1", "b1", sum)
	img2 := bytes.Clone(img)
	copy(img2[5*ChunkSize+100:], []byte("changed"))
	sum2, p2, err := upload(st, "b2", "b1", img2, m1.StoredChunks(), "")
	require.NoError(t, err)
	require.Equal(t, int64(1), p2.ChunksSent)
	require.Equal(t, int64(ChunkSize), p2.BytesSent)
	require.Equal(t, img2, restored(t, st, "b2", sum2), "an incremental restores whole")
	require.Equal(t, img, restored(t, st, "b1", sum), "its base unchanged")

	list, err := List(context.Background(), st, "")
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "b1", list[1].Base)

	// Deleting the base keeps every chunk the incremental names; then deleting it too
	// leaves none (grace 0).
	n, err := Delete(context.Background(), st, "r1", "b1", 0, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n, "only b1's chunk that b2 changed")
	require.Equal(t, img2, restored(t, st, "b2", sum2))
	_, err = Delete(context.Background(), st, "r1", "b2", 0, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Zero(t, st.chunks())
}

func TestInterruptedUploadLeavesNoBackupAndResumes(t *testing.T) {
	st := newMem()
	st.failAfter = 7
	img := image(t, 40)
	journal := filepath.Join(t.TempDir(), "journal")
	_, p, err := upload(st, "b1", "", img, nil, journal)
	require.Error(t, err)
	require.Less(t, p.ChunksSent, int64(20))
	list, err := List(context.Background(), st, "")
	require.NoError(t, err)
	require.Empty(t, list, "no manifest: no backup listed")
	_, _, err = ReadManifest(context.Background(), st, "r1", "b1", "")
	require.ErrorIs(t, err, ErrNotFound)

	st.failAfter = 0
	sum, p, err := upload(st, "b1", "", img, nil, journal)
	require.NoError(t, err)
	require.Equal(t, int64(20-7), p.ChunksSent, "the resumed upload sends only what the first did not")
	require.Equal(t, img, restored(t, st, "b1", sum))
}

func TestCorruptChunkIsFound(t *testing.T) {
	st := newMem()
	img := image(t, 8)
	sum, _, err := upload(st, "b1", "", img, nil, "")
	require.NoError(t, err)
	m, _, _ := ReadManifest(context.Background(), st, "r1", "b1", sum)
	bad := m.Volumes[0].Chunks[1]
	st.objs[ChunkKey(bad)][10] ^= 1

	found, p, err := Verify(context.Background(), st, m, nil)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Contains(t, found[bad], "corrupt")
	require.Equal(t, p.BytesTotal, p.BytesDone)

	f, _ := os.Create(filepath.Join(t.TempDir(), "img"))
	defer f.Close()
	err = Restore(context.Background(), st, m, m.Volumes[0], f, false, 2, nil)
	require.ErrorContains(t, err, "corrupt")

	// A manifest changed on the store does not pass for the one recorded.
	st.objs[ManifestKey("r1", "b1")] = append(st.objs[ManifestKey("r1", "b1")], ' ')
	_, _, err = ReadManifest(context.Background(), st, "r1", "b1", sum)
	require.ErrorContains(t, err, "changed on the store")
}

func TestManifestCheck(t *testing.T) {
	m := Manifest{Format: 1, ID: "b1", Resource: "r1", ChunkSize: ChunkSize, Volumes: []VolumeManifest{{SizeKiB: 2048, Chunks: []string{"", ""}}}}
	require.NoError(t, m.Check())
	m.Volumes[0].Chunks = []string{""}
	require.ErrorContains(t, m.Check(), "volumes[0]: 1 chunks for 2048 KiB, want 2")
	m.Volumes[0].Chunks = []string{"", "../x"}
	require.ErrorContains(t, m.Check(), "chunks[1]")
	m.Format = 2
	require.ErrorContains(t, m.Check(), "format 2")
}

// encStore is a memStore whose chunks are encrypted with c.
type encStore struct {
	*memStore
	c *Cipher
}

func (e encStore) Cipher() *Cipher { return e.c }

func TestEncryptedBackups(t *testing.T) {
	c, err := NewCipher("correct horse battery staple")
	require.NoError(t, err)
	mem := newMem()
	st := encStore{mem, c}
	img := image(t, 8)
	copy(img, []byte("PLAINTEXT-MARKER"))
	sum, p, err := upload(st, "b1", "", img, nil, "")
	require.NoError(t, err)
	require.Equal(t, int64(4), p.ChunksSent)
	require.Equal(t, p.BytesTotal, p.BytesDone)
	m, _, err := ReadManifest(context.Background(), st, "r1", "b1", sum)
	require.NoError(t, err)
	require.NotNil(t, m.Encryption)
	plainSum := sha256.Sum256(img[:ChunkSize])
	for key, obj := range mem.objs {
		require.NotContains(t, string(obj), "PLAINTEXT-MARKER", key)
		require.NotContains(t, key, fmt.Sprintf("%x", plainSum), "a chunk is named by its plain SHA-256")
	}
	require.Equal(t, img, restored(t, st, "b1", sum))
	bad, _, err := Verify(context.Background(), st, m, nil)
	require.NoError(t, err)
	require.Empty(t, bad)

	// Convergent: an incremental after one chunk changed sends one.
	img2 := bytes.Clone(img)
	img2[3*ChunkSize] ^= 1
	_, p2, err := upload(st, "b2", "b1", img2, m.StoredChunks(), "")
	require.NoError(t, err)
	require.Equal(t, int64(1), p2.ChunksSent)

	// Another passphrase, or none, cannot read it and says so.
	other, err := NewCipher("another passphrase")
	require.NoError(t, err)
	f, _ := os.Create(filepath.Join(t.TempDir(), "img"))
	defer f.Close()
	err = Restore(context.Background(), encStore{mem, other}, m, m.Volumes[0], f, false, 2, nil)
	require.ErrorContains(t, err, "another passphrase")
	_, _, err = Verify(context.Background(), mem, m, nil)
	require.ErrorContains(t, err, "needs its encryption passphrase")
	require.ErrorIs(t, err, ErrPermanent)

	// A chunk altered on the store does not decrypt.
	mem.objs[ChunkKey(m.Volumes[0].Chunks[0])][5] ^= 1
	bad, _, err = Verify(context.Background(), st, m, nil)
	require.NoError(t, err)
	require.Len(t, bad, 1)
	_, err = NewCipher("short")
	require.Error(t, err)
}
