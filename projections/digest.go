package projections

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
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
	for _, prefix := range []string{string(prefixViews), string(prefixExpect)} {
		err := v.scan(prefix, func(key string, val []byte) error {
			binary.BigEndian.PutUint64(lenBuf[:], uint64(len(key)))
			h.Write(lenBuf[:])
			h.Write([]byte(key))
			binary.BigEndian.PutUint64(lenBuf[:], uint64(len(val)))
			h.Write(lenBuf[:])
			h.Write(val)
			d.Keys++
			return nil
		})
		if err != nil {
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
		var x any
		if err := json.Unmarshal(val, &x); err != nil {
			return fmt.Errorf("view %s: %w", key, err)
		}
		out[key] = x
		return nil
	})
	return out, err
}

func unmarshalInto(key string, val []byte, v any) error {
	if err := json.Unmarshal(val, v); err != nil {
		return fmt.Errorf("view %s: %w", key, err)
	}
	return nil
}
