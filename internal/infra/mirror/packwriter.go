package mirror

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// packStorage is a mirror's go-git storage whose fetches write the
// received pack and its index with gitread's indexer instead of go-git's
// packfile parser (which inflates, resolves and hashes every object on one
// goroutine, allocating as it goes). go-git still does everything else:
// negotiation, transport and ref updates. go-git's fetch hands the pack to
// a storer's PackfileWriter when it has one
// (packfile.UpdateObjectStorage).
//
// Its object lookups are gitread's too (see objectReader): go-git would
// load the mirror's pack indexes onto the heap whole to answer them.
type packStorage struct {
	*filesystem.Storage
	dir  string // the repository's directory (bare: holds objects/)
	objs *objectReader
}

// withPackWriter wraps a repository's storage; storages other than go-git's
// file system storage are returned as they are. Call release when done
// with it.
func withPackWriter(s storage.Storer, dir string) (_ storage.Storer, release func()) {
	fs, ok := s.(*filesystem.Storage)
	if !ok {
		return s, func() {}
	}
	ps := &packStorage{Storage: fs, dir: dir, objs: &objectReader{dir: dir}}
	return ps, ps.objs.close
}

// EncodedObject reads object h (of type t, or any) from the mirror's packs
// or loose objects.
func (s *packStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.objs.object(t, h)
}

// HasEncodedObject reports plumbing.ErrObjectNotFound when h is missing.
func (s *packStorage) HasEncodedObject(h plumbing.Hash) error {
	_, _, err := s.objs.info(h)
	return err
}

// EncodedObjectSize returns the size of object h.
func (s *packStorage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	_, size, err := s.objs.info(h)
	return size, err
}

var _ storer.PackfileWriter = (*packStorage)(nil)

// PackfileWriter returns a writer that streams a received pack to a
// temporary file under objects/pack, indexing it as it arrives; its Close
// completes the index and moves pack-<checksum>.pack, then
// pack-<checksum>.idx into place (the pack first, so a crash never leaves
// an index without its pack) and makes the storage see the new pack.
func (s *packStorage) PackfileWriter() (io.WriteCloser, error) {
	dir := filepath.Join(s.dir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, tmpPackPrefix)
	if err != nil {
		return nil, err
	}
	w := &packWriter{s: s, dir: dir, f: f}
	w.ix = gitread.NewIndexer(f, gitread.IndexOptions{Base: s.base})
	return w, nil
}

// Prefixes of the temporary files of a pack being received (removed with
// the fetch that wrote them, or under the mirror's lock after a crash, see
// removeTemp).
const (
	tmpPackPrefix = "tmp_pack_"
	tmpIdxPrefix  = "tmp_idx_"
)

// base reads an object of the mirror: the base of a delta in a thin pack.
// (go-git does not ask for thin packs, see TestIncrementalSyncPacks, but
// the indexer completes them all the same.)
func (s *packStorage) base(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	return s.objs.read(h)
}

type packWriter struct {
	s      *packStorage
	dir    string
	f      *os.File
	ix     *gitread.Indexer
	closed bool
}

// testHookPackIndexed, when set, sees the index of every pack written.
var testHookPackIndexed func(*gitread.Index)

func (w *packWriter) Write(p []byte) (int, error) { return w.ix.Write(p) }

// ReadFrom lets io.Copy read straight into the indexer's buffers.
func (w *packWriter) ReadFrom(r io.Reader) (int64, error) { return w.ix.ReadFrom(r) }

func (w *packWriter) Close() (err error) {
	if w.closed {
		return nil
	}
	w.closed = true
	tmp := w.f.Name()
	defer func() {
		if w.f != nil {
			w.f.Close()
		}
		if tmp != "" {
			os.Remove(tmp)
		}
	}()
	ix, err := w.ix.Finish()
	if errors.Is(err, gitread.ErrEmpty) {
		return nil // go-git reports the empty pack itself
	}
	if err != nil {
		if errors.Is(err, gitread.ErrCorrupt) {
			// Damaged in transit, maybe: Retryable, where damaged data on
			// disk is not (Sync refetches once and then gives up).
			return errclass.Wrap(errclass.Retryable, errclass.ReasonCorruptPack,
				fmt.Errorf("%w: %w", packfile.ErrMalformedPackFile, err))
		}
		return err
	}
	if testHookPackIndexed != nil {
		testHookPackIndexed(ix)
	}
	if ix.Objects() == 0 {
		return nil
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	base := filepath.Join(w.dir, "pack-"+ix.Checksum.String())
	if err := os.Chmod(tmp, 0o444); err != nil {
		return err
	}
	if err := os.Rename(tmp, base+".pack"); err != nil {
		return err
	}
	tmp = ""
	if err := writeIndex(w.dir, base, ix); err != nil {
		return err
	}
	// The storages list the packs once and cache their indexes: make them
	// load them again, the new one included.
	w.s.Reindex()
	w.s.objs.reopen()
	return nil
}

// writeIndex writes the index of the pack base+".pack" to base+".idx",
// through a temporary file renamed into place, and before it the entries
// its indexer refused (an object over a limit: a delta bomb, a delta
// cycle), if any, to base+".refused": the pack is kept whole as received
// (its checksum holds, the next fetch negotiates from the commits it
// brought), its refused entries are left out of the index, and readers
// accept the pack and tell those objects refused (gitread.Packs.Refused)
// through that file. It comes first: an index without it would not match
// its pack.
func writeIndex(dir, base string, ix *gitread.Index) error {
	if len(ix.Refused) > 0 {
		if err := writeTemp(dir, base+".refused", ix.WriteRefusals); err != nil {
			return err
		}
	}
	return writeTemp(dir, base+".idx", func(w io.Writer) error {
		_, err := ix.WriteTo(w)
		return err
	})
}

// writeTemp writes a file with write, read only, to a temporary file
// renamed to path.
func writeTemp(dir, path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(dir, tmpIdxPrefix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(0o444); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
