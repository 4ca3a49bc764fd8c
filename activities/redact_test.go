package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"gitfleet/internal/domain/scan"
)

func TestRedact(t *testing.T) {
	s := &Shards{}
	for _, c := range []struct {
		name  string
		msg   string
		leaks []string // none of these may remain
		kept  []string // these must
	}{
		{
			name: "refs, ids, paths and locations",
			msg: `ref "refs/heads/secret-branch" tip 0123456789abcdef0123456789abcdef01234567: blob 89abcdef0123456789abcdef0123456789abcdef ` +
				`at deploy/prod.env in commit 0123456789abcdef0123456789abcdef01234567 (open /srv/repos/acme.git: fetch https://ghe.example.com/acme/app.git)`,
			leaks: []string{"secret-branch", "0123456789abcdef", "89abcdef01234567", "deploy/prod.env", "/srv/repos", "acme/app"},
			kept:  []string{"ref", "tip", "blob", "in commit", "open", "fetch"},
		},
		{
			name:  "a file at the repository's root",
			msg:   `blob 89abcdef0123456789abcdef0123456789abcdef at prod.env in commit 0123456789abcdef0123456789abcdef01234567: over a limit`,
			leaks: []string{"prod.env", "prod"},
			kept:  []string{"blob", "at", "in commit", "over a limit"},
		},
		{
			name:  "a dotfile and a name in parentheses",
			msg:   `open .env (and app.properties): unsafe file in the repository.`,
			leaks: []string{".env", "app.properties"},
			kept:  []string{"open", "(and", "unsafe file in the repository."},
		},
		{
			name:  "a quoted path with spaces",
			msg:   `blob 89abcdef0123456789abcdef0123456789abcdef at "my secrets/app config.env" in commit 0123456789abcdef0123456789abcdef01234567: boom`,
			leaks: []string{"my secrets", "secrets", "app config", "config.env", "my "},
			kept:  []string{"blob", " at ", " in commit", ": boom"},
		},
		{
			name:  "a quoted root name without a dot, and escapes",
			msg:   `ref "refs/heads/a\"b c" and "Makefile" gone`,
			leaks: []string{"Makefile", "a\\\"b", "b c"},
			kept:  []string{"ref", "and", "gone"},
		},
		{
			name: "numbers with units stay",
			msg:  `waited 1.5s for 256MiB (2 of 3.0 attempts)`,
			kept: []string{"1.5s", "256MiB", "(2", "3.0"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := redact(c.msg, s.digest)
			for _, leak := range c.leaks {
				if strings.Contains(got, leak) {
					t.Errorf("redacted message still holds %q: %s", leak, got)
				}
			}
			for _, kept := range c.kept {
				if !strings.Contains(got, kept) {
					t.Errorf("redacted message lost %q: %s", kept, got)
				}
			}
		})
	}
	// The same name redacts the same way, so messages still correlate.
	got := redact(`tip 0123456789abcdef0123456789abcdef01234567 in commit 0123456789abcdef0123456789abcdef01234567`, s.digest)
	if strings.Count(got, "‹"+s.digest("0123456789abcdef0123456789abcdef01234567")+"›") != 2 {
		t.Errorf("equal ids do not redact equally: %s", got)
	}
}

// Digests are keyed by the installation's finding key and long: a common
// name digested without the key (as digests were: 48 bits of its SHA-256)
// is not there to find, and two installations digest it differently.
func TestRedactionIsKeyed(t *testing.T) {
	rs, err := scan.Default()
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]bool{}
	for _, key := range []string{"installation-one-key-0123456789", "installation-two-key-0123456789"} {
		sc, err := scan.New(rs, scan.DefaultConfig(), []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		s := &Shards{Scanner: sc}
		got := redact("blob at prod.env in commit", s.digest)
		d := s.digest("prod.env")
		if !strings.Contains(got, "‹"+d+"›") || len(d) < 32 {
			t.Errorf("digest %q in %s", d, got)
		}
		sum := sha256.Sum256([]byte("prod.env"))
		if unkeyed := hex.EncodeToString(sum[:]); strings.Contains(got, unkeyed[:12]) || strings.HasPrefix(unkeyed, d[:12]) {
			t.Errorf("an unkeyed digest of prod.env: %s", got)
		}
		digests[d] = true
	}
	if len(digests) != 2 {
		t.Error("two keys digest prod.env the same")
	}
}
