package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/infra/gitread"
)

// objectReader answers a mirror storage's object lookups with gitread's
// pack reader rather than go-git's: go-git reads every pack index whole
// onto the heap (and builds a reverse map of it besides) at its first
// lookup, about 40 bytes per object of the mirror, where gitread maps the
// index and searches it in place. A fetch asks for a few objects only: the
// refs' tips (are they wanted?), the commits it offers as haves, a thin
// pack's bases.
type objectReader struct {
	dir string // the repository

	mu    sync.Mutex
	packs *gitread.Packs
	r     *gitread.PackReader
}

// reader returns the pack reader, opening the packs at first use. Hold mu.
func (o *objectReader) reader() (*gitread.PackReader, error) {
	if o.r == nil {
		ps, err := gitread.OpenPacks(o.dir)
		if err != nil {
			return nil, err
		}
		o.packs, o.r = ps, ps.NewReader()
	}
	return o.r, nil
}

// reopen makes the next lookup see the packs as they are now (after a pack
// was added).
func (o *objectReader) reopen() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeLocked()
}

func (o *objectReader) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeLocked()
}

func (o *objectReader) closeLocked() {
	if o.packs != nil {
		_ = o.packs.Close() // read only: nothing is lost
	}
	o.packs, o.r = nil, nil
}

// notFound maps gitread's not-found errors to go-git's own value, which
// go-git compares with ==.
func notFound(err error) error {
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return plumbing.ErrObjectNotFound
	}
	return err
}

// info returns the type and size of object h.
func (o *objectReader) info(h plumbing.Hash) (plumbing.ObjectType, int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, err := o.reader()
	if err != nil {
		return plumbing.InvalidObject, 0, err
	}
	t, size, err := r.ObjectSize(h)
	return t, size, notFound(err)
}

// read returns the type and content of object h.
func (o *objectReader) read(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, err := o.reader()
	if err != nil {
		return plumbing.InvalidObject, nil, err
	}
	t, data, err := r.ReadObject(h, nil)
	return t, data, notFound(err)
}

// object is go-git's view of object h: its type and size, its content read
// when asked for (go-git asks for the existence of objects it never reads).
func (o *objectReader) object(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	typ, size, err := o.info(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && typ != t {
		return nil, plumbing.ErrObjectNotFound
	}
	return &lazyObject{o: o, h: h, t: typ, size: size}, nil
}

// lazyObject is a read-only plumbing.EncodedObject whose content is read
// from the mirror by Reader.
type lazyObject struct {
	o    *objectReader
	h    plumbing.Hash
	t    plumbing.ObjectType
	size int64
}

func (l *lazyObject) Hash() plumbing.Hash             { return l.h }
func (l *lazyObject) Type() plumbing.ObjectType       { return l.t }
func (l *lazyObject) SetType(plumbing.ObjectType)     {}
func (l *lazyObject) Size() int64                     { return l.size }
func (l *lazyObject) SetSize(int64)                   {}
func (l *lazyObject) Writer() (io.WriteCloser, error) { return nil, errReadOnly }

func (l *lazyObject) Reader() (io.ReadCloser, error) {
	t, data, err := l.o.read(l.h)
	if err != nil {
		return nil, err
	}
	if t != l.t || int64(len(data)) != l.size {
		return nil, fmt.Errorf("%w: object %s changed under its reader", gitread.ErrCorrupt, l.h)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

var errReadOnly = errors.New("mirror: objects read from the packs are read-only")
