package gitread

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"gitfleet/internal/devstack/gittest"
)

// get and put are the delta base cache's lookup and add, for blobs (as
// TestBaseCache uses it).
func (c *baseCache) get(pack int, off int64) []byte {
	data, _ := c.lookup(pack, off)
	return data
}

func (c *baseCache) put(pack int, off int64, data []byte) { c.add(pack, off, TypeBlob, data) }

// A walkMode is a way a Walker reads commits, trees and tags: through
// go-git only (the builder's repository in memory), or through
// Options.Packs, the builder's repository on disk laid out as layout says.
type walkMode struct {
	name   string
	layout layout
}

type layout int

const (
	inMemory    layout = iota // go-git only
	packed                    // every object in one pack, with deltas
	packedLoose               // half the objects packed, half loose
	staleLoose                // loose only: no pack
	stalePacks                // packed after OpenPacks: every read falls back to go-git
)

// walkModes are the modes the Walker tests run in.
var walkModes = []walkMode{
	{"go-git", inMemory},
	{"packs", packed},
	{"packs+loose", packedLoose},
	{"loose", staleLoose},
	{"packs-after-open", stalePacks},
}

// newBuilder returns the mode's builder: in memory for go-git, else in a
// bare repository on disk (loose objects until prepare).
func (m walkMode) newBuilder(t testing.TB) *builder {
	t.Helper()
	if m.layout == inMemory {
		return newBuilder(t)
	}
	dir := filepath.Join(t.TempDir(), "repo.git")
	gittest.Git(t, filepath.Dir(dir), nil, "init", "-q", "--bare", dir)
	st := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	repo, err := git.Open(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &builder{t: t, repo: repo, time: 1700000000, dir: dir}
}

// prepare lays out what the builder wrote, reopens its repository as a
// scan does (Open) and returns opts with the mode's Packs.
func (m walkMode) prepare(t testing.TB, b *builder, opts Options) Options {
	t.Helper()
	if m.layout == inMemory {
		return opts
	}
	var ps *Packs
	openPacks := func() {
		var err error
		if ps, err = OpenPacks(b.dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
	}
	if m.layout == stalePacks {
		openPacks()
	}
	objs := strings.Fields(gittest.Git(t, b.dir, nil, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))
	sort.Strings(objs)
	switch m.layout {
	case packedLoose:
		var half []string
		for i, o := range objs {
			if i%2 == 0 {
				half = append(half, o)
			}
		}
		packObjects(t, b.dir, half)
	case packed, stalePacks:
		packObjects(t, b.dir, objs)
	}
	if m.layout != stalePacks {
		openPacks()
	}
	repo, closer, err := Open(b.dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	b.repo = repo
	opts.Packs = ps
	return opts
}

// packObjects packs objs (with long delta chains) and deletes their loose
// files.
func packObjects(t testing.TB, dir string, objs []string) {
	t.Helper()
	if len(objs) == 0 {
		return
	}
	gittest.Git(t, dir, strings.NewReader(strings.Join(objs, "\n")+"\n"), "pack-objects", "-q", "--window=50", "--depth=50",
		filepath.Join(dir, "objects", "pack", "pack"))
	gittest.Git(t, dir, nil, "prune-packed")
}

func repoModeName(packs bool) string {
	if packs {
		return "packs"
	}
	return "go-git"
}

// openRepo opens the repository at dir as a scan does, and with packs its
// packs for the Walker's options. close closes both.
func openRepo(t testing.TB, dir string, packs bool) (*git.Repository, Options, func()) {
	t.Helper()
	repo, closer, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !packs {
		return repo, Options{}, func() { closer.Close() }
	}
	ps, err := OpenPacks(dir)
	if err != nil {
		closer.Close()
		t.Fatal(err)
	}
	return repo, Options{Packs: ps}, func() { ps.Close(); closer.Close() }
}
