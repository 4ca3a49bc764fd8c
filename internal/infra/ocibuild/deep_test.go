package ocibuild

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// A commit whose trees nest deeper than gitread.MaxTreeDepth is refused,
// over a limit (a runner's build would otherwise recurse once per level,
// to Go's fatal stack limit), not built; one just within it is built.
func TestBuildRefusesDeepTrees(t *testing.T) {
	for depth, want := range map[int]error{gitread.MaxTreeDepth: nil, gitread.MaxTreeDepth + 1: gitread.ErrLimit} {
		dir := filepath.Join(t.TempDir(), "deep.git")
		c := gittest.DeepTree(depth)
		c.Write(t, dir)
		_, _, err := Build(context.Background(), open(t, dir), source(c.Commit.String()), nil, t.TempDir())
		if cl := errclass.Classify(err); !errors.Is(err, want) || (want != nil && cl.Class != errclass.Permanent) {
			t.Errorf("depth %d: %v (%+v), want %v", depth, err, cl, want)
		}
	}
}
