package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/report"
	"gitfleet/internal/infra/store"
)

// sarifLog is what the tests read of a SARIF log.
type sarifLog struct {
	Runs []struct {
		Tool struct {
			Driver struct {
				Name, Version string
				Rules         []struct {
					ID         string
					Help       struct{ Text, Markdown string }
					Properties map[string]any
				}
			}
		}
		VersionControlProvenance []struct{ RepositoryURI, RevisionID, Branch string }
		Results                  []struct {
			RuleID    string
			Message   struct{ Text string }
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct{ URI string }
				}
			}
			Suppressions []struct{ Kind, Status, Justification string }
		}
	}
}

// The same file of two repositories holds a secret in each: a fleet SARIF
// export to one file is refused (an upload would attach one repository's
// results to the other's files); --out writes one valid log per
// repository, which names the repository, branch and commit scanned and
// holds that repository's results only. A repository past code scanning's
// limit is refused, and one past what it shows is said.
func TestSARIFIsOneLogPerRepository(t *testing.T) {
	o, _ := newRepo(t)
	if _, err := fg.CreateRepo(o, "web"); err != nil {
		t.Fatal(err)
	}
	heads := map[string]string{}
	for _, name := range []string{"app", "web"} {
		c, err := fg.Commit(o, name, "main", map[string]string{"config/app.env": "T=" + gittest.FakePAT("Sr"+name) + "\n"}, "key")
		if err != nil {
			t.Fatal(err)
		}
		heads[name] = c
		if out, errOut, code := starter(t, "collect", o+"/"+name); code != 0 {
			t.Fatalf("collect %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	glob := fg.Host() + "/" + o + "/*"

	out, errOut, code := starter(t, "findings", "--repo", glob, "--format", "sarif")
	if code != exitUsage || !strings.Contains(errOut, "the selection holds 2 repositories") || !strings.Contains(errOut, "--out DIR") || out != "" {
		t.Fatalf("a two-repository SARIF to one file: exit %d, want %d and the reason\n%s%s", code, exitUsage, out, errOut)
	}

	dir := filepath.Join(t.TempDir(), "sarif")
	out, errOut, code = starter(t, "findings", "--repo", glob, "--format", "sarif", "--out", dir)
	if code != 0 {
		t.Fatalf("--out: exit %d\n%s%s", code, out, errOut)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	host := strings.NewReplacer(":", "_").Replace(fg.Host())
	want := []string{filepath.Join(dir, host+"_"+o+"_app.sarif"), filepath.Join(dir, host+"_"+o+"_web.sarif")}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Fatalf("files %q, want %q\n%s", files, want, out)
	}
	for i, name := range []string{"app", "web"} {
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		validSARIF(t, string(b))
		var log sarifLog
		if err := json.Unmarshal(b, &log); err != nil {
			t.Fatal(err)
		}
		if len(log.Runs) != 1 || len(log.Runs[0].Results) != 1 || len(log.Runs[0].VersionControlProvenance) != 1 {
			t.Fatalf("%s: want one run of one result with its provenance:\n%s", name, b)
		}
		p := log.Runs[0].VersionControlProvenance[0]
		if p.RepositoryURI != fg.URL()+"/"+o+"/"+name || p.RevisionID != heads[name] || p.Branch != "refs/heads/main" {
			t.Errorf("%s: provenance %+v, want %s/%s/%s at %s on refs/heads/main", name, p, fg.URL(), o, name, heads[name])
		}
		if d := log.Runs[0].Tool.Driver; d.Name != "gitfleet" || d.Version == "" || len(d.Rules) < 100 {
			t.Errorf("%s: driver %s %q with %d rules", name, d.Name, d.Version, len(d.Rules))
		}
		for _, rule := range log.Runs[0].Tool.Driver.Rules {
			if rule.ID == "github-pat" && (rule.Properties["security-severity"] != "8.0" || rule.Help.Markdown == "") {
				t.Errorf("%s: github-pat: %+v", name, rule)
			}
		}
		r := log.Runs[0].Results[0]
		if r.Locations[0].PhysicalLocation.ArtifactLocation.URI != "config/app.env" || !strings.Contains(r.Message.Text, o+"/"+name+".") {
			t.Errorf("%s: result %+v", name, r)
		}
	}

	// One repository: to standard output, as before.
	out, errOut, code = starter(t, "findings", o+"/app", "--format", "sarif")
	if code != 0 {
		t.Fatalf("one repository: exit %d\n%s%s", code, out, errOut)
	}
	validSARIF(t, out)

	// The limits, lowered: past the results a run may hold, refused;
	// past what code scanning shows, said.
	defer func(l struct{ results, shown int64 }) { sarifLimits = l }(sarifLimits)
	sarifLimits.results, sarifLimits.shown = 0, 0
	out, errOut, code = starter(t, "findings", o+"/app", "--format", "sarif")
	if code != exitUsage || !strings.Contains(errOut, "more results than the 0 GitHub code scanning takes in a run") || out != "" {
		t.Fatalf("past the limit: exit %d\n%s%s", code, out, errOut)
	}
	sarifLimits.results = 1
	out, errOut, code = starter(t, "findings", o+"/app", "--format", "sarif")
	if code != 0 || !strings.Contains(errOut, "1 result; code scanning shows only the 0 most severe") {
		t.Fatalf("past what code scanning shows: exit %d\n%s%s", code, out, errOut)
	}
}

// A resolved secret is dismissed in SARIF (an accepted suppression); met
// again in a new commit, it is open there — no suppression on any of its
// results, as code scanning keeps one alert per secret — until resolved
// again. Through the real triage commands and collections.
func TestSARIFOfASecretSeenAgainIsOpen(t *testing.T) {
	o, _ := newRepo(t)
	token := gittest.FakePAT("Sa1")
	if _, err := fg.Commit(o, "app", "main", map[string]string{"config/app.env": "T=" + token + "\n"}, "key"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := starter(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	// suppressions are the accepted suppressions of each result, by file.
	suppressions := func() map[string]string {
		t.Helper()
		out := run("findings", o+"/app", "--format", "sarif")
		validSARIF(t, out)
		var log sarifLog
		if err := json.Unmarshal([]byte(out), &log); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range log.Runs[0].Results {
			s := "open"
			for _, x := range r.Suppressions {
				if x.Status == "accepted" {
					s = "accepted " + x.Justification
				}
			}
			got[r.Locations[0].PhysicalLocation.ArtifactLocation.URI] = s
		}
		return got
	}
	run("collect", o+"/app")
	hash := hashOf(token)[:12]
	run("findings", "resolve", o+"/app", hash, "--reason", "revoked", "--as", "ann")
	if got := suppressions(); fmt.Sprint(got) != "map[config/app.env:accepted revoked]" {
		t.Fatalf("resolved: %v", got)
	}
	if _, err := fg.Commit(o, "app", "main", map[string]string{"deploy/app.env": "DEPLOY=" + token + "\n"}, "again"); err != nil {
		t.Fatal(err)
	}
	run("collect", o+"/app")
	if got := suppressions(); fmt.Sprint(got) != "map[config/app.env:open deploy/app.env:open]" {
		t.Fatalf("seen again after its resolution: %v, want every result open\n%s", got, run("findings", o+"/app", "--occurrences"))
	}
	run("findings", "resolve", o+"/app", hash, "--reason", "revoked", "--as", "ann", "--comment", "rotated again")
	if got := suppressions(); fmt.Sprint(got) != "map[config/app.env:accepted revoked deploy/app.env:accepted revoked]" {
		t.Fatalf("resolved again: %v", got)
	}
}

// A report's occurrence carries the last validity check and whether the
// provider called the key a test-mode one, which its severity follows.
func TestReportOccurrenceCarriesValidity(t *testing.T) {
	for _, tc := range []struct {
		v        *store.Validity
		validity string
		test     bool
		severity float64
	}{
		{nil, "", false, report.SeverityProvider},
		{&store.Validity{State: "valid", Facts: json.RawMessage(`{"note":"live mode"}`)}, "valid", false, report.SeverityValid},
		{&store.Validity{State: "valid", Facts: json.RawMessage(`{"note":"test mode"}`)}, "valid", true, report.SeverityLow},
		{&store.Validity{State: "invalid", Facts: json.RawMessage(`{}`)}, "invalid", false, report.SeverityLow},
	} {
		s := store.FleetSecret{Repository: "github.com/acme/api", Validity: tc.v}
		o := reportOccurrence(s, store.Occurrence{SecretKey: store.SecretKey{RuleID: "stripe-access-token"}})
		if o.Validity != tc.validity || o.TestKey != tc.test || o.Severity() != tc.severity {
			t.Errorf("%+v: validity %q test %v severity %v, want %q %v %v", tc.v, o.Validity, o.TestKey, o.Severity(), tc.validity, tc.test, tc.severity)
		}
	}
}

// The gitleaks export serves as a gitleaks baseline, tested as a user
// would: gitleaks' own binary, built from the module gitfleet depends on,
// scans the same repository with the export as --baseline-path and
// reports nothing new, where without it it reports the secrets. The
// repository has a secret on a file's second line, one on the second of
// two lines a later commit adds (gitleaks counts that column one more),
// and a commit message of two paragraphs. The export holds no secret.
func TestGitleaksExportIsAGitleaksBaseline(t *testing.T) {
	dir := t.TempDir()
	tokens := []string{gittest.FakePAT("Gb1"), gittest.FakePAT("Gb2")}
	git := func(date string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ann Example", "GIT_AUTHOR_EMAIL=ann@example.com", "GIT_AUTHOR_DATE="+date,
			"GIT_COMMITTER_NAME=Bob", "GIT_COMMITTER_EMAIL=bob@example.com", "GIT_COMMITTER_DATE="+date)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("2026-01-02T03:04:05+02:00", "init", "-q", "-b", "main")
	write("config/app.env", "# settings\nGITHUB_TOKEN="+tokens[0]+"\n")
	write("README.md", "hello\n")
	git("2026-01-02T03:04:05+02:00", "add", ".")
	git("2026-01-02T03:04:05+02:00", "commit", "-q", "-m", "settings")
	write("config/app.env", "# settings\nGITHUB_TOKEN="+tokens[0]+"\nDEBUG=false\nDEPLOY_TOKEN="+tokens[1]+"\n")
	git("2026-02-03T04:05:06-05:00", "commit", "-q", "-a", "-m", "Add the deploy\nsettings\n\nThe token is the deploy bot's.\n\n\n  Indented, and kept.  \n")

	if out, errOut, code := starter(t, "scan", dir); code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	export, errOut, code := starter(t, "findings", dir, "--format", "gitleaks")
	if code != 0 || strings.Contains(errOut, "not readable") {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	for _, tok := range tokens {
		if strings.Contains(export, tok) {
			t.Fatalf("the export holds a secret:\n%s", export)
		}
	}
	baseline := filepath.Join(t.TempDir(), "baseline.json")
	if err := os.WriteFile(baseline, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "gitleaks")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/zricethezav/gitleaks/v8").CombinedOutput(); err != nil {
		t.Fatalf("building gitleaks: %v\n%s", err, out)
	}
	leaks := func(extra ...string) []map[string]any {
		t.Helper()
		reportPath := filepath.Join(t.TempDir(), "report.json")
		args := append([]string{"git", dir, "--redact", "--no-banner", "--exit-code", "0", "--report-format", "json", "--report-path", reportPath}, extra...)
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("gitleaks %v: %v\n%s", args, err, out)
		}
		b, err := os.ReadFile(reportPath)
		if err != nil {
			t.Fatal(err)
		}
		var found []map[string]any
		if err := json.Unmarshal(b, &found); err != nil {
			t.Fatalf("gitleaks' report: %v\n%s", err, b)
		}
		return found
	}
	if all := leaks(); len(all) != 2 {
		t.Fatalf("gitleaks without a baseline finds %d leaks, want the 2 secrets: %v", len(all), all)
	}
	if fresh := leaks("--baseline-path", baseline); len(fresh) != 0 {
		t.Errorf("gitleaks with the export as baseline finds %d new leaks, want 0:\n%v\nexport:\n%s", len(fresh), fresh, export)
	}
}

// What gitleaks computes, computed the same way: the commit message as
// go-gitdiff reads `git log`, the added run a -U0 hunk scans, and the
// location with gitleaks' column count.
func TestGitleaksDetailPieces(t *testing.T) {
	for msg, want := range map[string]string{
		"settings\n": "settings",
		"Add the deploy\nsettings\n\nBody one.\n": "Add the deploy settings\n\nBody one.",
		"T\n\nA  \n\n\n  B\n":                     "T\n\nA\n\n  B",
	} {
		if got := gitLogMessage(msg); got != want {
			t.Errorf("gitLogMessage(%q) = %q, want %q", msg, got, want)
		}
	}
	for _, tc := range []struct {
		before, after     string
		line, first, last int
	}{
		{"", "a\nb\nc\n", 2, 1, 3},
		{"a\nb\n", "a\nb\nc\nd\n", 4, 3, 4},
		{"a\nb\n", "a\nx\nb\n", 2, 2, 2},
		{"a\nb\n", "a\nx\nb\n", 3, 0, 0},
	} {
		if f, l := addedRun(tc.before, tc.after, tc.line); f != tc.first || l != tc.last {
			t.Errorf("addedRun(%q, %q, %d) = %d, %d, want %d, %d", tc.before, tc.after, tc.line, f, l, tc.first, tc.last)
		}
	}
	for _, tc := range []struct {
		raw                string
		start, end         int
		sl, el, scol, ecol int
	}{
		{"T=abc\n", 2, 5, 0, 0, 3, 5},    // the first line: 1-based
		{"x\nT=abc\n", 4, 7, 1, 1, 4, 6}, // later lines: one more
		{"T=abc", 2, 5, 0, 0, 3, 5},      // no newline
	} {
		sl, el, sc, ec := gitleaksLocation(tc.raw, tc.start, tc.end)
		if sl != tc.sl || el != tc.el || sc != tc.scol || ec != tc.ecol {
			t.Errorf("gitleaksLocation(%q, %d, %d) = %d %d %d %d, want %d %d %d %d", tc.raw, tc.start, tc.end, sl, el, sc, ec, tc.sl, tc.el, tc.scol, tc.ecol)
		}
	}
}
