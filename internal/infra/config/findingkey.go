package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gitfleet/internal/domain/scan"
)

// FindingKey is the key of the findings' secret hashes and its version
// (architecture §11). It lives outside the database: whoever reads a dump
// of the database must not be able to test guesses of a short secret
// against its hash.
type FindingKey struct {
	// Version numbers the installation's keys, from 1; a new key gets a
	// new version, which starts a new scope on every repository (its
	// secrets hashed again under the new key on its next scan).
	Version int
	// Secret is the key itself: never logged.
	Secret []byte
}

// String says which version the key is, never the key.
func (k FindingKey) String() string { return "finding key v" + strconv.Itoa(k.Version) }

// ErrNoFindingKey is FindingKey's error when neither setting is set.
var ErrNoFindingKey = errors.New("no key for the findings' hashes: set " + EnvHashKeyFile +
	" to a file that holds it (or " + EnvHashKey + " to the key itself). It is not kept in the database: " +
	"make one with 'starter admin finding-key new --out FILE'; an installation upgraded from a release that kept it " +
	"there exports that one with 'starter admin finding-key export --out FILE' (docs/architecture.md §11)")

// FindingKey returns the findings' key: the one GITFLEET_FINDING_KEY
// holds, or the one in the file GITFLEET_FINDING_KEY_FILE names, read
// now. Workers need it and refuse to start without it (ErrNoFindingKey).
func (c Config) FindingKey() (FindingKey, error) {
	if c.hashKey != "" {
		return ParseFindingKey(c.hashKey)
	}
	if c.HashKeyFile == "" {
		return FindingKey{}, ErrNoFindingKey
	}
	k, err := ReadFindingKeyFile(c.HashKeyFile)
	if err != nil {
		return FindingKey{}, fmt.Errorf("%s: %w", EnvHashKeyFile, err)
	}
	return k, nil
}

// ReadFindingKeyFile reads the finding key in a file (ParseFindingKey).
func ReadFindingKeyFile(path string) (FindingKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return FindingKey{}, err
	}
	k, err := ParseFindingKey(string(b))
	if err != nil {
		return FindingKey{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ParseFindingKey reads a finding key as GITFLEET_FINDING_KEY or its file
// holds it, surrounding white space ignored: "v<version>:" (optional:
// version 1), then "base64:" and the key in standard base64, or the key
// as it is (at least 16 bytes either way). The version being part of the
// key, a rotation changes both at once on every worker given the file.
func ParseFindingKey(s string) (FindingKey, error) {
	s = strings.TrimSpace(s)
	k := FindingKey{Version: 1}
	// A key set before versions is taken whole, unless it starts like a
	// version ("v" and digits, then ":").
	if v, rest, ok := strings.Cut(s, ":"); ok && len(v) > 1 && v[0] == 'v' && strings.Trim(v[1:], "0123456789") == "" {
		n, err := strconv.Atoi(v[1:])
		if err != nil || n < 1 || n > 1_000_000 {
			return FindingKey{}, fmt.Errorf("finding key: version %q: want v1, v2…", v)
		}
		k.Version, s = n, rest
	}
	if b64, ok := strings.CutPrefix(s, "base64:"); ok {
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return FindingKey{}, errors.New("finding key: not base64 after \"base64:\"")
		}
		k.Secret = b
	} else {
		k.Secret = []byte(s)
	}
	if len(k.Secret) < scan.MinHashKeyLen {
		return FindingKey{}, fmt.Errorf("finding key: at least %d bytes", scan.MinHashKeyLen)
	}
	return k, nil
}

// Format writes k as ParseFindingKey reads it ("v2:base64:…"), for a
// key file.
func (k FindingKey) Format() string {
	return "v" + strconv.Itoa(k.Version) + ":base64:" + base64.StdEncoding.EncodeToString(k.Secret)
}

// NewFindingKey is a fresh random key of 32 bytes with version v.
func NewFindingKey(v int) FindingKey {
	k := FindingKey{Version: v, Secret: make([]byte, 32)}
	if _, err := rand.Read(k.Secret); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return k
}
