package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyEnv is the environment variable that holds the key.
const KeyEnv = "GITFLEET_TOKEN_KEY"

// ErrNoKey means no key was configured.
var ErrNoKey = errors.New(KeyEnv + " is not set: tokens cannot be stored or read without it " +
	"(generate one with `openssl rand -base64 32`; `starter dev` writes one into its data directory)")

// Box seals and opens values with one key.
type Box struct {
	aead        cipher.AEAD
	fingerprint string
}

// NewKey returns a fresh key in the text form ParseKey reads.
func NewKey() string {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.StdEncoding.EncodeToString(k)
}

// ParseKey reads a 32-byte key written as standard base64 or hex. An empty
// text is ErrNoKey.
func ParseKey(text string) (*Box, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, ErrNoKey
	}
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(key) != 32 {
		if h, herr := hex.DecodeString(text); herr == nil && len(h) == 32 {
			key, err = h, nil
		}
	}
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s must be 32 bytes in base64 or hex (got %d characters)", KeyEnv, len(text))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("gitfleet token key\x00"), key...))
	return &Box{aead: aead, fingerprint: hex.EncodeToString(sum[:4])}, nil
}

// Fingerprint names the key without revealing it.
func (b *Box) Fingerprint() string { return b.fingerprint }

// Seal encrypts plaintext bound to context (for example "user:42"). The
// result is fingerprint ‖ nonce ‖ ciphertext.
func (b *Box) Seal(plaintext []byte, context string) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out := append([]byte(b.fingerprint), nonce...)
	return b.aead.Seal(out, nonce, plaintext, []byte(context))
}

// Open decrypts what Seal sealed under the same context.
func (b *Box) Open(sealed []byte, context string) ([]byte, error) {
	fp := len(b.fingerprint)
	if len(sealed) < fp+b.aead.NonceSize()+b.aead.Overhead() {
		return nil, errors.New("sealed value is truncated")
	}
	if got := string(sealed[:fp]); got != b.fingerprint {
		return nil, fmt.Errorf("sealed with another key (fingerprint %s; %s has %s)", got, KeyEnv, b.fingerprint)
	}
	nonce := sealed[fp : fp+b.aead.NonceSize()]
	plain, err := b.aead.Open(nil, nonce, sealed[fp+b.aead.NonceSize():], []byte(context))
	if err != nil {
		return nil, fmt.Errorf("sealed value does not open (corrupt, or sealed for another row): %w", err)
	}
	return plain, nil
}
