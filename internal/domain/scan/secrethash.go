package scan

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// SecretHash is the keyed hash a finding of secret records under this
// scanner's key version: a check that reads a secret again from its blob
// makes sure it is the one the finding hashed.
func (s *Scanner) SecretHash(secret []byte) string {
	mac := hmac.New(sha256.New, s.hashKey)
	mac.Write(secret)
	return hex.EncodeToString(mac.Sum(nil))
}
