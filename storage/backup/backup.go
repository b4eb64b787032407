// Package backup is Cairn's backup format on an object store (S3): a volume image cut
// into fixed chunks stored once each under the SHA-256 of their content, and a manifest
// per backup naming its chunks, written after every chunk it names. So:
//   - a backup exists only when it is complete: no manifest, no backup, whatever
//     interrupted the upload (an agent killed, the store down);
//   - an interrupted upload resumes: the chunks already stored are not sent again
//     (Upload's journal);
//   - an incremental backup sends only the chunks the store lacks (Upload.Known holds the
//     base backup's), whatever the volume's back end: a block diff for free;
//   - every chunk is checked on the way in (the store verifies the SHA-256 it is sent
//     with) and on the way out (Restore and Verify hash what they read).
//
// Chunks that are all zeros are not stored (the manifest says so), so a thin volume's
// backup costs what it holds.
//
// Layout in the bucket:
//
//	cairn/chunks/<2 hex>/<sha256 hex>        the chunks
//	cairn/backups/<resource>/<id>.json       a backup's manifest
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ChunkSize is the size of every chunk but a volume's last (1 MiB).
const ChunkSize = 1 << 20

// Format is the manifest format this package writes and reads.
const Format = 1

// Store is an object store: keys to immutable objects.
type Store interface {
	// Put stores data under key; the store checks data against sum (its SHA-256) and
	// refuses it when they differ.
	Put(ctx context.Context, key string, data []byte, sum [32]byte) error
	// Get returns the object under key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes key; a key that does not exist is no error.
	Delete(ctx context.Context, key string) error
}

// Object is one listed object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// ErrNotFound: no object under the key.
var ErrNotFound = errors.New("no such object")

// ErrPermanent marks a store error that trying again will not cure (wrong credentials,
// a bucket that does not exist, a store refusing the data): a backup fails with it at
// once, where other errors are waited out.
var ErrPermanent = errors.New("not retried")

const (
	chunkPrefix    = "cairn/chunks/"
	manifestPrefix = "cairn/backups/"
)

// ChunkKey is the key of the chunk whose SHA-256 is sum (hex).
func ChunkKey(sum string) string { return chunkPrefix + sum[:2] + "/" + sum }

// ManifestKey is the key of backup id of resource.
func ManifestKey(resource, id string) string { return manifestPrefix + resource + "/" + id + ".json" }

// Manifest describes one complete backup.
type Manifest struct {
	Format   int    `json:"format"`
	ID       string `json:"id"`
	Resource string `json:"resource"`
	Snapshot string `json:"snapshot"`
	// Cluster is the name of the cluster that took it; Node the node that uploaded it.
	Cluster string `json:"cluster,omitempty"`
	Node    string `json:"node,omitempty"`
	// Base is the id of the backup this one is incremental to ("" for a full one): the
	// chunks they share were not sent again. A backup never needs its base to be
	// restored: the manifest names every chunk.
	Base      string           `json:"base,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	ChunkSize int              `json:"chunk_size"`
	Volumes   []VolumeManifest `json:"volumes"`
	// Encryption, when set, says the chunks are encrypted (Cipher) and named by an HMAC
	// of their content rather than its SHA-256.
	Encryption *Encryption `json:"encryption,omitempty"`
}

// VolumeManifest is one volume of a backup: its size and its chunks in order, each
// the SHA-256 (hex) of its content (an HMAC-SHA256 when encrypted), or "" for a chunk of
// zeros (not stored).
type VolumeManifest struct {
	Number  int      `json:"number"`
	SizeKiB uint64   `json:"size_kib"`
	Chunks  []string `json:"chunks"`
}

// SizeBytes is the volume's size in bytes.
func (v VolumeManifest) SizeBytes() int64 { return int64(v.SizeKiB) * 1024 }

// Chunks is how many chunks a volume of sizeKiB has.
func Chunks(sizeKiB uint64) int {
	return int((int64(sizeKiB)*1024 + ChunkSize - 1) / ChunkSize)
}

// Bytes is the backup's size: the sum of its volumes'.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, v := range m.Volumes {
		n += v.SizeBytes()
	}
	return n
}

// StoredChunks is the set of chunks the backup names (zeros excluded).
func (m Manifest) StoredChunks() map[string]bool {
	out := map[string]bool{}
	for _, v := range m.Volumes {
		for _, c := range v.Chunks {
			if c != "" {
				out[c] = true
			}
		}
	}
	return out
}

var (
	idRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$`)
	sumRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Check validates a manifest read from a store: format, names, chunk size, every
// volume's chunk count and every chunk name. The error names the field.
func (m Manifest) Check() error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("manifest format %d: this version reads format %d", m.Format, Format)
	case !idRE.MatchString(m.ID):
		return fmt.Errorf("manifest id %q: not a backup id", m.ID)
	case !idRE.MatchString(m.Resource):
		return fmt.Errorf("manifest resource %q: not a resource name", m.Resource)
	case m.ChunkSize != ChunkSize:
		return fmt.Errorf("manifest chunk_size %d: this version reads %d", m.ChunkSize, ChunkSize)
	case len(m.Volumes) == 0:
		return errors.New("manifest volumes: none")
	}
	for i, v := range m.Volumes {
		if want := Chunks(v.SizeKiB); len(v.Chunks) != want {
			return fmt.Errorf("manifest volumes[%d]: %d chunks for %d KiB, want %d", i, len(v.Chunks), v.SizeKiB, want)
		}
		for j, c := range v.Chunks {
			if c != "" && !sumRE.MatchString(c) {
				return fmt.Errorf("manifest volumes[%d].chunks[%d]: %q is not a SHA-256", i, j, c)
			}
		}
	}
	return nil
}

// Encode returns the manifest's bytes and their SHA-256 (hex), which the backup's
// event records so that a restore knows the manifest it reads is the one written.
func (m Manifest) Encode() ([]byte, string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// ReadManifest reads and checks backup id of resource from st. When wantSum is not
// empty the manifest's SHA-256 must be it. Errors wrap ErrNotFound for a backup that
// does not exist (or is not complete).
func ReadManifest(ctx context.Context, st Store, resource, id, wantSum string) (Manifest, string, error) {
	b, err := st.Get(ctx, ManifestKey(resource, id))
	if err != nil {
		return Manifest{}, "", fmt.Errorf("backup %s of %s: %w", id, resource, err)
	}
	sum := sha256.Sum256(b)
	got := hex.EncodeToString(sum[:])
	if wantSum != "" && got != wantSum {
		return Manifest{}, got, fmt.Errorf("backup %s of %s: manifest SHA-256 %s, the backup recorded %s (changed on the store)", id, resource, got, wantSum)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, got, fmt.Errorf("backup %s of %s: manifest: %w", id, resource, err)
	}
	if err := m.Check(); err != nil {
		return Manifest{}, got, fmt.Errorf("backup %s of %s: %w", id, resource, err)
	}
	if m.ID != id || m.Resource != resource {
		return Manifest{}, got, fmt.Errorf("backup %s of %s: the manifest there is %s of %s", id, resource, m.ID, m.Resource)
	}
	return m, got, nil
}

// Listed is one complete backup found on a store.
type Listed struct {
	Manifest
	SHA256 string `json:"sha256"`
}

// List returns every complete backup on st (resource "" for all), by resource and id.
// A manifest that does not read is reported in the error and left out.
func List(ctx context.Context, st Store, resource string) ([]Listed, error) {
	prefix := manifestPrefix
	if resource != "" {
		prefix += resource + "/"
	}
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []Listed
	var errs []error
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, manifestPrefix)
		rd, file, ok := strings.Cut(rest, "/")
		id, isJSON := strings.CutSuffix(file, ".json")
		if !ok || !isJSON || strings.Contains(id, "/") {
			continue
		}
		m, sum, err := ReadManifest(ctx, st, rd, id, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Listed{Manifest: m, SHA256: sum})
	}
	return out, errors.Join(errs...)
}
