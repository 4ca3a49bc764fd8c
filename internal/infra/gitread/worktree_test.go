package gitread

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"

	"gitfleet/internal/devstack/gittest"
)

// A linked work tree (`git worktree add`: its .git is a file naming the
// repository's worktrees/<name>) reads as the repository it belongs to:
// its refs, its packs, its blobs.
func TestLinkedWorktreeReadsItsRepository(t *testing.T) {
	dir, info := smallRepo(t)
	tree := filepath.Join(t.TempDir(), "wt")
	branch := strings.TrimPrefix(allRefsOf(t, dir)[0], "refs/heads/")
	gittest.Git(t, dir, nil, "worktree", "add", "--force", tree, branch)
	if fi, err := os.Lstat(filepath.Join(tree, ".git")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the work tree's .git is not a file: %v", err)
	}

	want, err := ReadRefs(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadRefs(tree)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Refs) != len(want.Refs) || len(got.Refs) == 0 {
		t.Fatalf("the work tree has %d refs, its repository %d", len(got.Refs), len(want.Refs))
	}
	for _, packs := range []bool{false, true} {
		repo, opts, closer := openRepo(t, tree, packs)
		_, st := walkAll(t, repo, opts, allRefs(t, repo)...)
		closer()
		if st.Blobs != info.Blobs {
			t.Errorf("packs %v: %d blobs read through the work tree, the repository holds %d", packs, st.Blobs, info.Blobs)
		}
	}
}

// What a .git file may name is bounded: a work tree of the repository its
// commondir names, or a repository (a submodule's); nothing else.
func TestGitFileThatIsNoWorktreeIsRefused(t *testing.T) {
	dir, _ := smallRepo(t)
	other := t.TempDir() // a directory that claims dir as its common directory
	if err := os.WriteFile(filepath.Join(other, "commondir"), []byte(dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, gitFile string
		want          error
	}{
		{"not a git link", "hello\n", git.ErrRepositoryNotExists},
		{"names nothing", "gitdir: /no/such/dir\n", git.ErrRepositoryNotExists},
		{"borrows a commondir", "gitdir: " + other + "\n", ErrUnsafe},
		{"too long", "gitdir: " + strings.Repeat("x", 5000), git.ErrRepositoryNotExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := t.TempDir()
			if err := os.WriteFile(filepath.Join(tree, ".git"), []byte(tc.gitFile), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Open(tree, 0); !errors.Is(err, tc.want) {
				t.Errorf("Open: %v, want %v", err, tc.want)
			}
			if _, err := ReadRefs(tree); !errors.Is(err, tc.want) {
				t.Errorf("ReadRefs: %v, want %v", err, tc.want)
			}
		})
	}

	// A submodule's .git names its repository directly (no commondir).
	sub := t.TempDir()
	if err := os.WriteFile(filepath.Join(sub, ".git"), []byte("gitdir: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, closer, err := Open(sub, 0); err != nil {
		t.Errorf("a .git file naming a repository: %v", err)
	} else {
		closer.Close()
	}
}

func allRefsOf(t *testing.T, dir string) []string {
	t.Helper()
	l, err := ReadRefs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range l.Refs {
		if strings.HasPrefix(r.Name, "refs/heads/") {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		t.Fatal("no branch")
	}
	return names
}
