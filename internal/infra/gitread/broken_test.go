package gitread

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gitfleet/internal/devstack/brokenrepo"
)

// The corpus of broken repositories, at the reading layer: refs git would
// ignore are ignored and counted, what is missing or damaged below a
// readable commit is skipped and counted, and a damaged pack, commit or
// tree is an error wrapping ErrCorrupt (the scan parks on it: reading again
// cannot help). workflows/broken_repos_test.go takes the same corpus
// through the whole scan.
func TestBrokenRepositories(t *testing.T) {
	parent := t.TempDir()
	for _, c := range brokenrepo.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Heavy && testing.Short() {
				t.Skip("heavy case")
			}
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			refs, err := ReadRefs(dir)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(c.Reason, "malformed ") || strings.HasSuffix(c.Reason, " ref file") || strings.HasSuffix(c.Reason, " symbolic ref") {
				if refs.Ignored[c.Reason] == 0 {
					t.Errorf("nothing ignored as %q: %v", c.Reason, refs.Ignored)
				}
			}
			st, err := walkBranchesAndTags(t, dir, refs)
			if c.Want == brokenrepo.Parked {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Commits >= 0 && int64(st.Commits) != c.Commits {
				t.Errorf("%d commits diffed, want %d", st.Commits, c.Commits)
			}
			missing := st.MissingTips + st.MissingCommits + st.MissingTrees + st.MissingBlobs
			switch {
			case c.Reason == "missing object" && missing == 0,
				c.Reason == "corrupt object" && st.CorruptBlobs == 0,
				c.Reason != "missing object" && missing > 0,
				c.Reason != "corrupt object" && st.CorruptBlobs > 0:
				t.Errorf("stats %+v, reason %q", st, c.Reason)
			}
		})
	}
}

// walkBranchesAndTags walks every branch and tag of the repository at dir, as the scan
// does, reading nothing but sizes.
func walkBranchesAndTags(t *testing.T, dir string, refs *RefList) (Stats, error) {
	t.Helper()
	packs, err := OpenPacks(dir)
	if err != nil {
		return Stats{}, err
	}
	defer packs.Close()
	repo, closer, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var ranges []Range
	for _, r := range refs.Refs {
		if strings.HasPrefix(r.Name, "refs/heads/") || strings.HasPrefix(r.Name, "refs/tags/") {
			ranges = append(ranges, Range{Ref: r.Name, Tip: r.Hash})
		}
	}
	return New(repo, Options{Packs: packs}).Walk(context.Background(), ranges, func(Blob) error { return nil })
}
