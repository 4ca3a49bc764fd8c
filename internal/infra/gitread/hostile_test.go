package gitread

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gitfleet/internal/devstack/brokenrepo"
)

// The hostile repositories of issue 20 at the reading layer, read as a
// scan reads them (the refs, the walk, every blob it reports within the
// scan's 10 MiB limit): each parked case ends with the error its reason
// names, within bounded memory; the others end cleanly, their unsafe refs
// ignored and counted. workflows/hostile_repos_test.go takes the same
// corpus through the whole scan.
func TestHostileRepositories(t *testing.T) {
	parent := t.TempDir()
	for _, c := range brokenrepo.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			n := allocated(func() { err = scanLike(t, dir, c) })
			t.Logf("%v; %d KiB allocated", err, n>>10)
			if n > 64<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
			if c.Want != brokenrepo.Parked {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var limit *LimitError
			switch {
			case errors.As(err, &limit):
				if got := "over a limit: " + limit.What; got != c.Reason {
					t.Errorf("%s, want %q", got, c.Reason)
				}
			case errors.Is(err, ErrUnsafe):
				if c.Reason != "unsafe repository" {
					t.Errorf("unsafe, want %q", c.Reason)
				}
			default:
				t.Errorf("err = %v, want %q", err, c.Reason)
			}
		})
	}
}

// scanLike reads the repository at dir as a scan does.
func scanLike(t *testing.T, dir string, c brokenrepo.Case) error {
	refs, err := ReadRefs(dir)
	if err != nil {
		return err
	}
	if strings.HasSuffix(c.Reason, " ref file") && refs.Ignored[c.Reason] == 0 {
		t.Errorf("nothing ignored as %q: %v", c.Reason, refs.Ignored)
	}
	packs, err := OpenPacks(dir)
	if err != nil {
		return err
	}
	defer packs.Close()
	repo, closer, err := Open(dir, 0)
	if err != nil {
		return err
	}
	defer closer.Close()
	var ranges []Range
	for _, r := range refs.Refs {
		ranges = append(ranges, Range{Ref: r.Name, Tip: r.Hash})
	}
	// Objects over a limit are read around, as the scan does: the walk
	// passes them to Missed, the reads return them; only a repository of
	// which nothing could be read is refused, with the first refusal.
	r := packs.NewReader()
	var refused []error
	read := 0
	missed := func(_ Blob, err error) error {
		if errors.Is(err, ErrLimit) {
			refused = append(refused, err)
		}
		return nil
	}
	_, err = New(repo, Options{Packs: packs, Missed: missed}).Walk(context.Background(), ranges, func(b Blob) error {
		_, _, err := r.Read(b.Hash, 10<<20, nil)
		switch {
		case err == nil, errors.Is(err, ErrTooLarge):
			read++
			return nil
		case errors.Is(err, ErrLimit):
			refused = append(refused, err)
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if c.Want == brokenrepo.Partial && (len(refused) == 0 || read == 0) {
		t.Errorf("%d objects refused, %d read; want both", len(refused), read)
	}
	if read == 0 && len(refused) > 0 {
		return refused[0]
	}
	return nil
}
