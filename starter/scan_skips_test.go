package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes a local repository in a new directory and returns it with
// a function that runs git in it.
func gitRepo(t *testing.T) (string, func(args ...string) string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	return dir, git
}

// A blob skipped as oversized is never scanned by a later scan either
// (it is seen): every later result says so, and none says "complete".
func TestOversizedBlobStaysSkippedInLaterScans(t *testing.T) {
	dir, git := gitRepo(t)
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("a line of text\n", 800_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "add")
	for i, want := range []string{"1 oversized blob", "1 oversized blob"} {
		if i == 1 { // a new commit: the next scan has something to do
			if err := os.WriteFile(filepath.Join(dir, "b.md"), []byte("more\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			git("add", ".")
			git("commit", "-q", "-m", "more")
		}
		out, errOut, _ := starter(t, "scan", dir)
		t.Logf("scan %d:\n%s%s", i+1, out, errOut)
		if !strings.Contains(out, want) || strings.Contains(out, "; complete") || !strings.Contains(out, "1 skipped") {
			t.Fatalf("scan %d does not keep the oversized blob skipped:\n%s%s", i+1, out, errOut)
		}
	}
}

// A blob damaged or missing in a local repository cannot be read by any
// later scan: the result says so instead of promising the next scan.
func TestScanOfADamagedRepositorySaysRescanWillNotRecoverIt(t *testing.T) {
	dir, git := gitRepo(t)
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", ".")
	git("commit", "-q", "-m", "add")
	blob := git("rev-parse", "HEAD:b.txt")
	obj := filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])
	if err := os.Chmod(obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obj, []byte("not zlib data"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		out, errOut, _ := starter(t, "scan", dir)
		t.Logf("scan %d:\n%s%s", i+1, out, errOut)
		if !strings.Contains(out, "1 object damaged in the repository; re-scan will not recover it") || strings.Contains(out, "next scan continues") {
			t.Fatalf("scan %d of a damaged repository:\n%s%s", i+1, out, errOut)
		}
	}
}

// A linked work tree (`git worktree add`) is scanned as its repository:
// what git in it reads, gitfleet scans.
func TestScanOfALinkedWorktree(t *testing.T) {
	dir, git := gitRepo(t)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "add")
	tree := filepath.Join(t.TempDir(), "feature")
	git("worktree", "add", "-q", "-b", "feature", tree)
	out, errOut, code := starter(t, "scan", tree)
	if code != 0 || !strings.Contains(out, "1 blob") || !strings.Contains(out, "; complete") {
		t.Fatalf("scan of a linked work tree: exit %d\n%s%s", code, out, errOut)
	}
}
