package s3store

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/storage/backup"
)

// Data that does not hash to the SHA-256 given is refused before anything is sent (the
// endpoint here answers nothing), and an endpoint that is no URL is refused by New.
func TestPutChecksTheHashFirst(t *testing.T) {
	st, err := New(Config{Endpoint: "http://127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s", PathStyle: true})
	require.NoError(t, err)
	err = st.Put(context.Background(), "k", []byte("data"), sha256.Sum256([]byte("other")))
	require.ErrorIs(t, err, backup.ErrPermanent)
	require.ErrorContains(t, err, "does not hash")
	_, err = New(Config{Endpoint: "ftp://x/y"})
	require.ErrorContains(t, err, "must be http(s)://host[:port]")
}
