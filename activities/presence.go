package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/store"
)

// finalize is Store.Finalize with, for a run that walked every ref to its
// tip (Complete or Covered), where the scope's findings stand at the run's
// tips: which of the blobs holding findings each tip's tree holds (a
// secret is present while one of its blobs is in some tip's tree, removed
// once none is).
func (s *Shards) finalize(ctx context.Context, repo *repository, packs *gitread.Packs, tips map[string]plumbing.Hash,
	in store.FinalizeInput) (shard.Receipt, error) {
	if err := s.applyIgnore(ctx, repo, tips, &in); err != nil {
		return shard.Receipt{}, fmt.Errorf("suppressions of the findings: %w", err)
	}
	if in.Complete || in.Covered {
		p, err := s.presence(ctx, repo, packs, in.ScopeID, tips)
		if err != nil {
			return shard.Receipt{}, fmt.Errorf("presence of the findings: %w", err)
		}
		in.Presence = p
	}
	return s.Store.Finalize(ctx, in)
}

// presence finds the findings' blobs in the trees of the tips that moved
// since the last computation; a tip that did not keeps its rows (every
// blob of its tree had been seen when they were written, so no finding
// since is in it). A blob is looked for only at the paths it was ever
// introduced at: a tip's tree holds a blob at some path only if a commit
// below the tip introduced it there, and the scope's walks, which cover
// all history below its tips, record those paths for every blob holding a
// finding. A scope whose paths are not complete (see migration 00009)
// reads the tips' whole trees instead.
func (s *Shards) presence(ctx context.Context, repo *repository, packs *gitread.Packs, scopeID int64,
	tips map[string]plumbing.Hash) (*store.Presence, error) {
	basis, err := s.Store.PresenceBasis(ctx, scopeID)
	if err != nil {
		return nil, err
	}
	p := &store.Presence{UpTo: basis.UpTo, Tips: make(map[string]string, len(tips)), Refs: map[string][][]byte{}}
	for ref, tip := range tips {
		p.Tips[ref] = tip.String()
	}
	if basis.Unchanged(p.Tips) {
		return nil, nil // what was written last stands
	}
	t := &tipTrees{ctx: ctx, reader: packs.NewReader(), repo: repo.repo, want: wantedBlobs(basis),
		memo: map[memoKey][]plumbing.Hash{}}
	if basis.PathsComplete {
		t.paths = pathTree(basis.Paths)
	}
	refs := make([]string, 0, len(tips))
	for ref := range tips {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		if basis.Tips[ref] == p.Tips[ref] {
			continue
		}
		var held [][]byte
		if len(t.want) > 0 {
			found, err := t.object(tips[ref], 0)
			if err != nil {
				return nil, err
			}
			for _, h := range found {
				held = append(held, append([]byte(nil), h[:]...))
			}
		}
		p.Refs[ref] = held
	}
	return p, nil
}

// wantedBlobs is the set of the basis' blobs.
func wantedBlobs(basis store.PresenceBasis) map[plumbing.Hash]bool {
	want := make(map[plumbing.Hash]bool, len(basis.Blobs))
	for _, b := range basis.Blobs {
		var h plumbing.Hash
		if copy(h[:], b) == len(h) {
			want[h] = true
		}
	}
	return want
}

// pathNode is a directory of the paths blobs are looked for at: its
// subdirectories, and its files with the blobs looked for there.
type pathNode struct {
	dirs  map[string]*pathNode
	files map[string][]plumbing.Hash
}

// pathTree builds the directories of paths (blob, as a string → paths).
func pathTree(paths map[string][]string) *pathNode {
	root := &pathNode{}
	for blob, ps := range paths {
		var h plumbing.Hash
		if copy(h[:], blob) != len(h) {
			continue
		}
		for _, p := range ps {
			n := root
			dir, name, ok := strings.Cut(p, "/")
			for ; ok; dir, name, ok = strings.Cut(name, "/") {
				if n.dirs[dir] == nil {
					if n.dirs == nil {
						n.dirs = map[string]*pathNode{}
					}
					n.dirs[dir] = &pathNode{}
				}
				n = n.dirs[dir]
			}
			if n.files == nil {
				n.files = map[string][]plumbing.Hash{}
			}
			n.files[dir] = append(n.files[dir], h)
		}
	}
	return root
}

// tipTrees finds the wanted blobs in the trees of tips: at their paths
// (paths), or anywhere in the trees (paths nil). Each distinct tree is
// read once per directory of paths it is met at, however many tips share
// it.
type tipTrees struct {
	ctx    context.Context
	reader *gitread.PackReader
	repo   *git.Repository
	want   map[plumbing.Hash]bool
	paths  *pathNode
	// memo is, per tree read, the wanted blobs under it (sorted).
	memo  map[memoKey][]plumbing.Hash
	reads int
	depth int // of the tree being read below the tip's root
}

// memoKey is a tree read for the paths under a directory (nil: all).
type memoKey struct {
	tree plumbing.Hash
	dir  *pathNode
}

func (t *tipTrees) read(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	if t.reads++; t.reads%1024 == 0 {
		if err := t.ctx.Err(); err != nil {
			return 0, nil, err
		}
	}
	typ, raw, err := t.reader.ReadObject(h, nil)
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return typ, raw, err
	}
	// Not in a pack the scan opened (loose, alternates, a pack written since).
	obj, err := t.repo.Storer.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, nil, gitread.DataError(err)
	}
	r, err := obj.Reader()
	if err != nil {
		return 0, nil, gitread.DataError(err)
	}
	defer r.Close()
	raw, err = io.ReadAll(r)
	return obj.Type(), raw, gitread.DataError(err)
}

// object returns the wanted blobs a tip holds: through tags, a commit's
// tree, a tree, or a blob itself.
func (t *tipTrees) object(h plumbing.Hash, depth int) ([]plumbing.Hash, error) {
	if depth > gitread.MaxTagChain {
		return nil, fmt.Errorf("%w: tag %s: a chain of more than %d tags", gitread.ErrCorrupt, h, gitread.MaxTagChain)
	}
	typ, raw, err := t.read(h)
	if err != nil {
		return nil, err
	}
	switch typ {
	case plumbing.TagObject:
		target, ok := headerHash(raw, "object ")
		if !ok {
			return nil, fmt.Errorf("%w: tag %s: malformed", gitread.ErrCorrupt, h)
		}
		return t.object(target, depth+1)
	case plumbing.CommitObject:
		tree, ok := headerHash(raw, "tree ")
		if !ok {
			return nil, fmt.Errorf("%w: commit %s: malformed", gitread.ErrCorrupt, h)
		}
		return t.tree(tree, nil, t.paths)
	case plumbing.TreeObject:
		return t.tree(h, raw, t.paths)
	case plumbing.BlobObject:
		if t.want[h] {
			return []plumbing.Hash{h}, nil
		}
	}
	return nil, nil
}

// tree returns the wanted blobs under tree h (raw: its content, if read)
// at the paths of dir, or anywhere if dir is nil.
func (t *tipTrees) tree(h plumbing.Hash, raw []byte, dir *pathNode) ([]plumbing.Hash, error) {
	key := memoKey{h, dir}
	if found, ok := t.memo[key]; ok {
		return found, nil
	}
	if raw == nil {
		typ, r, err := t.read(h)
		if err != nil {
			return nil, err
		}
		if typ != plumbing.TreeObject {
			return nil, fmt.Errorf("%w: %s is a %s, not a tree", gitread.ErrCorrupt, h, typ)
		}
		raw = r
	}
	var found []plumbing.Hash
	for len(raw) > 0 {
		sp := bytes.IndexByte(raw, ' ')
		nul := bytes.IndexByte(raw, 0)
		if sp < 0 || nul < sp || len(raw) < nul+1+len(plumbing.ZeroHash) {
			return nil, fmt.Errorf("%w: tree %s: malformed", gitread.ErrCorrupt, h)
		}
		mode, name := string(raw[:sp]), raw[sp+1:nul]
		var e plumbing.Hash
		copy(e[:], raw[nul+1:])
		raw = raw[nul+1+len(e):]
		switch {
		case mode == "40000" || mode == "040000":
			sub := dir
			if dir != nil {
				if sub = dir.dirs[string(name)]; sub == nil {
					continue
				}
			}
			// The walk refused trees nested deeper (holes: nothing below
			// was scanned, so no finding is known from there); a tip read
			// here is bounded the same way, never recursing to Go's stack
			// limit, and skips them too.
			if t.depth == gitread.MaxTreeDepth {
				continue
			}
			t.depth++
			under, err := t.tree(e, nil, sub)
			t.depth--
			if err != nil {
				return nil, err
			}
			found = append(found, under...)
		case mode == "160000": // a submodule's commit: not in this repository
		case dir == nil:
			if t.want[e] {
				found = append(found, e)
			}
		case t.want[e] && slices.Contains(dir.files[string(name)], e):
			found = append(found, e)
		}
	}
	slices.SortFunc(found, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	found = slices.Compact(found)
	t.memo[key] = found
	return found, nil
}

// headerHash reads the hash of a commit's or tag's first header.
func headerHash(raw []byte, prefix string) (plumbing.Hash, bool) {
	if len(raw) < len(prefix)+40 || !strings.HasPrefix(string(raw[:len(prefix)]), prefix) {
		return plumbing.ZeroHash, false
	}
	hex := string(raw[len(prefix) : len(prefix)+40])
	if !plumbing.IsHash(hex) {
		return plumbing.ZeroHash, false
	}
	return plumbing.NewHash(hex), true
}
