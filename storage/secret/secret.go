// Package secret seals the secrets Cairn keeps in its events (an S3 remote's secret
// key) with a key held outside the event history: AES-256-GCM under a 32-byte key read
// from a file. The history then holds only ciphertext and the key's id, so an auditor
// replaying it, `cairn audit`, or a copy of the streams never shows a secret, and
// losing the key file makes the sealed secrets unreadable (enter them again).
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sealed is a secret as events hold it: the id of the key that sealed it and the
// nonce followed by the ciphertext, base64 (standard encoding).
type Sealed struct {
	KeyID      string `json:"key_id"`
	Ciphertext string `json:"ciphertext"`
}

// Key seals and opens secrets.
type Key struct {
	id   string
	aead cipher.AEAD
}

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// New returns the key of the 32 bytes raw. Its id is the first 8 bytes of their
// SHA-256, hex: enough to tell keys apart in an error, nothing about the key.
func New(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("secrets key: must be %d bytes, got %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	return &Key{id: hex.EncodeToString(sum[:8]), aead: aead}, nil
}

// ID is the key's id (what Sealed.KeyID holds).
func (k *Key) ID() string { return k.id }

// LoadOrCreate reads the key file at path: 64 hex digits (surrounding white space is
// ignored). When the file does not exist it writes a new random key there (mode 0600,
// its directory created) and returns it; every serve of a cluster must be given the
// same file. Errors: unreadable file, not 64 hex digits.
func LoadOrCreate(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		raw := make([]byte, KeySize)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) { // created by another process meanwhile
			return LoadOrCreate(path)
		}
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(hex.EncodeToString(raw) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		return New(raw)
	}
	if err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != KeySize {
		return nil, fmt.Errorf("secrets key %s: must hold %d hex digits", path, 2*KeySize)
	}
	return New(raw)
}

// Seal encrypts plaintext under a fresh random nonce.
func (k *Key) Seal(plaintext string) (Sealed, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, err
	}
	out := k.aead.Seal(nonce, nonce, []byte(plaintext), []byte(k.id))
	return Sealed{KeyID: k.id, Ciphertext: base64.StdEncoding.EncodeToString(out)}, nil
}

// ErrOtherKey is returned by Open for a secret sealed with another key.
var ErrOtherKey = errors.New("sealed with another secrets key")

// Open decrypts s. Errors: ErrOtherKey (naming both key ids), a ciphertext that is not
// base64 or fails authentication (altered).
func (k *Key) Open(s Sealed) (string, error) {
	if s.KeyID != k.id {
		return "", fmt.Errorf("secret %w (key id %s; this serve's key is %s: give every serve the same --secrets-key file, or enter the secret again)", ErrOtherKey, s.KeyID, k.id)
	}
	b, err := base64.StdEncoding.DecodeString(s.Ciphertext)
	if err != nil || len(b) < k.aead.NonceSize() {
		return "", errors.New("sealed secret: not base64 ciphertext")
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, b[:n], b[n:], []byte(k.id))
	if err != nil {
		return "", fmt.Errorf("sealed secret: %w", err)
	}
	return string(plain), nil
}
