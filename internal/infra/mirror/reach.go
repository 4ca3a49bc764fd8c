package mirror

import (
	"context"
	"errors"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"gitfleet/internal/infra/errclass"
)

// Reaches reports whether commit sha is reachable from the branches and
// tags of the local mirror of remoteURL, provided the mirror holds exactly
// the refs refsDigest names (what a sync just saw the remote advertise):
// then the remote has the commit reachable too, which is what a fetch by
// SHA would have proved, without a byte from the remote. held is false when
// the mirror does not hold those refs (none here, or synced at another
// moment): the caller must ask the remote instead.
func (m *Mirrors) Reaches(ctx context.Context, remoteURL, refsDigest, sha string) (held, reachable bool, err error) {
	if !plumbing.IsHash(sha) {
		return false, false, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", sha)
	}
	if refsDigest == "" {
		return false, false, nil
	}
	path := m.Path(remoteURL)
	repo, err := git.PlainOpen(path)
	if err != nil {
		return false, false, nil
	}
	refs, err := repo.References()
	if err != nil {
		return false, false, nil
	}
	var tips []*plumbing.Reference
	_ = refs.ForEach(func(r *plumbing.Reference) error { tips = append(tips, r); return nil })
	if RefsDigest(tips) != refsDigest {
		return false, false, nil
	}
	touch(path)
	st, release := withPackWriter(repo.Storer, path)
	defer release()
	want := plumbing.NewHash(sha)
	if st.HasEncodedObject(want) != nil {
		return true, false, nil // a mirror holds every object its refs reach
	}
	// Breadth first from every tip: the commit a re-collection looks for is
	// usually a few commits below the default branch's tip.
	seen := map[plumbing.Hash]bool{}
	var queue []plumbing.Hash
	for _, r := range tips {
		if r.Type() != plumbing.HashReference || !(r.Name().IsBranch() || r.Name().IsTag()) {
			continue
		}
		h, err := peel(st, r.Hash())
		if err != nil {
			return true, false, err
		}
		if !h.IsZero() && !seen[h] {
			seen[h] = true
			queue = append(queue, h)
		}
	}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return true, false, err
		}
		h := queue[0]
		queue = queue[1:]
		if h == want {
			return true, true, nil
		}
		c, err := object.GetCommit(st, h)
		if err != nil {
			return true, false, err
		}
		for _, p := range c.ParentHashes {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return true, false, nil
}

// peel follows annotated tags to the commit they name; a tag of a tree or
// blob names no commit (zero hash).
func peel(st interface {
	EncodedObject(plumbing.ObjectType, plumbing.Hash) (plumbing.EncodedObject, error)
}, h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		o, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch o.Type() {
		case plumbing.CommitObject:
			return h, nil
		case plumbing.TagObject:
			t, err := object.DecodeTag(nil, o)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			h = t.Target
		default:
			return plumbing.ZeroHash, nil
		}
	}
	return plumbing.ZeroHash, errors.New("tag chain longer than 10")
}

// HoldsCommit reports whether the local mirror of remoteURL holds commit
// sha and so can be read for it without a request to the remote (a commit
// a force push left behind included: it is the commit asked for, checked
// against its id when read). A missing or unreadable mirror holds nothing.
func (m *Mirrors) HoldsCommit(remoteURL, sha string) bool {
	if !plumbing.IsHash(sha) {
		return false
	}
	path := m.Path(remoteURL)
	repo, err := git.PlainOpen(path)
	if err != nil {
		return false
	}
	st, release := withPackWriter(repo.Storer, path)
	defer release()
	o, err := st.EncodedObject(plumbing.AnyObject, plumbing.NewHash(sha))
	if err != nil || o.Type() != plumbing.CommitObject {
		return false
	}
	touch(path)
	return true
}
