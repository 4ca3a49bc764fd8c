package activities

import (
	"context"
	"errors"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/gitread"
)

// Reading a tip's trees for the findings is bounded in depth like the
// walk: a tree nested deeper than gitread.MaxTreeDepth is over a limit,
// not a recursion to Go's fatal stack limit.
func TestPresenceTreeDepthIsBounded(t *testing.T) {
	for _, tc := range []struct {
		depth int
		over  bool
	}{{gitread.MaxTreeDepth - 1, false}, {gitread.MaxTreeDepth + 1, true}} {
		c := gittest.DeepTree(tc.depth)
		dir := t.TempDir()
		if err := c.WriteRepo(dir); err != nil {
			t.Fatal(err)
		}
		packs, err := gitread.OpenPacks(dir)
		if err != nil {
			t.Fatal(err)
		}
		repo, err := git.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		tt := &tipTrees{ctx: context.Background(), reader: packs.NewReader(), repo: repo,
			want: map[plumbing.Hash]bool{}, memo: map[memoKey][]plumbing.Hash{}}
		_, err = tt.object(c.Commit, 0)
		if tc.over != errors.Is(err, gitread.ErrLimit) {
			t.Errorf("a tree %d deep: %v; want over a limit: %t", tc.depth, err, tc.over)
		}
		packs.Close()
	}
}
