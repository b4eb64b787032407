package projections

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A value written whole is encoded at the commit or when read, and a later write or
// deletion of its key in the same transaction wins over it.
func TestTxLazyValuesReadBackAndLoseToLaterWrites(t *testing.T) {
	db, err := OpenInMem()
	require.NoError(t, err)
	defer db.Close()
	tx := newTx(db)
	read := func(key string) string {
		t.Helper()
		v, err := tx.Get([]byte(key))
		require.NoError(t, err)
		return string(v)
	}

	a := NodeStatus{State: "online", Reason: "a", Seq: 1}
	require.NoError(t, tx.put("k/read", a))
	require.Equal(t, string(a.appendJSON(nil)), read("k/read"), "read back before the commit")
	b := NodeStatus{State: "offline", Reason: "b", Seq: 2}
	require.NoError(t, tx.put("k/read", b), "rewritten whole after a read")

	require.NoError(t, tx.put("k/raw", a))
	tx.putUint("k/raw", 7)
	require.NoError(t, tx.put("k/del", a))
	tx.del("k/del")
	require.NoError(t, tx.put("k/kept", HostEntry{Host: "h", StorageNodes: 1}))
	keys, err := tx.keysWithPrefix("k/")
	require.NoError(t, err)
	require.Equal(t, []string{"k/kept", "k/raw", "k/read"}, keys)

	tx.seq = 1
	require.NoError(t, tx.commit())
	tx = newTx(db) // nothing cached: the store's values
	require.Equal(t, string(b.appendJSON(nil)), read("k/read"))
	require.Equal(t, string(encodeUint(7)), read("k/raw"))
	require.Equal(t, "", read("k/del"))
	require.Equal(t, string(HostEntry{Host: "h", StorageNodes: 1}.appendJSON(nil)), read("k/kept"))
}

// The digest is SHA-256 over every view key and value in key order, each preceded by its
// length as 8 big-endian bytes; the checkpoint and observed status are not part of it.
// Enough data to span several of the hashing goroutine's blocks.
func TestDigestHashesLengthPrefixedKeysAndValuesInOrder(t *testing.T) {
	db, err := OpenInMem()
	require.NoError(t, err)
	defer db.Close()
	tx := newTx(db)
	type kv struct{ k, v string }
	var want []kv
	for i := range 3000 {
		k, v := fmt.Sprintf("v/test/%05d", i), strings.Repeat(fmt.Sprint(i%10), 200+i%7)
		tx.putRaw(k, []byte(v))
		want = append(want, kv{k, v})
	}
	tx.putRaw("x/subj/a", encodeUint(9))
	want = append(want, kv{"x/subj/a", string(encodeUint(9))})
	tx.seq = 42
	require.NoError(t, tx.commit())
	require.NoError(t, db.PutStatus(KindDRBD, "n1", "r1", []byte(`{"x":1}`)))

	h := sha256.New()
	for _, e := range want {
		for _, p := range []string{e.k, e.v} {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			h.Write(n[:])
			h.Write([]byte(p))
		}
	}
	d, err := db.Digest()
	require.NoError(t, err)
	require.Equal(t, Digest{Seq: 42, Keys: len(want), SHA256: hex.EncodeToString(h.Sum(nil))}, d)
}
