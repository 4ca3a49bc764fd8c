package gitread

import (
	"compress/flate"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"

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

// DataError tells damaged data from everything else.
func TestDataError(t *testing.T) {
	for _, tt := range []struct {
		err     error
		corrupt bool
	}{
		{zlib.ErrHeader, true},
		{fmt.Errorf("read: %w", zlib.ErrChecksum), true},
		{flate.CorruptInputError(12), true},
		{io.ErrUnexpectedEOF, true},
		{objfile.ErrHeader, true},
		{packfile.ErrZLib.AddDetails("eof"), true},
		{packfile.ErrInvalidDelta, true},
		{fmt.Errorf("%w: already", ErrCorrupt), true},
		{plumbing.ErrObjectNotFound, false},
		{&fs.PathError{Op: "read", Path: "x", Err: syscall.EIO}, false},
		{context.Canceled, false},
		{nil, false},
	} {
		got := DataError(tt.err)
		if errors.Is(got, ErrCorrupt) != tt.corrupt || (tt.err != nil && !errors.Is(got, tt.err)) {
			t.Errorf("DataError(%v) = %v, corrupt: want %t", tt.err, got, tt.corrupt)
		}
	}
}
