package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSealOpenAndKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "secrets.key")
	k, err := LoadOrCreate(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	s, err := k.Seal("wJalrXUtnFEMI")
	require.NoError(t, err)
	require.NotContains(t, s.Ciphertext, "wJalrXUtnFEMI")
	s2, _ := k.Seal("wJalrXUtnFEMI")
	require.NotEqual(t, s.Ciphertext, s2.Ciphertext, "a fresh nonce per seal")

	again, err := LoadOrCreate(path) // the same file: the same key
	require.NoError(t, err)
	got, err := again.Open(s)
	require.NoError(t, err)
	require.Equal(t, "wJalrXUtnFEMI", got)

	other, err := LoadOrCreate(filepath.Join(t.TempDir(), "other.key"))
	require.NoError(t, err)
	_, err = other.Open(s)
	require.ErrorIs(t, err, ErrOtherKey)
	require.Contains(t, err.Error(), s.KeyID)

	tampered := s
	tampered.Ciphertext = s2.Ciphertext[:len(s2.Ciphertext)-4] + "AAAA"
	_, err = k.Open(tampered)
	require.Error(t, err)

	require.NoError(t, os.WriteFile(path, []byte("not hex\n"), 0o600))
	_, err = LoadOrCreate(path)
	require.ErrorContains(t, err, "64 hex digits")
	require.True(t, strings.HasPrefix(k.ID(), s.KeyID[:4]))
}
