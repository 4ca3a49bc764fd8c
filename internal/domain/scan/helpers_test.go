package scan

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// Secrets in these tests are built from parts at run time, so that the test
// files themselves contain no token-shaped strings.

const (
	upperChars  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lowerChars  = "abcdefghijklmnopqrstuvwxyz"
	digitChars  = "0123456789"
	alnumChars  = upperChars + lowerChars + digitChars
	hexChars    = "0123456789abcdef"
	b64Chars    = alnumChars + "+/"
	urlChars    = alnumChars + "_-"
	base32Chars = upperChars + "234567"
)

type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, 0x5eed))} }

// s is n random characters from alphabet.
func (g *gen) s(alphabet string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[g.r.IntN(len(alphabet))])
	}
	return b.String()
}

// mixed is n random alphanumerics that contain at least one digit, one
// upper- and one lower-case letter.
func (g *gen) mixed(n int) string {
	return g.s(alnumChars, n-3) + g.s(digitChars, 1) + g.s(upperChars, 1) + g.s(lowerChars, 1)
}

var testKey = []byte("0123456789abcdef-test-hmac-key")

func newTestScanner(t testing.TB, rs *RuleSet) *Scanner {
	t.Helper()
	s, err := New(rs, DefaultConfig(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLoad(t testing.TB, toml string) *RuleSet {
	t.Helper()
	rs, err := Load(strings.NewReader(toml))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return rs
}

func mustDefault(t testing.TB) *RuleSet {
	t.Helper()
	rs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// assertNoSecret fails when the finding holds secret material: no field may
// contain the secret, the hash must be a 64-digit hex HMAC, and the preview
// may show at most its first 4 characters.
func assertNoSecret(t testing.TB, f Finding, secret string) {
	t.Helper()
	v := reflect.ValueOf(f)
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.String && strings.Contains(v.Field(i).String(), secret) {
			t.Errorf("finding field %s = %q contains the secret %q", v.Type().Field(i).Name, v.Field(i).String(), secret)
		}
	}
	if f.Start == f.End {
		return // a path-only finding
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(f.SecretHash) {
		t.Errorf("SecretHash %q is not a hex SHA-256", f.SecretHash)
	}
	shown, _, ok := strings.Cut(f.Preview, "…")
	if !ok || utf8.RuneCountInString(shown) > 4 || !strings.HasPrefix(secret, shown) {
		t.Errorf("Preview %q shows more than a 4-character prefix of %q", f.Preview, secret)
	}
	if n := utf8.RuneCountInString(secret); utf8.RuneCountInString(shown) >= n && n > 0 {
		t.Errorf("Preview %q shows all of the secret %q", f.Preview, secret)
	}
}

func ruleIDs(fs []Finding) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.RuleID)
	}
	return ids
}
