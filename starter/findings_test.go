package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
)

// A secret carried through three versions of a file is one finding with
// three occurrences (the last also copied to another path); a secret whose
// file was deleted is removed.
func TestFindingsPerSecret(t *testing.T) {
	o, _ := newRepo(t)
	carried := gittest.FakePAT("Fd3")
	dropped := gittest.FakePAT("Rm5")
	later := gittest.FakePAT("Nw7")
	fixture := func(n int) string { // the secret on line 3, the file changing below it
		return fmt.Sprintf("package fixtures\n\nconst token = %q\n\nvar version = %d\n", carried, n)
	}
	commit := func(files map[string]string) string {
		t.Helper()
		c, err := fg.Commit(o, "app", "main", files, "change")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1 := commit(map[string]string{"test/fixtures_test.go": fixture(1), "old/creds.env": "TOKEN=" + dropped + "\n"})
	c2 := commit(map[string]string{"test/fixtures_test.go": fixture(2)})
	c3 := commit(map[string]string{"test/fixtures_test.go": fixture(3), "tools/fixtures_test.go": fixture(3), "old/creds.env": forge.DeleteFile})
	url := fg.URL() + "/" + o + "/app"

	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := starter(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		for _, secret := range []string{carried, dropped, later} {
			if strings.Contains(out+errOut, secret) {
				t.Fatalf("%v prints a secret:\n%s%s", args, out, errOut)
			}
		}
		return out
	}
	lineWith := func(out, s string) string {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, s) {
				return l
			}
		}
		t.Fatalf("no line with %q:\n%s", s, out)
		return ""
	}

	if out := run("scan", url); !strings.Contains(out, "findings  2 new findings") || !strings.Contains(out, "4 commits") {
		t.Fatalf("scan summary:\n%s", out)
	}

	out := run("findings", url)
	if !strings.Contains(out, "2 secrets in 4 occurrences") || strings.Count(out, "github-pat") != 2 {
		t.Fatalf("findings:\n%s", out)
	}
	tests := []struct{ at, want []string }{
		{[]string{"test/fixtures_test.go:3"}, []string{short(c1), "3 occurrences", "present"}},
		{[]string{"old/creds.env:1"}, []string{short(c1), "1 occurrence ", "removed"}},
	}
	for _, tt := range tests {
		l := lineWith(out, tt.at[0])
		for _, w := range tt.want {
			if !strings.Contains(l, w) {
				t.Errorf("the line of %s lacks %q: %s", tt.at[0], w, l)
			}
		}
	}
	if strings.Contains(out, "showing") {
		t.Errorf("a complete listing says it is not:\n%s", out)
	}

	// --occurrences: each location beneath its secret, with its status.
	out = run("findings", "--occurrences", url)
	if n := strings.Count(out, "test/fixtures_test.go:3"); n != 1+3 {
		t.Fatalf("--occurrences: the carried secret shows %d times, want its line and 3 occurrences:\n%s", n, out)
	}
	occurrenceRow := regexp.MustCompile(`(?m)^ +test/fixtures_test\.go:3 +([0-9a-f]+) +(\w+)\n( +also at .*\n)?`)
	got := map[string]string{}
	for _, m := range occurrenceRow.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2] + strings.Join(strings.Fields(m[3]), " ")
	}
	want := map[string]string{short(c1): "removed", short(c2): "removed", short(c3): "presentalso at tools/fixtures_test.go:3"}
	if fmt.Sprint(got) != fmt.Sprint(want) || strings.Count(out, "also at") != 1 {
		t.Errorf("occurrences (commit: status, also at) %v, want %v:\n%s", got, want, out)
	}

	// Read a page at a time, the listing is the same.
	findingsPage = 1
	paged, pagedJSON := run("findings", "--occurrences", url), run("findings", "--json", "--occurrences", url)
	findingsPage = 1000
	if paged != out || pagedJSON != run("findings", "--json", "--occurrences", url) {
		t.Fatalf("read one by one:\n%s\nat once:\n%s", paged, out)
	}

	// --limit: never a silent cut.
	out = run("findings", "--limit", "1", url)
	if strings.Count(out, "github-pat") != 1 || !strings.Contains(out, "showing 1 of 2 (use --limit or --all)") {
		t.Fatalf("--limit 1:\n%s", out)
	}
	if out = run("findings", "--all", url); strings.Count(out, "github-pat") != 2 || strings.Contains(out, "showing") {
		t.Fatalf("--all:\n%s", out)
	}

	// --json: the same fields, occurrences nested on request.
	type occurrence struct {
		Path, Commit, Status, Blob string
		AlsoAt                     []string
	}
	type listed struct {
		Total, TotalOccurrences, Shown int
		Findings                       []struct {
			Rule, Path, Commit, Status, Preview, SecretHash string
			Line, Count                                     int
			Last                                            struct{ Commit string }
			Occurrences                                     []occurrence
		}
	}
	decode := func(out string) listed {
		t.Helper()
		var l listed
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("JSON: %v\n%s", err, out)
		}
		return l
	}
	l := decode(run("findings", "--json", "--occurrences", url))
	if l.Total != 2 || l.TotalOccurrences != 4 || l.Shown != 2 || len(l.Findings) != 2 {
		t.Fatalf("--json: %+v", l)
	}
	// First seen first: in c1, old/ comes before test/ in Git's tree order.
	if l.Findings[0].Path != "old/creds.env" {
		t.Fatalf("--json: not in the order first seen: %+v", l.Findings)
	}
	f := l.Findings[1]
	if f.Rule != "github-pat" || f.Path != "test/fixtures_test.go" || f.Line != 3 || f.Commit != c1 || f.Count != 3 ||
		f.Status != "present" || f.Preview == "" || len(f.SecretHash) != 64 || f.Last.Commit != c3 || len(f.Occurrences) != 3 {
		t.Fatalf("--json, the carried secret: %+v", f)
	}
	for i, c := range []string{c1, c2, c3} {
		if o := f.Occurrences[i]; o.Commit != c || o.Path != "test/fixtures_test.go" || o.Blob == "" || (len(o.AlsoAt) > 0) != (c == c3) {
			t.Errorf("occurrence %d: %+v, want in %s", i, o, c)
		}
	}
	if also := f.Occurrences[2].AlsoAt; len(also) != 1 || also[0] != "tools/fixtures_test.go" {
		t.Errorf("the last occurrence is also at %q, want tools/fixtures_test.go", also)
	}
	if f := l.Findings[0]; f.Rule != "github-pat" || f.Count != 1 || f.Status != "removed" || len(f.Occurrences) != 1 {
		t.Fatalf("--json, the removed secret: %+v", f)
	}
	out, errOut, _ := starter(t, "findings", "--json", "--limit", "1", url)
	if l := decode(out); l.Shown != 1 || l.Total != 2 || len(l.Findings) != 1 || l.Findings[0].Occurrences != nil ||
		!strings.Contains(errOut, "showing 1 of 2") {
		t.Fatalf("--json --limit 1: %+v\n%s", l, errOut)
	}

	// An incremental scan: the carried secret in a fourth version is no
	// new finding; a new secret is one.
	commit(map[string]string{"test/fixtures_test.go": fixture(4), "ci/deploy.env": "GH=" + later + "\n"})
	if out := run("scan", url); !strings.Contains(out, "findings  1 new finding ") || !strings.Contains(out, "1 commit,") {
		t.Fatalf("incremental scan summary:\n%s", out)
	}
	out = run("findings", url)
	if !strings.Contains(out, "3 secrets in 6 occurrences") || !strings.Contains(lineWith(out, "test/fixtures_test.go:3"), "4 occurrences") ||
		!strings.Contains(lineWith(out, "ci/deploy.env:1"), "present") {
		t.Fatalf("findings after the incremental scan:\n%s", out)
	}

	// A collection scans the repository as a codebase: its own shard.
	if out := run("collect", o+"/app"); !strings.Contains(out, "3 new findings (starter findings") {
		t.Fatalf("collect summary:\n%s", out)
	}

	if _, errOut, code := starter(t, "findings", "--all", "--limit", "5", url); code != exitUsage || !strings.Contains(errOut, "--all") {
		t.Errorf("--all with --limit: exit %d %s", code, errOut)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 123456: "123,456", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	if count(1, "secret", "secrets") != "1 secret" || count(1000, "secret", "secrets") != "1,000 secrets" || count(0, "x", "xs") != "0 xs" {
		t.Error("count")
	}
}

// A token written base64-encoded is found, listed as decoded, and its
// secret shows neither encoded nor decoded.
func TestFindingsOfEncodedSecrets(t *testing.T) {
	o, _ := newRepo(t)
	token := gittest.FakePAT("Ev4")
	encoded := base64.StdEncoding.EncodeToString([]byte("github token " + token))
	if _, err := fg.Commit(o, "app", "main", map[string]string{"deploy/blob.txt": "payload: " + encoded + "\n"}, "add"); err != nil {
		t.Fatal(err)
	}
	url := fg.URL() + "/" + o + "/app"
	if out, errOut, code := starter(t, "scan", url); code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := starter(t, "findings", url)
	if code != 0 || !strings.Contains(out, "(decoded base64)") || !strings.Contains(out, "deploy/blob.txt:1") {
		t.Fatalf("findings: exit %d, want the secret listed as decoded base64\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, token) || strings.Contains(out, encoded) {
		t.Errorf("findings prints the secret:\n%s", out)
	}
}

// A scan says what it skipped and why: here a binary file, and an empty
// file under refs/ that git ignores with a warning.
func TestScanSaysWhatItSkipped(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "logo.dat"), []byte("\x00\x01\x02binary\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "add")
	if err := os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", ".gitkeep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := starter(t, "scan", dir)
	if code != 0 || !strings.Contains(out, "skipped   1 binary blob, 1 ref ignored as git ignores it") {
		t.Fatalf("scan: exit %d, want the binary blob and the ignored ref said\n%s%s", code, out, errOut)
	}
}
