package forge

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		login string
		ok    bool
	}{
		{"a", true},
		{"alice", true},
		{"Alice-Bob", true},
		{"a1-b2-c3", true},
		{strings.Repeat("x", 39), true},
		{"", false},
		{strings.Repeat("x", 40), false},
		{"-alice", false},
		{"alice-", false},
		{"al--ice", false},
		{"al_ice", false},
		{"al.ice", false},
		{"al/ice", false},
		{"..", false},
		{"api", false},
		{"API", false},
		{"ålice", false},
	} {
		err := ValidOwner(tc.login)
		if (err == nil) != tc.ok {
			t.Errorf("ValidOwner(%q) = %v, want ok=%v", tc.login, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidOwner(%q) error %v is not ErrInvalidName", tc.login, err)
		}
	}
}

func TestValidRepoName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"r", true},
		{"my-repo_1.0", true},
		{".github", true},
		{"...", true},
		{strings.Repeat("r", 100), true},
		{"", false},
		{strings.Repeat("r", 101), false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a b", false},
		{"a%2fb", false},
		{"repo.git", false},
		{"repo.GIT", false},
		{"ünicode", false},
	} {
		err := ValidRepoName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidRepoName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidRepoName(%q) error %v is not ErrInvalidName", tc.name, err)
		}
	}
}

func TestCreateRepo(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r1 := mustCreate(t, f, "Alice", "Project")
	r2 := mustCreate(t, f, "alice", "other")
	if r1.ID != firstRepoID || r2.ID != firstRepoID+1 {
		t.Errorf("ids = %d, %d; want %d, %d", r1.ID, r2.ID, firstRepoID, firstRepoID+1)
	}
	if r1.DefaultBranch != "main" || r1.Private {
		t.Errorf("new repo = %+v, want public with default branch main", r1)
	}
	// The owner keeps the case it was first created with.
	if r2.Owner != "Alice" {
		t.Errorf("owner of second repo = %q, want canonical %q", r2.Owner, "Alice")
	}

	for _, tc := range []struct {
		owner, name string
		want        error
	}{
		{"alice", "project", ErrExists},
		{"ALICE", "PROJECT", ErrExists},
		{"bad_owner", "x", ErrInvalidName},
		{"alice", "..", ErrInvalidName},
		{"alice", "x.git", ErrInvalidName},
		{"api", "x", ErrInvalidName},
	} {
		if _, err := f.CreateRepo(tc.owner, tc.name); !errors.Is(err, tc.want) {
			t.Errorf("CreateRepo(%s/%s) = %v, want %v", tc.owner, tc.name, err, tc.want)
		}
	}

	got, ok := f.Lookup("ALICE", "pRoJeCt")
	if !ok || got != r1 {
		t.Errorf("Lookup case-insensitive = %+v, %v; want %+v", got, ok, r1)
	}
	if got, ok := f.LookupID(r2.ID); !ok || got != r2 {
		t.Errorf("LookupID = %+v, %v; want %+v", got, ok, r2)
	}
	if repos := f.Repos(); len(repos) != 2 || repos[0] != r1 || repos[1] != r2 {
		t.Errorf("Repos() = %+v", repos)
	}

	dir, err := f.GitDir("alice", "project")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.reposDir, "1000.git"); dir != want {
		t.Errorf("GitDir = %q, want %q", dir, want)
	}
	if !strings.HasPrefix(dir, f.opts.Dir) {
		t.Errorf("GitDir %q is not under Options.Dir %q", dir, f.opts.Dir)
	}
	if got := mustGit(t, dir, "--git-dir", dir, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Errorf("bare repository? %q", got)
	}
	if got := mustGit(t, dir, "--git-dir", dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("HEAD = %q", got)
	}
	if got := mustGit(t, dir, "--git-dir", dir, "config", "uploadpack.allowReachableSHA1InWant"); got != "true" {
		t.Errorf("uploadpack.allowReachableSHA1InWant = %q", got)
	}
}

func TestRenameTransferDeleteErrors(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "a")
	mustCreate(t, f, "alice", "b")
	mustCreate(t, f, "bob", "a")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"rename unknown", f.Rename("alice", "zzz", "y"), ErrNotFound},
		{"rename onto existing", f.Rename("alice", "a", "B"), ErrExists},
		{"rename invalid", f.Rename("alice", "a", "no/slash"), ErrInvalidName},
		{"transfer unknown", f.Transfer("carol", "a", "bob"), ErrNotFound},
		{"transfer onto existing", f.Transfer("alice", "a", "BOB"), ErrExists},
		{"transfer invalid owner", f.Transfer("alice", "a", "-x"), ErrInvalidName},
		{"delete unknown", f.Delete("alice", "zzz"), ErrNotFound},
		{"private unknown", f.SetPrivate("alice", "zzz", true), ErrNotFound},
		{"default branch unknown", f.SetDefaultBranch("alice", "zzz", "dev"), ErrNotFound},
		{"default branch invalid", f.SetDefaultBranch("alice", "a", "bad..name"), ErrInvalidName},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := f.GitDir("alice", "zzz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GitDir unknown: %v", err)
	}
	// Nothing moved.
	for _, n := range [][2]string{{"alice", "a"}, {"alice", "b"}, {"bob", "a"}} {
		if _, ok := f.Lookup(n[0], n[1]); !ok {
			t.Errorf("%s/%s vanished", n[0], n[1])
		}
	}
}

// resolveName is the API/git view of a name: the current canonical full
// name it leads to, whether via a redirect, or "" if unknown.
func resolveName(f *Forge, owner, name string) (full string, id int64, redirected bool) {
	v, redirected, ok := f.reg.resolve(owner, name)
	if !ok {
		return "", 0, false
	}
	return v.FullName(), v.ID, redirected
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r := mustCreate(t, f, "alice", "a")
	dir, _ := f.GitDir("alice", "a")

	steps := []struct {
		do    func() error
		check map[string]string // name -> "full name" or "full name (redirect)" or ""
	}{
		{func() error { return f.Rename("alice", "a", "b") }, map[string]string{
			"alice/a": "alice/b (redirect)", "alice/b": "alice/b",
		}},
		{func() error { return f.Rename("alice", "b", "c") }, map[string]string{
			"alice/a": "alice/c (redirect)", "alice/b": "alice/c (redirect)", "ALICE/C": "alice/c",
		}},
		{func() error { return f.Transfer("alice", "c", "Bob") }, map[string]string{
			"alice/a": "Bob/c (redirect)", "alice/c": "Bob/c (redirect)", "bob/c": "Bob/c",
		}},
		// Case-only rename: new canonical case, no redirect needed.
		{func() error { return f.Rename("bob", "c", "C") }, map[string]string{
			"bob/c": "Bob/C", "alice/a": "Bob/C (redirect)",
		}},
		// Renaming back onto an old name makes it current again.
		{func() error { return f.Transfer("bob", "c", "alice") }, map[string]string{
			"alice/c": "alice/C", "bob/c": "alice/C (redirect)",
		}},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		for name, want := range s.check {
			o, n, _ := strings.Cut(name, "/")
			full, id, redir := resolveName(f, o, n)
			got := full
			if redir {
				got += " (redirect)"
			}
			if got != want || (full != "" && id != r.ID) {
				t.Errorf("step %d: %s -> %q (id %d), want %q (id %d)", i, name, got, id, want, r.ID)
			}
		}
	}
	if d, _ := f.GitDir("alice", "C"); d != dir {
		t.Errorf("git dir moved: %q -> %q", dir, d)
	}

	// A new repository at an old name wins over the redirect.
	nr := mustCreate(t, f, "alice", "a")
	if full, id, redir := resolveName(f, "alice", "a"); full != "alice/a" || redir || id != nr.ID {
		t.Errorf("after re-create: %q %d %v", full, id, redir)
	}
	if full, _, redir := resolveName(f, "alice", "b"); full != "alice/C" || !redir {
		t.Errorf("other redirects must survive: alice/b -> %q %v", full, redir)
	}

	// Deleting drops every redirect to the repository.
	if err := f.Delete("alice", "c"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice/b", "bob/c", "alice/c"} {
		o, n, _ := strings.Cut(name, "/")
		if full, _, _ := resolveName(f, o, n); full != "" {
			t.Errorf("after delete %s -> %q", name, full)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("git dir still there after delete: %v", err)
	}
	if len(f.reg.redirects) != 0 {
		t.Errorf("redirects left: %v", f.reg.redirects)
	}
	// The re-created repository is untouched.
	if _, ok := f.Lookup("alice", "a"); !ok {
		t.Error("alice/a vanished")
	}

	// A redirect replaced by a new repository is gone for good: it does not
	// come back when that repository is deleted.
	mustCreate(t, f, "carol", "x")
	if err := f.Rename("carol", "x", "y"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, f, "carol", "x")
	if err := f.Delete("carol", "x"); err != nil {
		t.Fatal(err)
	}
	if full, _, _ := resolveName(f, "carol", "x"); full != "" {
		t.Errorf("carol/x -> %q after its replacement was deleted, want nothing", full)
	}
}

func TestSetPrivateAndDefaultBranch(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "a")
	if err := f.SetPrivate("ALICE", "A", true); err != nil {
		t.Fatal(err)
	}
	if err := f.SetDefaultBranch("alice", "a", "develop"); err != nil {
		t.Fatal(err)
	}
	r, _ := f.Lookup("alice", "a")
	if !r.Private || r.DefaultBranch != "develop" {
		t.Errorf("repo = %+v", r)
	}
	if got := bareGit(t, f, "alice", "a", "symbolic-ref", "HEAD"); got != "refs/heads/develop" {
		t.Errorf("HEAD = %q", got)
	}
}
