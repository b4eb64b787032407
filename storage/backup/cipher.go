package backup

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Cipher encrypts a remote's chunks on the client (optional, per remote: its encryption
// passphrase). It is convergent: a chunk's name is an HMAC-SHA256 of its content under a
// key derived from the passphrase, and its AES-256-GCM nonce comes from that name, so the
// same content under the same passphrase is the same chunk — backups of one remote still
// share chunks and incrementals still send only what changed — while the store sees
// neither the content nor its plain hash. What it does see: which chunks are zeros (they
// are not stored), the sizes, and which chunks two backups share.
type Cipher struct {
	nameKey []byte
	aead    cipher.AEAD
	check   string
}

// Encryption is what a manifest says about its chunks' encryption.
type Encryption struct {
	// Scheme names the construction (EncryptionScheme).
	Scheme string `json:"scheme"`
	// KeyCheck tells a wrong passphrase from corrupt data: an HMAC of a fixed string.
	KeyCheck string `json:"key_check"`
}

// EncryptionScheme is the one construction this version writes and reads.
const EncryptionScheme = "pbkdf2-sha256-600000/hmac-sha256-names/aes-256-gcm"

// NewCipher derives the cipher of a passphrase (PBKDF2-SHA256, 600,000 iterations, a
// fixed salt: the same passphrase gives the same keys on every cluster, which is what a
// restore into a new cluster needs). It takes a fraction of a second.
func NewCipher(passphrase string) (*Cipher, error) {
	if len(passphrase) < 8 {
		return nil, errors.New("encryption passphrase: at least 8 characters")
	}
	keys, err := pbkdf2.Key(sha256.New, passphrase, []byte("cairn-backup-v1"), 600000, 64)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(keys[32:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	c := &Cipher{nameKey: keys[:32], aead: aead}
	c.check = hex.EncodeToString(c.mac([]byte("cairn key check"))[:8])
	return c, nil
}

func (c *Cipher) mac(b []byte) []byte {
	m := hmac.New(sha256.New, c.nameKey)
	m.Write(b)
	return m.Sum(nil)
}

// Encryption is what manifests written with c record.
func (c *Cipher) Encryption() *Encryption {
	return &Encryption{Scheme: EncryptionScheme, KeyCheck: c.check}
}

// name returns a chunk's name (hex) and nonce from its content.
func (c *Cipher) name(plain []byte) (string, []byte) {
	sum := c.mac(plain)
	return hex.EncodeToString(sum), sum[:c.aead.NonceSize()]
}

// seal encrypts a chunk.
func (c *Cipher) seal(plain []byte) (name string, sealed []byte) {
	name, nonce := c.name(plain)
	return name, c.aead.Seal(nil, nonce, plain, []byte(name))
}

// open decrypts chunk name and checks that its content has that name.
func (c *Cipher) open(name string, sealed []byte) ([]byte, error) {
	raw, err := hex.DecodeString(name)
	if err != nil || len(raw) < c.aead.NonceSize() {
		return nil, fmt.Errorf("chunk %s: not a chunk name", name)
	}
	plain, err := c.aead.Open(nil, raw[:c.aead.NonceSize()], sealed, []byte(name))
	if err != nil {
		return nil, fmt.Errorf("chunk %s: does not decrypt (corrupt on the store): %w", name, err)
	}
	if got, _ := c.name(plain); got != name {
		return nil, fmt.Errorf("chunk %s: content hashes to %s (corrupt on the store)", name, got)
	}
	return plain, nil
}

// Encrypted is a Store whose chunks are encrypted with a Cipher (nil: not encrypted).
type Encrypted interface {
	Cipher() *Cipher
}

// cipherOf returns st's cipher, if it has one.
func cipherOf(st Store) *Cipher {
	if e, ok := st.(Encrypted); ok {
		return e.Cipher()
	}
	return nil
}

// chunkCipher is the cipher m's chunks are read with (nil: plain chunks), or an error
// when st cannot read them (no passphrase, another one).
func chunkCipher(st Store, m Manifest) (*Cipher, error) {
	if err := checkKey(st, m); err != nil || m.Encryption == nil {
		return nil, err
	}
	return cipherOf(st), nil
}

// checkKey refuses to read manifest m from st when their encryption does not match.
func checkKey(st Store, m Manifest) error {
	c := cipherOf(st)
	switch {
	case m.Encryption == nil && c == nil:
		return nil
	case m.Encryption == nil:
		return nil // a backup taken before the remote had a passphrase: plain chunks
	case c == nil:
		return fmt.Errorf("backup %s of %s is encrypted: the remote needs its encryption passphrase: %w", m.ID, m.Resource, ErrPermanent)
	case m.Encryption.Scheme != EncryptionScheme:
		return fmt.Errorf("backup %s of %s: encryption %q: this version reads %q: %w", m.ID, m.Resource, m.Encryption.Scheme, EncryptionScheme, ErrPermanent)
	case m.Encryption.KeyCheck != c.check:
		return fmt.Errorf("backup %s of %s was encrypted with another passphrase: %w", m.ID, m.Resource, ErrPermanent)
	}
	return nil
}
