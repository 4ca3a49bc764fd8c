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

	gitleaksreport "github.com/zricethezav/gitleaks/v8/report"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/scan"
)

// localRepo is a Git repository in a directory of the test's, committed to
// with git.
type localRepo struct {
	t   *testing.T
	dir string
}

func newLocalRepo(t *testing.T) *localRepo {
	r := &localRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *localRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (an empty content deletes one) and commits them,
// returning the commit's id.
func (r *localRepo) commit(files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if content == "" {
			r.git("rm", "-q", name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.git("add", name)
	}
	r.git("commit", "-q", "-m", "change")
	return r.git("rev-parse", "HEAD")
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
	t.Fatalf("the gitleaks binary is not installed: run `make gitleaks` (go install github.com/zricethezav/gitleaks/v8@v%s)", scan.GitleaksVersion)
	return ""
}

// gitleaksReports is what `gitleaks git` reports of the repository (its
// default rules, its .gitleaksignore and gitleaks:allow honoured), as
// sorted "commit:file:rule:line" fingerprints.
func gitleaksReports(t *testing.T, dir string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(gitleaksBinary(t), "git", dir, "--report-format", "json", "--report-path", out, "--exit-code", "0",
		"--no-banner", "--log-level", "error")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var fs []gitleaksreport.Finding
	if err := json.Unmarshal(data, &fs); err != nil {
		t.Fatal(err)
	}
	var fps []string
	for _, f := range fs {
		fps = append(fps, f.Fingerprint)
	}
	sort.Strings(fps)
	return fps
}

// ours is the fingerprints of the occurrences gitfleet reports of the
// scan target (in its gitleaks format): those no suppression covers, or
// with ignored those too.
func ours(t *testing.T, dir string, ignored bool) []string {
	t.Helper()
	args := []string{"findings", dir, "--format", "gitleaks"}
	if ignored {
		args = append(args, "--ignored")
	}
	out, errOut, code := starter(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
	}
	var fs []gitleaksreport.Finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	fps := []string{}
	for _, f := range fs {
		fps = append(fps, f.Fingerprint)
	}
	sort.Strings(fps)
	return fps
}

// A repository's .gitleaksignore (both fingerprint forms) and inline
// gitleaks:allow suppress the findings gitleaks suppresses on the same
// repository: kept, marked, left out of the listing and counted; a line
// taken out of .gitleaksignore brings its finding back at the next scan.
func TestGitleaksSuppressionsAsGitleaks(t *testing.T) {
	pat := func(tag string) string { return gittest.FakePAT(tag) }
	r := newLocalRepo(t)
	c1 := r.commit(map[string]string{
		"config/a.env": "TOKEN=" + pat("Ig1") + "\n",
		"b.env":        "# b\nTOKEN=" + pat("Ig2") + "\n",
		"c.go":         "package c\n\nconst token = \"" + pat("Ig3") + "\" // gitleaks:allow\n",
		"d.env":        "TOKEN=" + pat("Ig4") + "\n",
	})
	r.commit(map[string]string{".gitleaksignore": "# handled\n" + c1 + ":config/a.env:github-pat:1\nb.env:github-pat:2\n"})

	out, errOut, code := starter(t, "scan", r.dir)
	if code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	theirs := gitleaksReports(t, r.dir)
	shown, all := ours(t, r.dir, false), ours(t, r.dir, true)
	if fmt.Sprint(shown) != fmt.Sprint(theirs) || len(theirs) != 1 || !strings.Contains(theirs[0], "d.env") {
		t.Fatalf("reported:\n gitfleet %v\n gitleaks %v", shown, theirs)
	}
	if len(all) != 4 {
		t.Fatalf("every finding is kept: %v", all)
	}

	out, errOut, code = starter(t, "findings", r.dir)
	if code != 0 || strings.Count(out, "github-pat") != 1 || !strings.Contains(out, "1 secret in 1 occurrence") ||
		!strings.Contains(out, "3 secrets ignored by the repository's .gitleaksignore or gitleaks:allow, not listed (--ignored lists them)") {
		t.Fatalf("findings: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = starter(t, "findings", r.dir, "--ignored-only")
	for _, want := range []string{"config/a.env:1", "ignored (.gitleaksignore)", "b.env:2", "c.go:3", "ignored (gitleaks:allow)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("--ignored-only: no %q\n%s", want, out)
		}
	}
	if out, _, _ := starter(t, "findings", r.dir, "--summary"); !strings.Contains(out, "1 secret in ") ||
		!strings.Contains(out, "3 more secrets ignored by the repositories' .gitleaksignore or gitleaks:allow, not counted") {
		t.Fatalf("summary:\n%s", out)
	}

	// b.env is no longer ignored; gitleaks and gitfleet report it again.
	r.commit(map[string]string{".gitleaksignore": c1 + ":config/a.env:github-pat:1\n"})
	if out, errOut, code := starter(t, "scan", r.dir); code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	theirs, shown = gitleaksReports(t, r.dir), ours(t, r.dir, false)
	if fmt.Sprint(shown) != fmt.Sprint(theirs) || len(theirs) != 2 {
		t.Fatalf("after the change:\n gitfleet %v\n gitleaks %v", shown, theirs)
	}
}
