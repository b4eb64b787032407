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
// reported as Seq) from one consistent snapshot.
func (db *DB) Digest() (Digest, error) {
	v, err := db.Read()
	if err != nil {
		return Digest{}, err
	}
	defer v.Close()
	h := sha256.New()
	d := Digest{Seq: v.Seq()}
	var lenBuf [8]byte
	for _, prefix := range [][]byte{prefixViews, prefixExpect} {
		// The iterator's own key and value bytes: no copy per key (millions after a
		// big rebuild, which prints the digest).
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return Digest{}, err
		}
		for it.First(); it.Valid(); it.Next() {
			key, val := it.Key(), it.Value()
			binary.BigEndian.PutUint64(lenBuf[:], uint64(len(key)))
			h.Write(lenBuf[:])
			h.Write(key)
			binary.BigEndian.PutUint64(lenBuf[:], uint64(len(val)))
			h.Write(lenBuf[:])
			h.Write(val)
			d.Keys++
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return Digest{}, err
		}
	}
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
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
