package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/textsafe"
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
			name:  "single-quoted names, as git and servers quote them",
			msg:   `fatal: couldn't find remote ref 'refs/heads/secret-name'; pathspec 'my secret file' did not match, error: 'secret-name' is gone`,
			leaks: []string{"secret-name", "my secret file", "secret file", "'my"},
			kept:  []string{"fatal: couldn't find remote ref", "; pathspec", "did not match, error:", "is gone"},
		},
		{
			name:  "an apostrophe closes no quote",
			msg:   `can't read 'deploy key's copy' now ('x')`,
			leaks: []string{"deploy key", "copy"},
			kept:  []string{"can't read", "now (", ")"},
		},
		{
			name:  "bare names with an underscore; settings stay",
			msg:   `open id_rsa: SECRET_KEY unreadable, id_ed25519.pub too (GITFLEET_MAX_OBJECT_BYTES, GITHUB_TOKEN)`,
			leaks: []string{"id_rsa", "SECRET_KEY", "id_ed25519"},
			kept:  []string{"open", "unreadable,", "too", "GITFLEET_MAX_OBJECT_BYTES", "GITHUB_TOKEN"},
		},
		{
			name:  "an unclosed single quote",
			msg:   `bad 'secret_name and 'more`,
			leaks: []string{"secret_name"},
			kept:  []string{"bad", "and", "'more"},
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

// redactWithin runs redact with a bound: a message it never finishes (it
// spun forever on a white-space rune other than space, tab and newline) is
// a failure, not a hung test binary.
func redactWithin(t testing.TB, msg string) string {
	t.Helper()
	done := make(chan string, 1)
	go func() { done <- redact(msg, (&Shards{}).digest) }()
	select {
	case out := <-done:
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("redact(%q) did not return", msg)
		return ""
	}
}

// A Git server's text reaches redact verbatim: every white space and every
// control is either kept as space or escaped, names in it are digested, and
// the result cannot start a new log line.
func TestRedactServerText(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		leaks     []string
		kept      []string
	}{
		{"carriage return", "repository is being archived\r\nplease retry at acme/app.git", []string{"acme/app.git", "\r", "\n"}, []string{"repository", "archived", `\x0d`, `\x0a`, "please retry"}},
		{"vertical tab and form feed", "a\vb\fc prod.env", []string{"prod.env", "\v", "\f"}, []string{`\x0b`, `\x0c`}},
		{"no-break space", "fatal:\u00a0prod.env\u00a0unreadable", []string{"prod.env"}, []string{"fatal:", "unreadable"}},
		{"line and paragraph separators", "one\u2028two\u2029deploy/prod.env", []string{"deploy/prod.env", "\u2028", "\u2029"}, []string{`\u2028`, `\u2029`}},
		{"next line and ideographic space", "x\u0085y\u3000z/secret.txt", []string{"z/secret.txt", "\u0085"}, []string{`\u0085`}},
		{"only white space", "\r\v\f\u00a0\u2028", []string{"\r", "\v", "\f", "\u2028"}, nil},
		{"punctuation before white space", "([\u00a0{<\r", []string{"\r"}, []string{"(["}},
		{"a terminal escape", "\x1b[2Jcleared", []string{"\x1b"}, []string{`\x1b`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redactWithin(t, tc.msg)
			for _, l := range tc.leaks {
				if strings.Contains(got, l) {
					t.Errorf("%q left in %q", l, got)
				}
			}
			for _, k := range tc.kept {
				if !strings.Contains(got, k) {
					t.Errorf("%q missing from %q", k, got)
				}
			}
		})
	}
}

// redact returns on every input, and what it returns is printable.
func FuzzRedact(f *testing.F) {
	for _, seed := range []string{"repository is being archived\r\nplease retry", "a\u2028b", "\v", "(\u00a0", `"unterminated`, "\xff\xfe prod.env", "", "'a'b 'c", "'", "''", "'\u00a0'x", "it's 'q'\r'"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if got := redactWithin(t, msg); textsafe.Printable(got) != got {
			t.Errorf("redact(%q) = %q: not printable", msg, got)
		}
	})
}
