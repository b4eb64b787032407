package projections

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
	json "github.com/segmentio/encoding/json"
)

// Digest identifies the content of every view at a checkpoint. Two stores hold the same
// views exactly when their digests are equal.
type Digest struct {
	Seq    uint64 `json:"seq"`
	Keys   int    `json:"keys"`
	SHA256 string `json:"sha256"`
}

// Digest hashes every view key and value (the v/ and x/ key spaces; the checkpoint is
// reported as Seq) from one consistent snapshot: SHA-256 over each key and value in key
// order, each preceded by its length as 8 big-endian bytes.
func (db *DB) Digest() (Digest, error) {
	v, err := db.Read()
	if err != nil {
		return Digest{}, err
	}
	defer v.Close()
	d := Digest{Seq: v.Seq()}
	// Reading the store and hashing take about as long each after a big rebuild (which
	// prints the digest): the iteration fills blocks that another goroutine hashes.
	const blockSize = 256 << 10
	full := make(chan []byte, 2)
	free := make(chan []byte, 3)
	for range 3 {
		free <- make([]byte, 0, blockSize)
	}
	sum := make(chan []byte, 1)
	go func() {
		h := sha256.New()
		for b := range full {
			h.Write(b)
			free <- b[:0]
		}
		sum <- h.Sum(nil)
	}()
	block := <-free
	var lenBuf [8]byte
	appendBytes := func(p []byte) {
		binary.BigEndian.PutUint64(lenBuf[:], uint64(len(p)))
		block = append(append(block, lenBuf[:]...), p...)
	}
	var iterErr error
	for _, prefix := range [][]byte{prefixViews, prefixExpect} {
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			iterErr = err
			break
		}
		for it.First(); it.Valid(); it.Next() {
			appendBytes(it.Key())
			appendBytes(it.Value())
			d.Keys++
			if len(block) >= blockSize {
				full <- block
				block = <-free
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			iterErr = err
			break
		}
	}
	full <- block
	close(full)
	digest := <-sum
	if iterErr != nil {
		return Digest{}, iterErr
	}
	d.SHA256 = hex.EncodeToString(digest)
	return d, nil
}

// Dump returns every view key and its value (JSON values decoded), for `views at`.
func (db *DB) Dump() (map[string]any, error) {
	v, err := db.Read()
	if err != nil {
		return nil, err
	}
	defer v.Close()
	out := map[string]any{}
	err = v.scan(string(prefixViews), func(key string, val []byte) error {
		out[key] = dumpValue(val)
		return nil
	})
	return out, err
}

// dumpValue renders one stored view value: JSON as it is, the 8-byte big-endian
// integers of sequences and counters (subject boundaries, allocator keys) as numbers,
// plain text (the owner of an allocated port) as a string, anything else as
// {"hex": …}.
func dumpValue(val []byte) any {
	var x any
	if json.Valid(val) && json.Unmarshal(val, &x) == nil {
		return x
	}
	if len(val) == 8 && !utf8.Valid(val) || len(val) == 8 && val[0] == 0 {
		return binary.BigEndian.Uint64(val)
	}
	if utf8.Valid(val) {
		return string(val)
	}
	return map[string]string{"hex": hex.EncodeToString(val)}
}

func unmarshalInto(key string, val []byte, v any) error {
	if err := json.Unmarshal(val, v); err != nil {
		return fmt.Errorf("view %s: %w", key, err)
	}
	return nil
}
