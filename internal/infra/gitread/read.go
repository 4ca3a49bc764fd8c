package gitread

import (
	"errors"
	"fmt"
	"io"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrTooLarge is wrapped by ReadBlob's error for a blob over the limit.
var ErrTooLarge = errors.New("gitread: blob larger than the limit")

// ReadBlob returns the content of blob h and its size. With limit > 0, a blob
// larger than limit is not read: ReadBlob returns nil, the blob's size and an
// error wrapping ErrTooLarge. A missing blob is an error wrapping
// plumbing.ErrObjectNotFound. PackReader reads blobs faster and with far
// less garbage.
func ReadBlob(repo *git.Repository, h plumbing.Hash, limit int64) ([]byte, int64, error) {
	return readBlob(repo.Storer, h, limit, nil)
}

// ReadBlobInto is ReadBlob reusing buf's memory when it is large enough: a
// reader that handles blobs one after another allocates once, not per blob.
// The returned slice aliases buf.
func ReadBlobInto(repo *git.Repository, h plumbing.Hash, limit int64, buf []byte) ([]byte, int64, error) {
	return readBlob(repo.Storer, h, limit, buf)
}

// ReadBlob is the package's ReadBlob on w's repository, safe to call from
// any goroutine, also while a Walk runs (see Walker).
func (w *Walker) ReadBlob(h plumbing.Hash, limit int64) ([]byte, int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return readBlob(w.s, h, limit, nil)
}

func readBlob(s storer.EncodedObjectStorer, h plumbing.Hash, limit int64, buf []byte) ([]byte, int64, error) {
	if limit > 0 {
		size, err := s.EncodedObjectSize(h)
		if err != nil {
			return nil, 0, fmt.Errorf("blob %s: %w", h, DataError(err))
		}
		if size > limit {
			return nil, size, fmt.Errorf("blob %s: %d bytes: %w", h, size, ErrTooLarge)
		}
	}
	obj, err := s.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", h, DataError(err))
	}
	if limit > 0 && obj.Size() > limit { // the size check raced a changed object store
		return nil, obj.Size(), fmt.Errorf("blob %s: %d bytes: %w", h, obj.Size(), ErrTooLarge)
	}
	data, err := readObject(obj, buf)
	if err != nil {
		return nil, 0, err
	}
	return data, int64(len(data)), nil
}

// DefaultObjectCacheBytes is Open's go-git object cache size when none is
// given.
const DefaultObjectCacheBytes = 16 << 20

// Open opens the repository at path (a bare repository, a work tree with
// a .git directory, or a linked work tree's, see linkedGitDir) tuned for walking and reading blobs: the pack files stay
// open between reads (go-git's PlainOpen reopens a pack for every object,
// which makes a walk nearly three times slower) and go-git's object cache holds
// cacheBytes (0: DefaultObjectCacheBytes; PlainOpen's is 96 MiB). Close the
// returned Closer when done. The repository is not safe for concurrent use
// (a Walker serializes its own use of it).
func Open(path string, cacheBytes int64) (*git.Repository, io.Closer, error) {
	if cacheBytes <= 0 {
		cacheBytes = DefaultObjectCacheBytes
	}
	dir, err := gitDir(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Its files are read within it, regular files only (see repoFS).
	st := filesystem.NewStorageWithOptions(newRepoFS(dir), cache.NewObjectLRU(cache.FileSize(cacheBytes)),
		filesystem.Options{KeepDescriptors: true, ExclusiveAccess: true})
	repo, err := git.Open(st, nil)
	if err != nil {
		_ = st.Close() // the open error is the one to report
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	return repo, st, nil
}
