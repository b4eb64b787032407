package projections

import (
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
