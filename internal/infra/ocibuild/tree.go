package ocibuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// maxLinkTarget is Linux's PATH_MAX less the terminating NUL: a longer
// target cannot be a symbolic link on a runner host.
const maxLinkTarget = 4095

// treeWriter writes a tree's entries to a tar stream, depth first.
type treeWriter struct {
	ctx   context.Context
	st    storer.EncodedObjectStorer
	tw    *tar.Writer
	buf   []byte
	stats Stats
	depth int // of the tree being written below the root
}

// header is the one place entries get their fixed fields.
func header(typ byte, name string, mode int64) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     mode,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
}

// tree writes the entries of tree h, whose path is prefix ("" for the root,
// else ending in "/").
func (w *treeWriter) tree(prefix string, h plumbing.Hash) error {
	obj, err := readSmall(w.st, plumbing.TreeObject, h)
	if err != nil {
		return objectErr(err, "tree "+displayPath(prefix), h)
	}
	t, err := object.DecodeTree(w.st, obj)
	if err != nil {
		return errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, fmt.Errorf("tree %s (%s): %w", displayPath(prefix), h, err))
	}
	entries, err := sortedEntries(prefix, t.Entries)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		name := prefix + e.Name
		switch e.Mode {
		case filemode.Dir:
			if err := w.tw.WriteHeader(header(tar.TypeDir, name+"/", 0o755)); err != nil {
				return err
			}
			w.stats.Dirs++
			if w.depth == gitread.MaxTreeDepth {
				// Refused, not written: the writer recurses once per level.
				return &gitread.LimitError{What: "tree depth", Detail: fmt.Sprintf("trees nest more than %d deep", gitread.MaxTreeDepth)}
			}
			w.depth++
			err := w.tree(name+"/", e.Hash)
			w.depth--
			if err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated:
			if err := w.file(name, 0o644, e.Hash); err != nil {
				return err
			}
		case filemode.Executable:
			if err := w.file(name, 0o755, e.Hash); err != nil {
				return err
			}
		case filemode.Symlink:
			if err := w.symlink(name, e.Hash); err != nil {
				return err
			}
		case filemode.Submodule:
			w.stats.SubmodulesSkipped++
		default:
			return errclass.Permanentf(errclass.ReasonInvalidInput, "%q: unsupported mode %o", name, uint32(e.Mode))
		}
	}
	return nil
}

// sortedEntries checks a tree's names and orders its entries as their tar
// names sort: a directory by its name and "/", which is Git's own tree order,
// kept even if the tree object is not sorted.
func sortedEntries(prefix string, entries []object.TreeEntry) ([]object.TreeEntry, error) {
	seen := make(map[string]struct{}, len(entries))
	for _, e := range entries {
		if err := checkName(e.Name); err != nil {
			return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "tree %s: %w", displayPath(prefix), err)
		}
		if _, dup := seen[e.Name]; dup {
			return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "tree %s: %q appears twice", displayPath(prefix), e.Name)
		}
		seen[e.Name] = struct{}{}
	}
	sorted := append([]object.TreeEntry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sortKey(sorted[i]) < sortKey(sorted[j]) })
	return sorted, nil
}

func sortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// checkName refuses the names that would let an entry escape its directory
// or land in a Git directory when the layer is extracted.
func checkName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return fmt.Errorf("unsafe entry name %q", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("unsafe entry name %q", name)
	case strings.EqualFold(name, ".git"):
		return fmt.Errorf("entry name %q is reserved for Git", name)
	}
	return nil
}

// file streams a blob into the tar, checking it against its id as it goes.
func (w *treeWriter) file(name string, mode int64, h plumbing.Hash) error {
	obj, err := w.blob(name, h)
	if err != nil {
		return err
	}
	hdr := header(tar.TypeReg, name, mode)
	hdr.Size = obj.Size()
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	r, err := obj.Reader()
	if err != nil {
		return objectErr(err, name, h)
	}
	defer r.Close()
	sum := plumbing.NewHasher(plumbing.BlobObject, obj.Size())
	src := io.TeeReader(&ctxReader{ctx: w.ctx, r: io.LimitReader(r, obj.Size())}, sum)
	n, err := io.CopyBuffer(w.tw, src, w.buf)
	if err != nil {
		if w.ctx.Err() != nil {
			return w.ctx.Err()
		}
		return objectErr(err, name, h)
	}
	if n != obj.Size() {
		return errclass.Wrap(errclass.Retryable, ReasonCorruptObject, fmt.Errorf("%q: blob %s has %d of its %d bytes", name, h, n, obj.Size()))
	}
	if got := sum.Sum(); got != h {
		return errclass.Wrap(errclass.Retryable, ReasonCorruptObject, fmt.Errorf("%q: blob %s hashes to %s", name, h, got))
	}
	w.stats.Files++
	w.stats.Bytes += n
	return nil
}

// symlink stores a link with the blob as its target, as Git checks it out.
func (w *treeWriter) symlink(name string, h plumbing.Hash) error {
	obj, err := w.blob(name, h)
	if err != nil {
		return err
	}
	if obj.Size() == 0 || obj.Size() > maxLinkTarget {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "%q: link target of %d bytes", name, obj.Size())
	}
	mem, err := readWhole(obj, h)
	if err != nil {
		return objectErr(err, name, h)
	}
	r, err := mem.Reader()
	if err != nil {
		return err
	}
	target, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if bytes.IndexByte(target, 0) >= 0 {
		return errclass.Permanentf(errclass.ReasonInvalidInput, "%q: link target holds a NUL byte", name)
	}
	hdr := header(tar.TypeSymlink, name, 0o777)
	hdr.Linkname = string(target)
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	w.stats.Symlinks++
	return nil
}

func (w *treeWriter) blob(name string, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := w.st.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return nil, objectErr(err, name, h)
	}
	if obj.Type() != plumbing.BlobObject {
		return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "%q: object %s is a %s, not a blob", name, h, obj.Type())
	}
	return obj, nil
}

// objectErr classifies a failure to read an object the tree names: the
// mirror lacks it (a partial or interrupted fetch) or cannot read it, and a
// new fetch is the cure either way.
func objectErr(err error, what string, h plumbing.Hash) error {
	wrapped := fmt.Errorf("%s: object %s: %w", what, h, err)
	var known *errclass.Error
	if errors.As(err, &known) {
		return errclass.Wrap(known.Class, known.Reason, wrapped)
	}
	reason := ReasonCorruptObject
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		reason = ReasonMissingObject
	}
	return errclass.Wrap(errclass.Retryable, reason, wrapped)
}

func displayPath(prefix string) string {
	if prefix == "" {
		return "/"
	}
	return strings.TrimSuffix(prefix, "/")
}

// ctxReader lets a cancellation stop the copy of a large file.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
