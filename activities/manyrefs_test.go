package activities_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/devstack/gittest"
)

// manyRefsRepo is a bare repository of 4 commits, one new file each (the
// last holds a secret), and n branches on them besides main, packed as
// `git pack-refs --all` leaves them.
func manyRefsRepo(t testing.TB, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "refs.git")
	gittest.Git(t, "", nil, "init", "--quiet", "--bare", "--initial-branch=main", dir)
	git := func(stdin string, args ...string) string {
		return strings.TrimSpace(gittest.Git(t, dir, strings.NewReader(stdin), args...))
	}
	var commits []string
	entries := ""
	for i := range 4 {
		content := fmt.Sprintf("setting %d = %d\n", i, i*7)
		if i == 3 {
			content = "GH=" + ghToken + "\n"
		}
		blob := git(content, "hash-object", "-w", "--stdin")
		entries += fmt.Sprintf("100644 blob %s\tf%d.txt\n", blob, i)
		args := []string{"commit-tree", git(entries, "mktree"), "-m", fmt.Sprintf("c%d", i)}
		if len(commits) > 0 {
			args = append(args, "-p", commits[len(commits)-1])
		}
		commits = append(commits, git("", args...))
	}
	var cmds strings.Builder
	fmt.Fprintf(&cmds, "create refs/heads/main %s\n", commits[3])
	for i := range n {
		fmt.Fprintf(&cmds, "create refs/heads/b%06d %s\n", i, commits[i%4])
	}
	git(cmds.String(), "update-ref", "--stdin")
	git("", "pack-refs", "--all")
	git("", "repack", "-a", "-d", "-q")
	return dir
}
