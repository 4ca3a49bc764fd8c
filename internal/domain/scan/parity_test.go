package scan

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// With gitleaks' own configuration loaded, gitfleet finds what the gitleaks
// binary finds on the same files: the same (file, rule, line, secret), with
// one documented difference — gitfleet reports the line where the secret
// starts, gitleaks where the whole match starts; the test maps gitleaks'
// line to the secret's before comparing. Decoding is off on both sides:
// this compares the rules' semantics, not the decoders.
//
// The gitleaks binary must be installed (`make gitleaks`, which `make test`
// runs): the test fails, not skips, without it.
func TestFindingsEqualGitleaksOnACorpus(t *testing.T) {
	bin := gitleaksBinary(t)
	cfg := gitleaksConfig(t)
	rs, err := LoadFile(cfg)
	if err != nil {
		t.Fatalf("gitleaks' configuration does not load: %v", err)
	}
	dir := t.TempDir()
	files := parityCorpus()
	for path, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(bin, "dir", dir, "--config", cfg, "--report-format", "json", "--report-path", report,
		"--max-decode-depth", "0", "--exit-code", "0", "--no-banner", "--log-level", "error")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks: %v\n%s", err, out)
	}
	theirs := gitleaksReport(t, report, dir)

	s := newTestScanner(t, rs)
	var ours []string
	for path, content := range files {
		for _, f := range s.Scan(path, []byte(content), "").Findings {
			secret := ""
			if f.End > f.Start {
				secret = content[f.Start:f.End]
			}
			ours = append(ours, parityKey(path, f.RuleID, f.Line, secret))
		}
	}
	slices.Sort(ours)
	if len(theirs) < len(files)/2 {
		t.Fatalf("gitleaks found only %d secrets in %d files: the corpus is not exercising the rules", len(theirs), len(files))
	}
	missing, extra := diffSorted(theirs, ours)
	t.Logf("%d files: gitleaks %d findings, gitfleet %d", len(files), len(theirs), len(ours))
	for _, m := range missing {
		t.Errorf("gitleaks found, gitfleet did not: %s", m)
	}
	for _, e := range extra {
		t.Errorf("gitfleet found, gitleaks did not: %s", e)
	}
}

// The same on real code nobody here wrote, with the built-in rules: every
// file of the Go toolchain's sources (GOROOT/src, about 11,500 files and
// 130 MB, test keys and certificates among them) scanned by gitleaks dir
// with its default configuration and by gitfleet's built-in set.
func TestFindingsEqualGitleaksOnRealCode(t *testing.T) {
	bin := gitleaksBinary(t)
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "src")
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(bin, "dir", root, "--report-format", "json", "--report-path", report,
		"--max-decode-depth", "0", "--exit-code", "0", "--no-banner", "--log-level", "error")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks: %v\n%s", err, out)
	}
	theirs := gitleaksReport(t, report, root)

	s := newTestScanner(t, mustDefault(t)).WithDecodeDepth(0)
	var ours []string
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		for _, f := range s.Scan(rel, content, "").Findings {
			ours = append(ours, parityKey(rel, f.RuleID, f.Line, string(content[f.Start:f.End])))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ours)
	if files < 5000 || len(theirs) < 20 {
		t.Fatalf("%d files, %d gitleaks findings: not the toolchain's sources?", files, len(theirs))
	}
	missing, extra := diffSorted(theirs, ours)
	t.Logf("%d files: gitleaks %d findings, gitfleet %d", files, len(theirs), len(ours))
	for _, m := range missing {
		t.Errorf("gitleaks found, gitfleet did not: %s", m)
	}
	for _, e := range extra {
		t.Errorf("gitfleet found, gitleaks did not: %s", e)
	}
}

// gitleaksLeak is a finding of gitleaks' JSON report.
type gitleaksLeak struct {
	RuleID, File, Match, Secret string
	StartLine                   int
}

// secretLine is the line where the secret starts (gitleaks reports where
// the match starts).
func (l gitleaksLeak) secretLine() int {
	if i := strings.Index(l.Match, l.Secret); i > 0 {
		return l.StartLine + strings.Count(l.Match[:i], "\n")
	}
	return l.StartLine
}

// readGitleaksReport reads a gitleaks JSON report.
func readGitleaksReport(t *testing.T, report string) []gitleaksLeak {
	t.Helper()
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var leaks []gitleaksLeak
	if err := json.Unmarshal(data, &leaks); err != nil {
		t.Fatalf("gitleaks' report: %v", err)
	}
	return leaks
}

// gitleaksReport reads a gitleaks JSON report of files under dir as sorted
// parity keys.
func gitleaksReport(t *testing.T, report, dir string) []string {
	t.Helper()
	var keys []string
	for _, l := range readGitleaksReport(t, report) {
		rel, err := filepath.Rel(dir, l.File)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, parityKey(filepath.ToSlash(rel), l.RuleID, l.secretLine(), l.Secret))
	}
	slices.Sort(keys)
	return keys
}

func parityKey(path, rule string, line int, secret string) string {
	return fmt.Sprintf("%s:%d %s %q", path, line, rule, secret)
}

// diffSorted returns what is in want and not in got, and the reverse.
func diffSorted(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i] < got[j]):
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}

// gitleaksBinary is the gitleaks the Makefile installs, or the one on PATH.
func gitleaksBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("gitleaks"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "gitleaks")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("the gitleaks binary is not installed: run `make gitleaks` (go install github.com/zricethezav/gitleaks/v8@v%s)", GitleaksVersion)
	return ""
}

// parityCorpus writes secrets of many providers' formats into files of the
// kinds repositories hold (code, configuration, scripts, docs), with the
// contexts gitleaks' rules and allowlists care about: assignments of every
// form, multi-line keys, placeholders, paths its allowlist skips, values at
// and around entropy thresholds. Tokens are generated, never literal.
func parityCorpus() map[string]string {
	g := newGen(42)
	tokens := map[string]func() string{
		"aws":        func() string { return "AKIA" + g.s(base32Chars, 16) },
		"github-pat": func() string { return "ghp_" + g.s(alnumChars, 36) },
		"github-fg":  func() string { return "github_pat_" + g.s(alnumChars, 22) + "_" + g.s(alnumChars, 59) },
		"gitlab":     func() string { return "glpat-" + g.s(urlChars, 20) },
		"slack-bot": func() string {
			return "xoxb-" + g.s(digitChars, 11) + "-" + g.s(digitChars, 12) + "-" + g.s(alnumChars, 24)
		},
		"slack-hook": func() string {
			return "https://hooks.slack.com/services/T" + g.s(upperChars+digitChars, 8) + "/B" + g.s(upperChars+digitChars, 10) + "/" + g.s(alnumChars, 24)
		},
		"stripe":       func() string { return "sk_live_" + g.s(alnumChars, 24) },
		"stripe-rk":    func() string { return "rk_test_" + g.s(alnumChars, 24) },
		"npm":          func() string { return "npm_" + g.s(alnumChars, 36) },
		"pypi":         func() string { return "pypi-AgEIcHlwaS5vcmc" + g.s(urlChars, 60) },
		"sendgrid":     func() string { return "SG." + g.s(urlChars, 22) + "." + g.s(urlChars, 43) },
		"gcp":          func() string { return "AIza" + g.s(urlChars, 35) },
		"openai":       func() string { return "sk-proj-" + g.s(urlChars, 74) + "T3BlbkFJ" + g.s(urlChars, 74) },
		"anthropic":    func() string { return "sk-ant-api03-" + g.s(urlChars, 93) + "AA" },
		"huggingface":  func() string { return "hf_" + g.s(lowerChars+upperChars, 34) },
		"shopify":      func() string { return "shpat_" + g.s(hexChars, 32) },
		"twilio":       func() string { return "SK" + g.s(hexChars, 32) },
		"doppler":      func() string { return "dp.pt." + g.s(lowerChars+digitChars, 43) },
		"digitalocean": func() string { return "dop_v1_" + g.s(hexChars, 64) },
		"jwt": func() string {
			return "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + g.s(urlChars, 40) + "." + g.s(urlChars, 43)
		},
		"generic": func() string { return g.mixed(32) },
		"lowent":  func() string { return strings.Repeat("ab", 12) },
	}
	names := make([]string, 0, len(tokens))
	for n := range tokens {
		names = append(names, n)
	}
	slices.Sort(names)
	contexts := []struct {
		path string
		text func(kind, tok string) string
	}{
		{"app/config.py", func(k, t string) string {
			return "import os\n\n" + strings.ReplaceAll(k, "-", "_") + "_token = \"" + t + "\"\n"
		}},
		{"deploy/values.yaml", func(k, t string) string { return "service:\n  name: api\n  " + k + "_api_key: " + t + "\n" }},
		{".env", func(k, t string) string {
			return "DEBUG=1\n" + strings.ToUpper(strings.ReplaceAll(k, "-", "_")) + "_SECRET=" + t + "\n"
		}},
		{"src/main.go", func(k, t string) string {
			return "package main\n\nconst apiKey = \"" + t + "\" // " + k + "\n"
		}},
		{"scripts/call.sh", func(k, t string) string {
			return "#!/bin/sh\ncurl -H \"Authorization: Bearer " + t + "\" https://api.example.net/v1/" + k + "\n"
		}},
		{"conf/settings.json", func(k, t string) string { return "{\n  \"name\": \"" + k + "\",\n  \"password\": \"" + t + "\"\n}\n" }},
		{"node_modules/lib/index.js", func(k, t string) string { return "module.exports = { key: '" + t + "' }\n" }},
		{"docs/README.md", func(k, t string) string { return "Set the token, e.g. `" + t + "`, in your environment.\n" }},
	}
	files := map[string]string{}
	for _, n := range names {
		for i, c := range contexts {
			dir, base := filepath.Split(c.path)
			files[fmt.Sprintf("%s%s-%d-%s", dir, n, i, base)] = c.text(n, tokens[n]())
		}
	}
	// Multi-line private keys, as files and inside JSON with escaped
	// newlines (a service account file).
	body := g.s(b64Chars, 64) + "\n" + g.s(b64Chars, 64) + "\n" + g.s(b64Chars, 20) + "=="
	files["keys/id_rsa"] = "-----BEGIN RSA " + "PRIVATE KEY-----\n" + body + "\n-----END RSA " + "PRIVATE KEY-----\n"
	files["keys/service-account.json"] = "{\n  \"type\": \"service_account\",\n  \"private_key\": \"-----BEGIN " + "PRIVATE KEY-----\\n" +
		strings.ReplaceAll(body, "\n", "\\n") + "\\n-----END " + "PRIVATE KEY-----\\n\"\n}\n"
	// A generic finding inside a specific one's match is dropped only where
	// both matches start on the same line (gitleaks' filter): here the
	// private key's starts three lines above, so both are reported.
	files["keys/annotated.pem"] = "-----BEGIN " + "PRIVATE KEY-----\n" + g.s(b64Chars, 64) + "\n" + g.s(b64Chars, 64) +
		"\napi_token = \"" + g.mixed(24) + "\"\n-----END " + "PRIVATE KEY-----\n"
	// Placeholders and references, which neither should report.
	files["app/placeholders.env"] = "API_KEY=${API_KEY}\nPASSWORD=changeme\nTOKEN=<token>\nSECRET=xxxxxxxxxxxxxxxxxxxx\n"
	return files
}
