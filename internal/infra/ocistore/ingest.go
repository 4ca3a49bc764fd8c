package ocistore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gitfleet/internal/infra/errclass"
)

// blob is a content-addressed object an image needs; digest is validated.
type blob struct {
	digest string
	hex    string
	size   int64
}

func blobOf(d v1.Descriptor) (blob, error) {
	digest := d.Digest.String()
	hex, ok := hexOf(digest)
	if !ok || d.Size < 0 {
		return blob{}, fmt.Errorf("invalid descriptor %q (size %d)", digest, d.Size)
	}
	return blob{digest: digest, hex: hex, size: d.Size}, nil
}

// job is one Pull or Put between resolving its manifest and writing its
// index entry: the blobs it pinned against GC and the quota it reserved.
type job struct {
	s        *Store
	pinned   []string
	reserved []string
	// size is what the image declares: manifest, config and layers.
	size int64
	// announced is the manifest peers may read while the pull runs.
	announced *pulling
}

// pulling is the manifest of a pull in progress: verified (by digest, or
// hashed when asked by tag, as the pull resolved it), so that a peer may
// serve it, and the blobs it lists as they arrive, before the image is
// complete.
type pulling struct {
	digest    string
	raw       []byte
	mediaType types.MediaType
	// repo and tag: the reference the pull resolved, when by tag.
	repo, tag string
}

// announce lets peers read the job's manifest while it runs (until end).
func (j *job) announce(pl *pulling) {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	j.announced = pl
	j.s.pulling = append(j.s.pulling, pl)
	j.s.notifyLocked()
}

// ReasonImageSize is the reason of an image declaring more than a store
// takes (Options.MaxImageBytes): one of errclass.IsLimit's.
const ReasonImageSize = errclass.ReasonLimit + ": image size"

// declared adds up the sizes an image's manifest declares, checking each
// and every addition: sizes come from registries and peers gitfleet does
// not control, and a sum that overflowed would pass any quota (three
// layers of 2^62 bytes add up to a negative number). Nothing the sum
// reaches is past maxImage, so the quota arithmetic cannot overflow
// either.
func (s *Store) declared(what string, blobs []blob) (int64, error) {
	var total int64
	for _, b := range blobs {
		if b.size < 0 {
			return 0, errclass.Permanentf(errclass.ReasonInvalidInput, "image %s: blob %s declares %d bytes", what, b.digest, b.size)
		}
		// total <= maxImage, so maxImage-b.size cannot overflow.
		if b.size > s.maxImage || total > s.maxImage-b.size {
			return 0, errclass.Permanentf(ReasonImageSize,
				"image %s declares more than %d bytes (blob %s: %d bytes), the largest image this runner takes (--max-image-size)",
				what, s.maxImage, b.digest, b.size)
		}
		total += b.size
	}
	return total, nil
}

// begin pins every blob of an image, then checks the quota against what is
// missing and reserves it. Pinning first means a blob found present here
// cannot be collected before the index entry that references it is
// written. what names the image in the errors.
func (s *Store) begin(what string, blobs []blob) (*job, error) {
	size, err := s.declared(what, blobs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := &job{s: s, size: size}
	// needed <= size <= maxImage (declared); reservations and usage are
	// added saturating, so no sum wraps around to let a pull through.
	var needed, reservedTotal int64
	var missing []blob
	for _, r := range s.reserved {
		reservedTotal = addSaturating(reservedTotal, r.size)
	}
	for _, b := range blobs {
		s.pins[b.digest]++
		j.pinned = append(j.pinned, b.digest)
		if s.hasLocked(b) {
			continue
		}
		missing = append(missing, b)
		if s.reserved[b.digest] == nil {
			needed += b.size
		}
	}
	inUse := addSaturating(s.usage, reservedTotal)
	if s.quota > 0 && (needed > s.quota || inUse > s.quota-needed) {
		j.endLocked()
		return nil, errclass.Permanentf("exceeds store quota",
			"image %s needs %d bytes; runner store quota is %d bytes with %d in use", what, needed, s.quota, inUse)
	}
	for _, b := range missing {
		r := s.reserved[b.digest]
		if r == nil {
			r = &reservation{size: b.size}
			s.reserved[b.digest] = r
		}
		r.refs++
		j.reserved = append(j.reserved, b.digest)
	}
	return j, nil
}

// addSaturating is a+b for non-negative a and b, or the largest int64
// where that overflows.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (j *job) end() {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	j.endLocked()
}

func (j *job) endLocked() {
	s := j.s
	if j.announced != nil {
		s.pulling = slices.DeleteFunc(s.pulling, func(pl *pulling) bool { return pl == j.announced })
		j.announced = nil
	}
	// Peer requests waiting on a blob this job pinned see it go.
	defer s.notifyLocked()
	for _, d := range j.pinned {
		if s.pins[d]--; s.pins[d] <= 0 {
			delete(s.pins, d)
		}
	}
	for _, d := range j.reserved {
		// A commit has already turned the reservation into usage.
		if r := s.reserved[d]; r != nil {
			if r.refs--; r.refs <= 0 {
				delete(s.reserved, d)
			}
		}
	}
	j.pinned, j.reserved = nil, nil
}

// hasLocked reports whether a complete blob is in the store. A file of the
// wrong size cannot come from a commit; it is treated as absent and will be
// replaced.
func (s *Store) hasLocked(b blob) bool {
	info, err := os.Stat(s.blobPath(b.hex))
	return err == nil && info.Mode().IsRegular() && info.Size() == b.size
}

// flight is one download of a blob in progress, which other jobs needing
// the blob wait for.
type flight struct {
	done chan struct{} // closed when the download ends, stored or not
	// received counts the bytes of the blob received so far from the
	// source streaming it (back to 0 when a source starts it over).
	received atomic.Int64
	// stream is the current source's transfer into its temporary file,
	// which peers may follow (nil before the first; guarded by Store.mu).
	stream *stream
}

// stream is one transfer of a blob into its temporary file. A peer may
// read it while it is written (PeerHandler), every byte but the last until
// the whole blob's digest and size are checked: a copy of a blob that its
// source has not verified can never be complete, so no peer's verification
// can accept it, and a transfer that fails verification is cut off.
type stream struct {
	path string
	size int64

	mu      sync.Mutex
	written int64
	state   streamState
	changed chan struct{} // closed, and replaced, when written or state move
}

type streamState int

const (
	streaming streamState = iota
	verified              // digest and size match: every byte may be served
	failed                // cut off, corrupt or truncated: nothing more is served
)

func newStream(path string, size int64) *stream {
	return &stream{path: path, size: size, changed: make(chan struct{})}
}

func (st *stream) update(add int64, to streamState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.state != streaming {
		return
	}
	st.written += add
	st.state = to
	close(st.changed)
	st.changed = make(chan struct{})
}

// servable is how many bytes a peer may read now: what was written, short
// of the last byte until the blob is verified; failed means none.
func (st *stream) servable() (n int64, state streamState, changed <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	n = st.written
	if st.state != verified {
		n = min(n, st.size-1)
	}
	return n, st.state, st.changed
}

// ensure makes blob b present, calling fetch unless the store has it or
// gets it meanwhile. Two jobs needing the same missing blob download it
// once: the second waits for the first and fetches only if that failed.
// While it waits, waiting (if not nil) is told the bytes the first has
// received whenever they moved, at most every progress interval, so that
// the wait shows the download's progress, and its stalls. fetched tells
// whether this call wrote it.
func (s *Store) ensure(ctx context.Context, b blob, fetch func(*flight) error, waiting func(received int64)) (fetched bool, err error) {
	for {
		s.mu.Lock()
		if s.hasLocked(b) {
			s.mu.Unlock()
			return false, nil
		}
		if f, ok := s.inflight[b.digest]; ok {
			s.mu.Unlock()
			if err := f.wait(ctx, waiting); err != nil {
				return false, err
			}
			continue
		}
		f := &flight{done: make(chan struct{})}
		s.inflight[b.digest] = f
		s.notifyLocked()
		s.mu.Unlock()

		err := fetch(f)
		s.mu.Lock()
		delete(s.inflight, b.digest)
		close(f.done)
		s.notifyLocked()
		s.mu.Unlock()
		return err == nil, err
	}
}

// wait waits for the download to end, telling waiting the bytes received
// whenever they moved.
func (f *flight) wait(ctx context.Context, waiting func(received int64)) error {
	var tick <-chan time.Time
	if waiting != nil {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		tick = t.C
	}
	last := int64(-1)
	for {
		select {
		case <-f.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if n := f.received.Load(); n != last {
				last = n
				waiting(n)
			}
		}
	}
}

// problem is why one source failed for one blob, in a few words.
type problem struct {
	what string
	err  error
	// stalled: the source answered nothing, or sent nothing, for the stall
	// bound.
	stalled bool
	// refused: the source refuses this client, for now (429: too many
	// requests from it) or for the pull (401: not the fleet's token).
	refused bool
}

func (p *problem) Error() string {
	if p.err == nil {
		return p.what
	}
	return p.what + ": " + p.err.Error()
}

func (p *problem) Unwrap() error { return p.err }

// ingest streams r into a temporary file beside the blobs while hashing
// it, and commits the file under its digest only when digest and size both
// match b. Memory use is buf, whatever the blob's size. counted is told of
// every chunk written, for progress.
func (s *Store) ingest(r io.Reader, b blob, buf []byte, counted func(int64)) error {
	return s.ingestStream(r, b, buf, counted, nil)
}

// ingestStream is ingest publishing the transfer on fl (when not nil) for
// peers to follow: every byte as it is written but the last, which only
// once digest and size are checked.
func (s *Store) ingestStream(r io.Reader, b blob, buf []byte, counted func(int64), fl *flight) error {
	f, err := os.CreateTemp(s.blobDir(), tmpPrefix+b.hex[:16]+"-*")
	if err != nil {
		return &problem{what: "create temporary file", err: err}
	}
	tmp := f.Name()
	committed := false
	var st *stream
	if fl != nil && b.size > 0 {
		st = newStream(tmp, b.size)
		s.mu.Lock()
		fl.stream = st
		s.notifyLocked()
		s.mu.Unlock()
		defer st.update(0, failed) // a no-op once verified
	}
	defer func() {
		if !committed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	w := &countingWriter{w: io.MultiWriter(f, h), counted: counted}
	if st != nil {
		w.counted = func(n int64) {
			st.update(n, streaming)
			if counted != nil {
				counted(n)
			}
		}
	}
	// The stream stops at the declared size: nothing past it is written
	// or counted. One more byte, read aside, tells a long body from an
	// exact one.
	n, err := io.CopyBuffer(w, io.LimitReader(r, b.size), buf)
	if err == nil && n == b.size {
		var more [1]byte
		switch m, perr := io.ReadFull(r, more[:]); {
		case m > 0:
			return &problem{what: fmt.Sprintf("longer than declared (more than %d bytes)", b.size)}
		case perr != io.EOF:
			err = perr
		}
	}
	switch {
	case err != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return &problem{what: fmt.Sprintf("truncated (%d of %d bytes)", n, b.size), err: err}
	case err != nil && w.werr:
		return &problem{what: "write", err: err}
	case err != nil:
		return &problem{what: fmt.Sprintf("read failed after %d of %d bytes", n, b.size), err: err}
	case n < b.size:
		return &problem{what: fmt.Sprintf("truncated (%d of %d bytes)", n, b.size)}
	case hex.EncodeToString(h.Sum(nil)) != b.hex:
		return &problem{what: "digest mismatch"}
	}
	if st != nil {
		// Verified: the last byte may go to the peers following it (the
		// file stays readable through their open descriptors whatever
		// the commit does).
		st.update(0, verified)
	}
	if err := f.Sync(); err != nil {
		return &problem{what: "sync", err: err}
	}
	if err := f.Close(); err != nil {
		return &problem{what: "close", err: err}
	}
	committed = true
	return s.commit(tmp, b)
}

// commit renames a verified temporary file into place. If a concurrent job
// committed the same blob first, the copy is dropped: the content is the
// same and usage must count it once.
func (s *Store) commit(tmp string, b blob) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hasLocked(b) {
		os.Remove(tmp)
		return nil
	}
	// A file of the wrong size (never committed by a Store) is replaced;
	// it no longer counts.
	if info, err := os.Stat(s.blobPath(b.hex)); err == nil && info.Mode().IsRegular() {
		s.usage -= info.Size()
	}
	if err := os.Rename(tmp, s.blobPath(b.hex)); err != nil {
		os.Remove(tmp)
		return &problem{what: "rename", err: err}
	}
	if err := syncDir(s.blobDir()); err != nil {
		return &problem{what: "sync", err: err}
	}
	s.usage += b.size
	delete(s.reserved, b.digest)
	s.notifyLocked()
	return nil
}

type countingWriter struct {
	w       io.Writer
	counted func(int64)
	werr    bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.werr = true
	}
	if c.counted != nil {
		c.counted(int64(n))
	}
	return n, err
}

// record writes name's index entry, replacing any older entry of that name.
func (s *Store) record(name string, digest string, mediaType types.MediaType, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := v1.NewHash(digest)
	if err != nil {
		return err
	}
	e := s.entryOf(v1.Descriptor{
		MediaType:   mediaType,
		Digest:      d,
		Size:        size,
		Annotations: map[string]string{RefNameAnnotation: name},
	})
	entries := make([]entry, 0, len(s.entries)+1)
	replaced := false
	for _, old := range s.entries {
		if old.name != name {
			entries = append(entries, old)
		} else {
			replaced = old.desc.Digest != d
		}
	}
	entries = append(entries, e)
	if err := s.writeIndex(entries); err != nil {
		return fmt.Errorf("ocistore: write index.json: %w", err)
	}
	s.entries = entries
	if replaced {
		// The image is stored; what the replaced one leaves behind is
		// collected now or, if this fails, by the next GC.
		_ = s.gcLocked()
	}
	return nil
}
