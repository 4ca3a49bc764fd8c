package scan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gitleaksConfig is gitleaks' own default configuration, read from the Go
// module cache.
func gitleaksConfig(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "github.com", "zricethezav", "gitleaks", "v8@"+GitleaksVersion, "config", "gitleaks.toml")
}

// gitleaks' own default configuration loads unmodified, and finds what
// gitleaks finds. The module must be in the cache: this test fails rather
// than skips without it, so that CI cannot silently stop checking.
func TestGitleaksDefaultConfig(t *testing.T) {
	p := gitleaksConfig(t)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("gitleaks' default configuration is not in the module cache (%v): run `go mod download github.com/zricethezav/gitleaks/v8@%s`", err, GitleaksVersion)
	}
	rs, err := LoadFile(p)
	if err != nil {
		t.Fatalf("gitleaks' default configuration does not load: %v", err)
	}
	if n := len(regexp.MustCompile(`(?m)^\s*\[\[rules\]\]`).FindAll(data, -1)); rs.Len() != n {
		t.Errorf("%d rules loaded, the file has %d", rs.Len(), n)
	}
	if len(rs.Allowlists()) != 1 || rs.MinVersion() == "" || len(rs.Warnings()) != 0 {
		t.Errorf("global allowlists %d, minVersion %q, warnings %q", len(rs.Allowlists()), rs.MinVersion(), rs.Warnings())
	}

	g := newGen(8)
	aws := "AKIA" + g.s(base32Chars, 16)
	ghp := "ghp_" + g.s(alnumChars, 36)
	slack := "xoxb-" + g.s(digitChars, 11) + "-" + g.s(digitChars, 12) + "-" + g.s(alnumChars, 24)
	key := "-----BEGIN RSA " + "PRIVATE KEY-----\n" + g.s(b64Chars, 64) + "\n" + g.s(b64Chars, 64) + "\n-----END RSA " + "PRIVATE KEY-----"
	generic := g.mixed(24)
	text := lines(
		"# settings for the demo service",
		"aws_key_id: "+aws,
		"gh = "+ghp,
		"slack: "+slack,
		key,
		`api_key = "`+generic+`"`,
	)
	// What gitleaks v8.30.1 reports for this text (rule, line, secret),
	// checked by running it.
	want := []string{
		"aws-access-token@2 " + aws,
		"github-pat@3 " + ghp,
		"slack-bot-token@4 " + slack,
		"private-key@5 " + key,
		"generic-api-key@9 " + generic,
	}
	s := newTestScanner(t, rs)
	var got []string
	for _, f := range s.Scan("src/settings.py", []byte(text), "").Findings {
		got = append(got, fmt.Sprintf("%s@%d %s", f.RuleID, f.Line, text[f.Start:f.End]))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// gitleaks joins its global allowlist's paths into one regex, so the
	// (?i) of one makes the later ones case-insensitive: it skips this file.
	if fs := s.Scan("web/Node_Modules/lib/settings.py", []byte(text), "").Findings; len(fs) != 0 {
		t.Errorf("allowlisted path: %s", positions(fs))
	}
}
