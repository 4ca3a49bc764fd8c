package gitread

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/brokenrepo"
)

// The walk tells Options.Missed of every blob it counts as missing or
// corrupt, with where it was met, so a scan can record it and try it again
// later without walking the history again.
func TestWalkTellsWhatItMissed(t *testing.T) {
	parent := t.TempDir()
	for _, c := range brokenrepo.Cases() {
		if c.Reason != "missing object" && c.Reason != "corrupt object" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			refs, err := ReadRefs(dir)
			if err != nil {
				t.Fatal(err)
			}
			packs, err := OpenPacks(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer packs.Close()
			repo, closer, err := Open(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			var ranges []Range
			for _, r := range refs.Refs {
				if strings.HasPrefix(r.Name, "refs/heads/") {
					ranges = append(ranges, Range{Ref: r.Name, Tip: r.Hash})
				}
			}
			var missing, corrupt int
			st, err := New(repo, Options{Packs: packs, Missed: func(b Blob, err error) error {
				if b.Path == "" || b.Commit.IsZero() || b.Ref == "" || b.Hash.IsZero() {
					t.Errorf("missed blob without its place: %+v", b)
				}
				switch {
				case errors.Is(err, plumbing.ErrObjectNotFound):
					missing++
				case errors.Is(err, ErrCorrupt):
					corrupt++
				default:
					t.Errorf("missed %s: %v", b.Hash, err)
				}
				return nil
			}}).Walk(context.Background(), ranges, func(Blob) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if missing != st.MissingBlobs || corrupt != st.CorruptBlobs || missing+corrupt == 0 {
				t.Fatalf("told of %d missing and %d corrupt blobs; counted %d and %d", missing, corrupt, st.MissingBlobs, st.CorruptBlobs)
			}
		})
	}
}
