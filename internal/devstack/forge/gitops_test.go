package forge

import (
	"errors"
	"strings"
	"testing"
)

func TestCommit(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")

	c1 := mustCommit(t, f, "alice", "r", "main", map[string]string{
		"README.md":          "hello\n",
		"dir/sub/deep.txt":   "deep\n",
		"dir/keep.txt":       "keep\n",
		"empty":              "",
		"unicode/naïve.txt":  "ü\n",
		"spaces in name.txt": "s\n",
	}, "first\n\nbody line")
	c2 := mustCommit(t, f, "alice", "r", "main", map[string]string{
		"README.md":        "hello again\n",
		"dir/sub/deep.txt": DeleteFile,
		"not-there":        DeleteFile,
		"new.txt":          "new\n",
	}, "second")

	if got := bareGit(t, f, "alice", "r", "rev-parse", "refs/heads/main"); got != c2 {
		t.Errorf("main = %s, want %s", got, c2)
	}
	if got := bareGit(t, f, "alice", "r", "rev-parse", c2+"^"); got != c1 {
		t.Errorf("parent of second = %s, want %s", got, c1)
	}
	if got := bareGit(t, f, "alice", "r", "rev-list", "--count", c1); got != "1" {
		t.Errorf("first commit is not a root: %s commits", got)
	}
	files := bareGit(t, f, "alice", "r", "-c", "core.quotePath=false", "ls-tree", "-r", "--name-only", c2)
	want := "README.md\ndir/keep.txt\nempty\nnew.txt\nspaces in name.txt\nunicode/naïve.txt"
	if files != want {
		t.Errorf("files of second commit:\n%s\nwant:\n%s", files, want)
	}
	if got := bareGit(t, f, "alice", "r", "show", c2+":README.md"); got != "hello again" {
		t.Errorf("README = %q", got)
	}
	if got := bareGit(t, f, "alice", "r", "show", c1+":dir/sub/deep.txt"); got != "deep" {
		t.Errorf("deep.txt in first commit = %q", got)
	}
	if got := bareGit(t, f, "alice", "r", "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", c1); got != "Forge Bot <forge@example.invalid>|Forge Bot <forge@example.invalid>|first\n\nbody line" {
		t.Errorf("identity/message = %q", got)
	}
	if got := bareGit(t, f, "alice", "r", "log", "-1", "--format=%at %ct", c2); got != "1700000120 1700000120" {
		t.Errorf("dates = %q", got)
	}

	// An empty change makes a new commit with the same tree.
	c3 := mustCommit(t, f, "alice", "r", "main", nil, "empty")
	if c3 == c2 || bareGit(t, f, "alice", "r", "rev-parse", c3+"^{tree}") != bareGit(t, f, "alice", "r", "rev-parse", c2+"^{tree}") {
		t.Errorf("empty commit %s vs %s", c3, c2)
	}

	// A file can replace a directory and the other way round.
	c4 := mustCommit(t, f, "alice", "r", "main", map[string]string{"dir": "now a file\n", "new.txt/inner": "now a dir\n"}, "d/f")
	files = bareGit(t, f, "alice", "r", "ls-tree", "-r", "--name-only", c4)
	if !strings.Contains(files, "\ndir\n") || strings.Contains(files, "dir/keep.txt") || !strings.Contains(files, "new.txt/inner") {
		t.Errorf("d/f swap:\n%s", files)
	}

	// A new branch starts from the default branch.
	b1 := mustCommit(t, f, "alice", "r", "feature/x", map[string]string{"f.txt": "f\n"}, "feature")
	if got := bareGit(t, f, "alice", "r", "rev-parse", b1+"^"); got != c4 {
		t.Errorf("new branch parent = %s, want main tip %s", got, c4)
	}

	// The scratch area is left empty.
	if ents := dirEntries(t, f.tmpDir); len(ents) != 0 {
		t.Errorf("temp files left behind: %v", ents)
	}
	r, _ := f.Lookup("alice", "r")
	v, _ := f.reg.byID(r.ID)
	if v.SizeKB <= 0 {
		t.Errorf("size = %d KiB, want > 0", v.SizeKB)
	}
}

func TestCommitRootWhenNoDefaultBranch(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")
	sha := mustCommit(t, f, "alice", "r", "other", map[string]string{"a": "a"}, "root")
	if got := bareGit(t, f, "alice", "r", "rev-list", "--count", sha); got != "1" {
		t.Errorf("want a root commit, history has %s commits", got)
	}
}

func TestCommitErrors(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")
	for _, tc := range []struct {
		name   string
		repo   string
		branch string
		files  map[string]string
		want   error
	}{
		{"unknown repo", "nope", "main", nil, ErrNotFound},
		{"empty branch", "r", "", nil, ErrInvalidName},
		{"branch with ..", "r", "a..b", nil, ErrInvalidName},
		{"branch with space", "r", "a b", nil, ErrInvalidName},
		{"branch .lock", "r", "x.lock", nil, ErrInvalidName},
		{"branch leading slash", "r", "/x", nil, ErrInvalidName},
		{"absolute path", "r", "main", map[string]string{"/etc/passwd": "x"}, ErrInvalidPath},
		{"dotdot", "r", "main", map[string]string{"a/../../b": "x"}, ErrInvalidPath},
		{"dot", "r", "main", map[string]string{"./a": "x"}, ErrInvalidPath},
		{"double slash", "r", "main", map[string]string{"a//b": "x"}, ErrInvalidPath},
		{"trailing slash", "r", "main", map[string]string{"a/": "x"}, ErrInvalidPath},
		{".git", "r", "main", map[string]string{".git/config": "x"}, ErrInvalidPath},
		{".GIT nested", "r", "main", map[string]string{"a/.GIT/hooks": "x"}, ErrInvalidPath},
		{"backslash", "r", "main", map[string]string{`a\b`: "x"}, ErrInvalidPath},
		{"newline", "r", "main", map[string]string{"a\nb": "x"}, ErrInvalidPath},
		{"empty path", "r", "main", map[string]string{"": "x"}, ErrInvalidPath},
	} {
		_, err := f.Commit("alice", tc.repo, tc.branch, tc.files, "m")
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if out := bareGit(t, f, "alice", "r", "for-each-ref"); out != "" {
		t.Errorf("refs written despite errors: %s", out)
	}
	if ents := dirEntries(t, f.tmpDir); len(ents) != 0 {
		t.Errorf("temp files left behind: %v", ents)
	}
}

func TestCommitDeterministic(t *testing.T) {
	t.Parallel()
	run := func() []string {
		f := newForge(t)
		mustCreate(t, f, "alice", "r")
		a := mustCommit(t, f, "alice", "r", "main", map[string]string{"a": "1"}, "one")
		b := mustCommit(t, f, "alice", "r", "main", map[string]string{"b/c": "2"}, "two")
		c, err := f.ForcePush("alice", "r", "main", map[string]string{"a": "1"}, "one")
		if err != nil {
			t.Fatal(err)
		}
		return []string{a, b, c}
	}
	x, y := run(), run()
	if strings.Join(x, ",") != strings.Join(y, ",") {
		t.Errorf("same operations gave different ids:\n%v\n%v", x, y)
	}
	if x[2] == x[0] {
		t.Errorf("force push with the same content reused the old commit id %s", x[0])
	}
}

func TestForcePush(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")
	c1 := mustCommit(t, f, "alice", "r", "main", map[string]string{"a": "1", "b": "2"}, "one")
	c2 := mustCommit(t, f, "alice", "r", "main", map[string]string{"c": "3"}, "two")
	keep := mustCommit(t, f, "alice", "r", "keep", map[string]string{"k": "k"}, "other branch") // child of c2

	n1, err := f.ForcePush("alice", "r", "main", map[string]string{"only.txt": "x", "gone": DeleteFile}, "rewrite")
	if err != nil {
		t.Fatal(err)
	}
	if got := bareGit(t, f, "alice", "r", "rev-parse", "main"); got != n1 {
		t.Errorf("main = %s, want %s", got, n1)
	}
	if got := bareGit(t, f, "alice", "r", "rev-list", "--count", n1); got != "1" {
		t.Errorf("force-pushed commit has history: %s", got)
	}
	if got := bareGit(t, f, "alice", "r", "ls-tree", "-r", "--name-only", n1); got != "only.txt" {
		t.Errorf("files = %q", got)
	}
	// c1 and c2 are still reachable from "keep", so they must survive.
	for _, sha := range []string{c1, c2, keep} {
		bareGit(t, f, "alice", "r", "cat-file", "-e", sha+"^{commit}")
	}

	// Rewrite "keep" too: now the old history is unreachable and pruned.
	if _, err := f.ForcePush("alice", "r", "keep", map[string]string{"k": "k2"}, "rewrite keep"); err != nil {
		t.Fatal(err)
	}
	dir, _ := f.GitDir("alice", "r")
	for _, sha := range []string{c1, c2, keep} {
		if out, err := gitCmd(t, dir, "--git-dir", dir, "cat-file", "-e", sha); err == nil {
			t.Errorf("unreachable %s still present (%s)", sha, out)
		}
	}
	// ForcePush creates missing branches too.
	if _, err := f.ForcePush("alice", "r", "fresh", map[string]string{"z": "z"}, "fresh"); err != nil {
		t.Fatal(err)
	}
	if ents := dirEntries(t, f.tmpDir); len(ents) != 0 {
		t.Errorf("temp files left behind: %v", ents)
	}
}

func TestImport(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "big")
	var s strings.Builder
	s.WriteString("blob\nmark :1\ndata 6\nhello\n\n")
	for i := 1; i <= 3; i++ {
		s.WriteString("commit refs/heads/main\n")
		s.WriteString("mark :" + string(rune('1'+i)) + "\n")
		s.WriteString("committer Gen <gen@example.invalid> 1700000000 +0000\n")
		s.WriteString("data 4\nmsg\n")
		if i > 1 {
			s.WriteString("from :" + string(rune('0'+i)) + "\n")
		}
		s.WriteString("M 100644 :1 file" + string(rune('0'+i)) + ".txt\n\n")
	}
	s.WriteString("reset refs/tags/v1\nfrom :4\n\n")
	if err := f.Import("alice", "big", strings.NewReader(s.String())); err != nil {
		t.Fatal(err)
	}
	if got := bareGit(t, f, "alice", "big", "rev-list", "--count", "main"); got != "3" {
		t.Errorf("imported commits = %s", got)
	}
	if got := bareGit(t, f, "alice", "big", "rev-parse", "v1"); got != bareGit(t, f, "alice", "big", "rev-parse", "main") {
		t.Errorf("tag v1 = %s", got)
	}
	// Commits stack on top of imported history.
	sha := mustCommit(t, f, "alice", "big", "main", map[string]string{"more": "x"}, "after import")
	if got := bareGit(t, f, "alice", "big", "rev-list", "--count", sha); got != "4" {
		t.Errorf("history after commit = %s", got)
	}

	if err := f.Import("alice", "big", strings.NewReader("this is not a fast-import stream\n")); err == nil {
		t.Error("garbage stream accepted")
	}
	if err := f.Import("alice", "nope", strings.NewReader("")); !errors.Is(err, ErrNotFound) {
		t.Errorf("import into unknown repo: %v", err)
	}
}
