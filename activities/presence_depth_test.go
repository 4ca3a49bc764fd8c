package activities

import (
	"context"
	"slices"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/gitread"
)

// Reading a tip's trees for the findings is bounded in depth like the
// walk: a tree nested deeper than gitread.MaxTreeDepth is skipped, as the
// walk refused it (a hole), not a recursion to Go's fatal stack limit,
// nor an error that would refuse the rest of the scan.
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
		bottom := gittest.Hash("blob", []byte("deep down\n")) // DeepTree's blob
		tt := &tipTrees{ctx: context.Background(), reader: packs.NewReader(), repo: repo,
			want: map[plumbing.Hash]bool{bottom: true}, memo: map[memoKey][]plumbing.Hash{}}
		found, err := tt.object(c.Commit, 0)
		if err != nil {
			t.Fatalf("a tree %d deep: %v", tc.depth, err)
		}
		if got := slices.Contains(found, bottom); got == tc.over {
			t.Errorf("a tree %d deep: blob at the bottom found: %t, want %t", tc.depth, got, !tc.over)
		}
		packs.Close()
	}
}
