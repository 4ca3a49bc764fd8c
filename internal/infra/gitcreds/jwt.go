package gitcreds

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// An App authenticates as itself with a JWT (RS256) whose issuer is its
// id, issued a minute in the past (GitHub's advice against clock drift)
// and valid for 9 minutes (GitHub takes at most 10).
const (
	jwtBackdate = time.Minute
	jwtLifetime = 9 * time.Minute
)

// signJWT returns the App's JWT at now.
func signJWT(key *rsa.PrivateKey, appID int64, now time.Time) (string, error) {
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": strconv.FormatInt(appID, 10),
		"iat": now.Add(-jwtBackdate).Unix(),
		"exp": now.Add(jwtLifetime).Unix(),
	})
	in := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign the App's JWT: %w", err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// ParseKey reads an App's private key as GitHub lets one download it
// (PEM, PKCS#1 "RSA PRIVATE KEY"), or PKCS#8. The error never quotes the
// file's content.
func ParseKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("not a PEM private key")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not an RSA private key (PKCS#1 or PKCS#8, %s block)", block.Type)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an RSA private key", k)
	}
	return rk, nil
}
