package mirror

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/infra/gitread"
)

// A repository of many refs syncs into one packed-refs file, follows the
// remote's creations, moves and deletions, and leaves no loose ref files:
// go-git alone wrote a file per ref and then scanned packed-refs once per
// ref (50,001 branches: 15-22 s a collection).
func TestSyncPacksManyRefs(t *testing.T) {
	fg, m := setup(t)
	ctx := context.Background()
	if _, err := fg.CreateRepo("acme", "refs"); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, fg, "acme", "refs", "a.txt")
	c2 := mustCommit(t, fg, "acme", "refs", "b.txt")
	dir, err := fg.GitDir("acme", "refs")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"refs/heads/main": c2}
	var cmds strings.Builder
	for i := range 3000 {
		name := fmt.Sprintf("refs/heads/b%04d", i)
		fmt.Fprintf(&cmds, "create %s %s\n", name, c1)
		want[name] = c1
	}
	updateRefs(t, dir, cmds.String())
	url := fg.CloneURL("acme", "refs")
	if _, err := m.Sync(ctx, url); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, m.Path(url), want)

	// Deletions, a move and a new tag: the next sync follows each.
	cmds.Reset()
	for i := range 1000 {
		name := fmt.Sprintf("refs/heads/b%04d", i)
		fmt.Fprintf(&cmds, "delete %s\n", name)
		delete(want, name)
	}
	fmt.Fprintf(&cmds, "update refs/heads/b2999 %s\ncreate refs/tags/v1 %s\n", c2, c2)
	want["refs/heads/b2999"], want["refs/tags/v1"] = c2, c2
	updateRefs(t, dir, cmds.String())
	if _, err := m.Sync(ctx, url); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, m.Path(url), want)
}

func updateRefs(t *testing.T, dir, cmds string) {
	t.Helper()
	cmd := exec.Command("git", "update-ref", "--stdin")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(cmds)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git update-ref: %v: %s", err, out)
	}
}

// checkRefs holds the mirror at path to exactly want, all in packed-refs.
func checkRefs(t *testing.T, path string, want map[string]string) {
	t.Helper()
	list, err := gitread.ReadRefs(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range list.Refs {
		got[r.Name] = r.Hash.String()
	}
	if len(got) != len(want) {
		t.Errorf("mirror has %d refs, want %d", len(got), len(want))
	}
	for name, h := range want {
		if got[name] != h {
			t.Errorf("mirror %s = %q, want %s", name, got[name], h)
		}
	}
	loose := 0
	_ = filepath.WalkDir(filepath.Join(path, "refs"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			loose++
		}
		return nil
	})
	if loose != 0 {
		t.Errorf("%d loose ref files; want every ref in packed-refs", loose)
	}
}
