package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"

	"gitfleet/internal/infra/gitread"
)

// refBuffer is a mirror's storage for one fetch whose ref reads and writes
// stay in memory until flush writes them all as one packed-refs file.
//
// go-git's own file system storage reads a ref as a loose file and then by
// scanning packed-refs from the top, and writes every ref as a loose file:
// a fetch that checks and sets n refs costs n file creations on a first
// sync and n² packed-refs lines once the refs are packed (a repository of
// 50,001 branches took 15-22 s to sync and scan, 9-11x gitleaks). Here the
// refs are read once (gitread.ReadRefs), each check is a map lookup, and
// the result is one file, which is also what `git pack-refs` would leave.
type refBuffer struct {
	*packStorage
	refs    map[plumbing.ReferenceName]plumbing.Hash
	changed bool
}

// bufferRefs reads the mirror's refs into a refBuffer over st.
func bufferRefs(st *packStorage) (*refBuffer, error) {
	list, err := gitread.ReadRefs(st.dir)
	if err != nil {
		return nil, err
	}
	b := &refBuffer{packStorage: st, refs: make(map[plumbing.ReferenceName]plumbing.Hash, len(list.Refs))}
	for _, r := range list.Refs {
		b.refs[plumbing.ReferenceName(r.Name)] = r.Hash
	}
	return b, nil
}

// buffered is whether name is one of the refs the buffer holds: those
// under refs/. HEAD and other top-level names stay with go-git's storage.
func buffered(name plumbing.ReferenceName) bool { return strings.HasPrefix(name.String(), "refs/") }

func (b *refBuffer) Reference(name plumbing.ReferenceName) (*plumbing.Reference, error) {
	if !buffered(name) {
		return b.packStorage.Reference(name)
	}
	h, ok := b.refs[name]
	if !ok {
		return nil, plumbing.ErrReferenceNotFound
	}
	return plumbing.NewHashReference(name, h), nil
}

func (b *refBuffer) SetReference(r *plumbing.Reference) error {
	if !buffered(r.Name()) {
		return b.packStorage.SetReference(r)
	}
	if r.Type() != plumbing.HashReference {
		return fmt.Errorf("mirror refs: symbolic ref %s under refs/ is not kept", r.Name())
	}
	b.refs[r.Name()] = r.Hash()
	b.changed = true
	return nil
}

// CheckAndSetReference sets r if the ref still is old (go-git's
// compare-and-swap; nothing else writes a mirror's refs under its lock).
func (b *refBuffer) CheckAndSetReference(r, old *plumbing.Reference) error {
	if !buffered(r.Name()) {
		return b.packStorage.CheckAndSetReference(r, old)
	}
	if old != nil {
		if cur, ok := b.refs[old.Name()]; ok && cur != old.Hash() {
			return storage.ErrReferenceHasChanged
		}
	}
	return b.SetReference(r)
}

func (b *refBuffer) RemoveReference(name plumbing.ReferenceName) error {
	if !buffered(name) {
		return b.packStorage.RemoveReference(name)
	}
	if _, ok := b.refs[name]; ok {
		delete(b.refs, name)
		b.changed = true
	}
	return nil
}

func (b *refBuffer) IterReferences() (storer.ReferenceIter, error) {
	out := make([]*plumbing.Reference, 0, len(b.refs)+1)
	if head, err := b.packStorage.Reference(plumbing.HEAD); err == nil {
		out = append(out, head)
	}
	for name, h := range b.refs {
		out = append(out, plumbing.NewHashReference(name, h))
	}
	return storer.NewReferenceSliceIter(out), nil
}

// flush writes the refs as packed-refs (to a temporary file, then renamed
// over the old one) and removes the loose ref files, which would override
// them. A crash between the two leaves refs from before the fetch, which
// the next sync corrects: every object any ref names is already stored.
// Names git would refuse are left out (gitread ignores them too).
func (b *refBuffer) flush() error {
	if !b.changed {
		return nil
	}
	names := make([]string, 0, len(b.refs))
	for name := range b.refs {
		if gitread.ValidRefName(name.String()) {
			names = append(names, name.String())
		}
	}
	slices.Sort(names)
	var buf bytes.Buffer
	buf.WriteString("# pack-refs with: sorted \n")
	for _, name := range names {
		fmt.Fprintf(&buf, "%s %s\n", b.refs[plumbing.ReferenceName(name)], name)
	}
	tmp, err := os.CreateTemp(b.dir, "packed-refs.tmp-")
	if err != nil {
		return fmt.Errorf("mirror refs: %w", err)
	}
	_, err = tmp.Write(buf.Bytes())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(b.dir, "packed-refs"))
	}
	if err != nil {
		os.Remove(tmp.Name()) //nolint:errcheck // best effort: the write failed already
		return fmt.Errorf("mirror refs: %w", err)
	}
	b.changed = false
	return removeLooseRefs(filepath.Join(b.dir, "refs"))
}

// removeLooseRefs removes every file under dir (a mirror's refs/); the
// directories stay, as git leaves them.
func removeLooseRefs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("mirror refs: %w", err)
		case d.Type().IsRegular():
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("mirror refs: %w", err)
			}
		}
		return nil
	})
}
