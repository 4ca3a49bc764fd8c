package gittest

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// FakePAT is a GitHub personal access token shaped string, distinct for
// each tag and as varied as a real one: gitleaks' github-pat rule (the
// built-in rules are gitleaks') wants more than 3 bits of entropy per
// character, which a repeated pattern does not have. It is built at run
// time, so that test files hold no token-shaped literal.
func FakePAT(tag string) string {
	sum := sha256.Sum256([]byte("gitfleet test token " + tag))
	body := strings.NewReplacer("+", "x", "/", "y", "=", "").Replace(base64.StdEncoding.EncodeToString(sum[:]))
	return "gh" + "p_" + (tag + body)[:36]
}
