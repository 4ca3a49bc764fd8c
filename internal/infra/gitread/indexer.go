package gitread

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"

	"github.com/go-git/go-git/v5/plumbing"
	gghash "github.com/go-git/go-git/v5/plumbing/hash"
)

// Tuning of an Indexer (variables for the tests).
var (
	// chunkBytes is the unit in which received data is written to the file
	// and handed to the parser.
	chunkBytes = 128 << 10
	// streamCacheBytes bounds the objects kept, while the pack streams in,
	// as bases for the deltas that follow them. A delta whose base is not
	// there is resolved after the stream, from the file.
	streamCacheBytes = 2 << 20
	// workerCacheBytes bounds each resolving goroutine's cache of bases.
	workerCacheBytes = 2 << 20
	// inflightBytes bounds the inflated data between the parsing and the
	// hashing goroutine.
	inflightBytes int64 = 2 << 20
	// bigObjectBytes: a whole object larger than this is hashed as it
	// inflates, never held in memory while the pack streams in.
	bigObjectBytes int64 = 16 << 20
	// ixPreallocBytes: data up to this size gets its memory at once from the
	// size in its header; larger data gets memory as it actually inflates,
	// so a corrupt size costs no huge allocation.
	ixPreallocBytes int64 = 16 << 20
)

const (
	// maxWorkers bounds the goroutines resolving deltas.
	maxWorkers = 8
)

// ErrEmpty is returned by Finish when no byte of a pack was written.
var ErrEmpty = errors.New("gitread: no pack data")

// errStopped ends the goroutines of an indexer that failed or was aborted.
var errStopped = errors.New("gitread: indexing stopped")

// IndexOptions configure an Indexer.
type IndexOptions struct {
	// Base returns the type and content of an object that is not in the
	// pack: the base of a REF_DELTA in a thin pack. With it the indexer
	// completes a thin pack as `git index-pack --fix-thin` does, appending
	// those bases to the pack; without it a thin pack is an error. It is
	// called from Finish's goroutine.
	Base func(plumbing.Hash) (plumbing.ObjectType, []byte, error)
	// Workers is the number of goroutines resolving deltas after the
	// stream; 0 means GOMAXPROCS (at most 8).
	Workers int
	// Limits bound the pack and its objects; zero means the limits in
	// force (SetLimits).
	Limits Limits
}

// entry is one object of the pack: 36 bytes, for there is one per object
// (the entry's header gives its size and where its data starts, read again
// when the entry is).
type entry struct {
	offLo uint32 // the entry's offset: low 32 bits
	base  int32  // entry index of a delta's base; -1 while unknown
	crc   uint32
	hash  plumbing.Hash
	offHi uint16 // the offset's bits 32 to 47
	typ   uint8  // entry type
	otyp  uint8  // object type, once resolved
}

// maxEntryOffset bounds the offsets an entry holds (256 TiB).
const maxEntryOffset = 1<<48 - 1

func (e *entry) off() int64 { return int64(e.offHi)<<32 | int64(e.offLo) }

func (e *entry) setOff(off int64) { e.offLo, e.offHi = uint32(off), uint16(off>>32) }

// refDelta is a REF_DELTA entry and the name of its base.
type refDelta struct {
	idx  int32
	base plumbing.Hash
}

// item is an entry on its way from the parsing to the hashing goroutine.
type item struct {
	off     int64
	size    int64
	baseOff int64         // OFS_DELTA
	refBase plumbing.Hash // REF_DELTA
	crc     uint32
	adler   uint32
	typ     uint8
	data    []byte        // the inflated data, nil for a big object
	hash    plumbing.Hash // a big object's name, hashed as it inflated
	gated   bool          // the parser took bigGate for it: the hasher gives it back
	refused *LimitError   // a delta refused on its header (its data not held)
}

// Indexer indexes a pack while it is written to it, the way `git
// index-pack` does: it writes the pack to a file and parses it as it comes
// (one goroutine inflates every entry, checking its zlib stream and taking
// its CRC-32; a second one names the whole objects, and the deltas whose
// base is still in its cache), then, once the pack is complete, checks the
// pack's trailing checksum and resolves the remaining deltas from the file,
// delta tree by delta tree on several goroutines. Index.WriteTo then
// writes the version 2 index. Object names use go-git's configured SHA-1
// (sha1cd, with collision detection, by default).
//
// Write the pack with Write or ReadFrom (an Indexer is an io.Writer and an
// io.ReaderFrom), then call Finish, or Abort to give up. An Indexer is not
// safe for concurrent use; it runs goroutines of its own until Finish or
// Abort returns.
//
// Corrupt data is an error wrapping ErrCorrupt, never a panic, and the
// sizes in headers are checked against the data before memory is allocated
// for them beyond ixPreallocBytes. A pack over Limits.MaxPackBytes is an
// error wrapping ErrLimit, found as it arrives. An object that cannot be
// resolved within the limits — a delta, its target or a delta's base over
// Limits.MaxObjectBytes, a delta whose target would take the objects named
// over the pack's inflate budget, a delta whose base never resolves (a
// cycle) — is refused alone, found before its memory is allocated: it is
// left out of the index (Index.Refused says which and why) and the rest of
// the pack is indexed.
type Indexer struct {
	f    *os.File
	opts IndexOptions
	lim  Limits
	pool bufPool
	// recv is the bytes received so far; named the bytes of the objects
	// named so far (whole objects and delta targets), for the inflate
	// budget.
	recv, named atomic.Int64

	// The writer's side.
	chunk    []byte
	chunks   chan []byte // to the parser
	free     chan []byte // back from the parser
	sum      hash.Hash   // of everything written but the last 20 bytes
	tail     [hashSize]byte
	tailN    int
	written  int64
	werr     error
	finished bool

	stop     chan struct{} // closed on failure or abort
	stopOnce sync.Once
	errMu    sync.Mutex
	err      error // the first failure

	// The parser (its goroutine until pDone is closed).
	src     streamBuf
	fl      io.ReadCloser // for the largest entries
	items   chan item
	budget  *budget
	count   uint32
	trailer plumbing.Hash
	end     int64   // offset of the trailer
	one     [1]byte // scratch
	pDone   chan struct{}

	// The hasher (its goroutine until hDone is closed).
	entries  []entry
	refs     []refDelta
	cache    *objCache
	h        *hasher
	deferred int // deltas left for after the stream
	hDone    chan struct{}

	// refused are the entries left out of the index (see Refusal), and
	// refusedNames the names of refused objects the pack says.
	refused      refusals
	refusedNames map[plumbing.Hash]*LimitError
	// The declared target sizes of the deltas left for after the stream:
	// the large ones by entry, the others summed (see checkDeclared).
	bigDeclared   map[int32]int64
	smallDeclared int64
	// big: an object over gateBytes was held (see Finish).
	big atomic.Bool
}

// NewIndexer returns an indexer writing the pack to f, an empty file open
// for reading and writing.
func NewIndexer(f *os.File, opts IndexOptions) *Indexer {
	lim := opts.Limits
	if lim == (Limits{}) {
		lim = CurrentLimits()
	}
	x := &Indexer{
		f:      f,
		opts:   opts,
		lim:    lim.withDefaults(),
		chunks: make(chan []byte, 4),
		free:   make(chan []byte, 8),
		sum:    gghash.New(crypto.SHA1),
		stop:   make(chan struct{}),
		items:  make(chan item, 256),
		budget: newBudget(inflightBytes),
		pDone:  make(chan struct{}),
		hDone:  make(chan struct{}),
		h:      newHasher(),
	}
	x.cache = newObjCache(&x.pool, streamCacheBytes)
	x.src.init(x.chunks, x.free, x.stop)
	x.fl = flate.NewReader(&x.src)
	go x.parse()
	go x.hashItems()
	return x
}

// fail records the first error and stops the goroutines.
func (x *Indexer) fail(err error) {
	x.errMu.Lock()
	if x.err == nil {
		x.err = err
	}
	x.errMu.Unlock()
	x.stopOnce.Do(func() {
		close(x.stop)
		x.budget.stop()
	})
}

func (x *Indexer) firstErr() error {
	x.errMu.Lock()
	defer x.errMu.Unlock()
	return x.err
}

// Write writes p to the pack.
func (x *Indexer) Write(p []byte) (int, error) {
	if err := x.writable(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if x.chunk == nil {
			x.chunk = x.newChunk()
		}
		m := copy(x.chunk[len(x.chunk):cap(x.chunk)], p)
		x.chunk = x.chunk[:len(x.chunk)+m]
		p = p[m:]
		n += m
		if len(x.chunk) == cap(x.chunk) {
			if err := x.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// ReadFrom writes what r reads, until its end, to the pack.
func (x *Indexer) ReadFrom(r io.Reader) (int64, error) {
	if err := x.writable(); err != nil {
		return 0, err
	}
	var n int64
	for {
		if x.chunk == nil {
			x.chunk = x.newChunk()
		}
		m, err := r.Read(x.chunk[len(x.chunk):cap(x.chunk)])
		x.chunk = x.chunk[:len(x.chunk)+m]
		n += int64(m)
		if len(x.chunk) == cap(x.chunk) {
			if ferr := x.flush(); ferr != nil {
				return n, ferr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (x *Indexer) writable() error {
	if x.finished {
		return errors.New("gitread: write after Finish")
	}
	if x.werr != nil {
		return x.werr
	}
	select {
	case <-x.stop:
		return x.firstErr()
	default:
		return nil
	}
}

func (x *Indexer) newChunk() []byte {
	select {
	case c := <-x.free:
		return c[:0]
	default:
		return make([]byte, 0, chunkBytes)
	}
}

// flush writes the chunk to the file, adds it to the pack's checksum and
// hands it to the parser.
func (x *Indexer) flush() error {
	c := x.chunk
	x.chunk = nil
	if len(c) == 0 {
		return nil
	}
	if x.written+int64(len(c)) > x.lim.MaxPackBytes {
		// Before the disk is used: a remote cannot fill it.
		x.werr = &LimitError{What: "pack size", Setting: SettingMaxPackBytes,
			Detail: fmt.Sprintf("pack larger than %d bytes", x.lim.MaxPackBytes)}
		x.fail(x.werr)
		return x.werr
	}
	if _, err := x.f.Write(c); err != nil {
		x.werr = fmt.Errorf("write pack: %w", err)
		x.fail(x.werr)
		return x.werr
	}
	x.written += int64(len(c))
	x.recv.Store(x.written)
	x.checksum(c)
	select {
	case x.chunks <- c:
		return nil
	case <-x.stop:
		x.werr = x.firstErr()
		return x.werr
	}
}

// checksum adds p to the pack's checksum, holding the last 20 bytes back:
// they are the trailer, if the pack ends there.
func (x *Indexer) checksum(p []byte) {
	if len(p) >= hashSize {
		x.sum.Write(x.tail[:x.tailN])
		x.sum.Write(p[:len(p)-hashSize])
		copy(x.tail[:], p[len(p)-hashSize:])
		x.tailN = hashSize
		return
	}
	var tmp [2 * hashSize]byte
	n := copy(tmp[:], x.tail[:x.tailN])
	n += copy(tmp[n:], p)
	if n > hashSize {
		x.sum.Write(tmp[:n-hashSize])
		copy(x.tail[:], tmp[n-hashSize:n])
		x.tailN = hashSize
	} else {
		copy(x.tail[:], tmp[:n])
		x.tailN = n
	}
}

// Abort stops the indexer without finishing the pack. The file is left as
// it is, for the caller to remove.
func (x *Indexer) Abort() {
	if x.finished {
		return
	}
	x.finished = true
	x.fail(errStopped)
	close(x.chunks)
	<-x.pDone
	<-x.hDone
}

// Finish ends the pack: it waits for the parse of what was written,
// checks the pack's checksum, resolves the deltas left and, for a thin
// pack, appends the missing bases (IndexOptions.Base) to the file. It returns
// the index of the pack, or ErrEmpty when nothing was written. The file
// holds the complete pack when Finish succeeds.
func (x *Indexer) Finish() (*Index, error) {
	if x.finished {
		return nil, errors.New("gitread: Finish called twice")
	}
	if x.werr == nil {
		_ = x.flush()
	}
	x.finished = true
	close(x.chunks)
	<-x.pDone
	<-x.hDone
	defer x.cache.clear()
	if err := x.firstErr(); err != nil {
		if x.written == 0 && x.werr == nil && errors.Is(err, io.EOF) {
			return nil, ErrEmpty
		}
		return nil, err
	}
	if x.tailN != hashSize || !bytes.Equal(x.sum.Sum(nil), x.tail[:]) {
		return nil, fmt.Errorf("%w: pack checksum mismatch", ErrCorrupt)
	}
	x.cache.clear()
	ix := &Index{entries: x.entries, Checksum: x.trailer, Size: x.end + hashSize}
	if x.deferred > 0 {
		x.checkDeclared()
		if err := x.resolve(ix); err != nil {
			return nil, err
		}
	}
	ix.entries = x.entries
	if x.big.Load() {
		// Objects over 16 MiB were held (a chain of large deltas: up to
		// twice the object limit at once): their memory goes back to the
		// system now, not minutes later when the runtime's scavenger
		// gets to it, or the worker would keep its peak through every
		// later fetch and scan. A collection is nothing beside resolving
		// those objects, and honest packs rarely hold any.
		debug.FreeOSMemory()
	}
	if x.refused.len() > 0 {
		ix.Refused = x.refusalList()
		kept := ix.entries[:0]
		for i := range ix.entries {
			if ix.entries[i].otyp != 0 {
				kept = append(kept, ix.entries[i])
			}
		}
		ix.entries = kept
	}
	return ix, nil
}

// inBuf is a read buffer: buf[r:w] is unread. more makes more bytes
// available (it may move them within buf, adjusting r and w, but keeps at
// least keepBytes before r) and returns io.EOF at the end of the input.
type inBuf struct {
	buf  []byte
	r, w int
	more func() error
}

// streamBuf is the parser's input: the chunks the writer hands over,
// copied into a buffer that the parser and the Deflate decoder (a
// flate.Reader, reading byte by byte, so it never reads past its stream)
// consume. It takes the CRC-32 of the bytes of each entry.
type streamBuf struct {
	inBuf
	in      <-chan []byte
	free    chan<- []byte
	stop    <-chan struct{}
	chunk   []byte // the chunk being copied in
	pend    []byte // the rest of it
	base    int64  // stream offset of buf[0]
	crcFrom int64  // stream offset: the CRC covers the entry up to here
	crc     uint32
	err     error
}

// keepBytes is what fetch keeps before the read position: the inflater
// may give back up to 8 bytes.
const keepBytes = 16

func (s *streamBuf) init(in <-chan []byte, free chan<- []byte, stop <-chan struct{}) {
	s.in, s.free, s.stop = in, free, stop
	s.buf = make([]byte, chunkBytes+4*keepBytes)
	s.more = s.fetch
}

// fetch makes more bytes available.
func (s *streamBuf) fetch() error {
	if s.err != nil {
		return s.err
	}
	if cut := s.r - keepBytes; cut > 0 {
		if from := s.crcFrom - s.base; from < int64(cut) {
			s.crc = crc32.Update(s.crc, crc32.IEEETable, s.buf[from:cut])
			s.crcFrom = s.base + int64(cut)
		}
		n := copy(s.buf, s.buf[cut:s.w])
		s.base += int64(cut)
		s.r -= cut
		s.w = n
	}
	if s.w == len(s.buf) {
		grown := make([]byte, 2*len(s.buf))
		copy(grown, s.buf[:s.w])
		s.buf = grown
	}
	for len(s.pend) == 0 {
		if s.chunk != nil {
			select {
			case s.free <- s.chunk:
			default:
			}
			s.chunk = nil
		}
		select {
		case c, ok := <-s.in:
			if !ok {
				s.err = io.EOF
				return s.err
			}
			s.chunk, s.pend = c, c
		case <-s.stop:
			s.err = errStopped
			return s.err
		}
	}
	m := copy(s.buf[s.w:], s.pend)
	s.w += m
	s.pend = s.pend[m:]
	return nil
}

func (s *streamBuf) ReadByte() (byte, error) {
	if s.r == s.w {
		if err := s.fetch(); err != nil {
			return 0, err
		}
	}
	c := s.buf[s.r]
	s.r++
	return c, nil
}

func (s *streamBuf) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.r == s.w {
		if err := s.fetch(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.buf[s.r:s.w])
	s.r += n
	return n, nil
}

// readFull reads len(p) bytes (io.ReadFull on the concrete type: p does
// not escape).
func (s *streamBuf) readFull(p []byte) error {
	for n := 0; n < len(p); {
		m, err := s.Read(p[n:])
		n += m
		if err != nil {
			if err == io.EOF && n > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (s *streamBuf) pos() int64 { return s.base + int64(s.r) }

// beginCRC starts the CRC-32 of an entry at the current position.
func (s *streamBuf) beginCRC() { s.crcFrom, s.crc = s.pos(), 0 }

// endCRC returns the CRC-32 of the bytes read since beginCRC.
func (s *streamBuf) endCRC() uint32 {
	s.crc = crc32.Update(s.crc, crc32.IEEETable, s.buf[s.crcFrom-s.base:s.r])
	s.crcFrom = s.pos()
	return s.crc
}

// parse is the parsing goroutine: it reads the pack's entries as they
// arrive and hands them, inflated, to the hashing goroutine.
func (x *Indexer) parse() {
	defer close(x.pDone)
	defer close(x.items)
	if err := x.parseAll(); err != nil {
		x.fail(err)
	}
}

func readErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: pack truncated (data runs past its end)", ErrCorrupt)
	}
	return err
}

func (x *Indexer) parseAll() error {
	s := &x.src
	var hdr [12]byte
	if n, err := io.ReadFull(s, hdr[:]); err != nil {
		if n == 0 && err == io.EOF {
			return io.EOF // nothing written: ErrEmpty
		}
		return readErr(err)
	}
	if string(hdr[:4]) != "PACK" {
		return fmt.Errorf("%w: no pack signature", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return fmt.Errorf("%w: pack version %d not supported", ErrCorrupt, v)
	}
	x.count = binary.BigEndian.Uint32(hdr[8:12])
	var scratch []byte
	var big *hasher
	for i := uint32(0); i < x.count; i++ {
		it := item{off: s.pos()}
		s.beginCRC()
		c, err := s.ReadByte()
		if err != nil {
			return readErr(err)
		}
		it.typ = c >> 4 & 7
		size := uint64(c & 0x0f)
		for shift := uint(4); c&0x80 != 0; shift += 7 {
			if shift > 53 {
				return fmt.Errorf("%w: entry size overflows at offset %d", ErrCorrupt, it.off)
			}
			if c, err = s.ReadByte(); err != nil {
				return readErr(err)
			}
			size |= uint64(c&0x7f) << shift
		}
		if size > maxObjectBytes {
			return fmt.Errorf("%w: entry of %d bytes at offset %d", ErrCorrupt, size, it.off)
		}
		if isDelta(it.typ) && size > uint64(x.lim.MaxObjectBytes) {
			// A delta is held in memory to be applied: refused, its data
			// inflated (to reach the next entry and check it) but not held.
			it.refused = objectLimit("delta of %d bytes at offset %d", size, it.off).(*LimitError)
		}
		it.size = int64(size)
		switch it.typ {
		case TypeCommit, TypeTree, TypeBlob, TypeTag:
		case TypeOfsDelta:
			if c, err = s.ReadByte(); err != nil {
				return readErr(err)
			}
			dist := uint64(c & 0x7f)
			for c&0x80 != 0 {
				if dist >= 1<<55 {
					return fmt.Errorf("%w: delta base distance overflows at offset %d", ErrCorrupt, it.off)
				}
				if c, err = s.ReadByte(); err != nil {
					return readErr(err)
				}
				dist = (dist+1)<<7 | uint64(c&0x7f)
			}
			if dist == 0 || dist > uint64(it.off-12) {
				return fmt.Errorf("%w: delta base distance %d at offset %d", ErrCorrupt, dist, it.off)
			}
			it.baseOff = it.off - int64(dist)
		case TypeRefDelta:
			if err := s.readFull(it.refBase[:]); err != nil {
				return readErr(err)
			}
		default:
			return fmt.Errorf("%w: entry type %d at offset %d", ErrCorrupt, it.typ, it.off)
		}
		if err := x.zlibHeader(); err != nil {
			return fmt.Errorf("offset %d: %w", it.off, err)
		}
		if err := x.fl.(flate.Resetter).Reset(&x.src, nil); err != nil {
			return err
		}
		if it.refused != nil || !isDelta(it.typ) && it.size > min(bigObjectBytes, x.lim.MaxObjectBytes) {
			if big == nil {
				big, scratch = newHasher(), make([]byte, 64<<10)
			}
			typ := it.typ
			if it.refused != nil {
				typ = TypeBlob // its hash is not used: the data is only checked
			}
			if it.hash, it.adler, err = x.inflateHashed(big, typ, it.size, scratch); err != nil {
				return fmt.Errorf("offset %d: %w", it.off, err)
			}
			if err := x.checkAdler(it.adler); err != nil {
				return fmt.Errorf("offset %d: %w", it.off, err)
			}
		} else {
			if !x.budget.acquire(it.size) {
				return errStopped
			}
			// Taken once the budget is: the hasher has given back every
			// object before this one (a big one waits for all of them), so
			// it holds no gate it could wait on.
			hold := gateHold(false)
			if !hold.admit(it.size, x.stop) {
				x.budget.release(it.size)
				return errStopped
			}
			it.gated = bool(hold)
			if it.gated {
				x.big.Store(true)
			}
			if it.data, err = x.inflate(it.size); err != nil {
				hold.release()
				x.budget.release(it.size)
				return fmt.Errorf("offset %d: %w", it.off, err)
			}
			var a [4]byte
			if err := s.readFull(a[:]); err != nil {
				hold.release()
				x.budget.release(it.size)
				return readErr(err)
			}
			it.adler = binary.BigEndian.Uint32(a[:])
		}
		it.crc = s.endCRC()
		if !isDelta(it.typ) {
			// Counted once its data proved its size (a header that lies is
			// corrupt data), never refused: a whole object costs no more
			// than its bytes inflate to (1032:1 at most, within the
			// budget's ratio); the budget bounds what deltas copy.
			x.named.Add(it.size)
		}
		select {
		case x.items <- it:
		case <-x.stop:
			hold := gateHold(it.gated)
			hold.release()
			x.budget.release(int64(len(it.data)))
			return errStopped
		}
	}
	x.end = s.pos()
	if _, err := io.ReadFull(s, x.trailer[:]); err != nil {
		return readErr(err)
	}
	if _, err := s.ReadByte(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%w: data after the pack's end", ErrCorrupt)
		}
		return err
	}
	return nil
}

// zlibHeader reads and checks a zlib header (RFC 1950).
func (x *Indexer) zlibHeader() error {
	var h [2]byte
	if err := x.src.readFull(h[:]); err != nil {
		return readErr(err)
	}
	if !zlibHeaderOK(h[0], h[1]) {
		return fmt.Errorf("%w: bad zlib header", ErrCorrupt)
	}
	return nil
}

func zlibHeaderOK(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0 && flg&0x20 == 0
}

// inflate inflates the size bytes of the Deflate stream at the parser's
// position and checks that the stream ends there.
func (x *Indexer) inflate(size int64) ([]byte, error) {
	return inflateIntoScratch(x.fl, &x.pool, size, x.one[:])
}

// inflateIntoScratch inflates as inflate does; one is a byte of scratch for
// streamEnds (a local array would escape to the
// heap, through the io.Reader, for every entry).
func inflateIntoScratch(fl io.Reader, pool *bufPool, size int64, one []byte) ([]byte, error) {
	var out []byte
	if size <= ixPreallocBytes {
		out = pool.get(int(size))
		if _, err := io.ReadFull(fl, out); err != nil {
			pool.put(out)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("%w: data inflates to less than its header's %d bytes", ErrCorrupt, size)
			}
			return nil, inflateErr(err)
		}
	} else {
		if size > int64(maxInt) {
			return nil, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, size)
		}
		n := int(size)
		out = make([]byte, 0, ixPreallocBytes)
		for len(out) < n {
			if len(out) == cap(out) {
				grown := make([]byte, len(out), min(n, 2*cap(out)))
				copy(grown, out)
				out = grown
			}
			m, err := fl.Read(out[len(out):cap(out)])
			out = out[:len(out)+m]
			if err == io.EOF && len(out) < n {
				return nil, fmt.Errorf("%w: data inflates to %d bytes, its header says %d", ErrCorrupt, len(out), n)
			}
			if err != nil && err != io.EOF {
				return nil, inflateErr(err)
			}
		}
	}
	if err := streamEnds(fl, one); err != nil {
		pool.put(out)
		return nil, err
	}
	return out, nil
}

// streamEnds checks that the inflater is at the end of its stream.
func streamEnds(fl io.Reader, b []byte) error {
	for i := 0; ; i++ {
		m, err := fl.Read(b[:1])
		if m > 0 {
			return fmt.Errorf("%w: data inflates to more than its header says", ErrCorrupt)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return inflateErr(err)
		}
		if i == 8 {
			return fmt.Errorf("%w: inflater makes no progress", ErrCorrupt)
		}
	}
}

// inflateHashed inflates a whole object of size bytes without holding it,
// and returns its name and the Adler-32 of the data.
func (x *Indexer) inflateHashed(h *hasher, typ uint8, size int64, scratch []byte) (plumbing.Hash, uint32, error) {
	h.begin(typ, size)
	ad := adler32.New()
	for left := size; left > 0; {
		n := int64(len(scratch))
		if left < n {
			n = left
		}
		m, err := x.fl.Read(scratch[:n])
		h.h.Write(scratch[:m])
		ad.Write(scratch[:m])
		left -= int64(m)
		if err == io.EOF && left > 0 {
			return plumbing.ZeroHash, 0, fmt.Errorf("%w: object inflates to less than its header's %d bytes", ErrCorrupt, size)
		}
		if err != nil && err != io.EOF {
			return plumbing.ZeroHash, 0, inflateErr(err)
		}
	}
	if err := streamEnds(x.fl, x.one[:]); err != nil {
		return plumbing.ZeroHash, 0, err
	}
	return h.end(), ad.Sum32(), nil
}

// checkAdler reads the Adler-32 trailer of the zlib stream just inflated.
func (x *Indexer) checkAdler(sum uint32) error {
	var a [4]byte
	if err := x.src.readFull(a[:]); err != nil {
		return readErr(err)
	}
	if binary.BigEndian.Uint32(a[:]) != sum {
		return fmt.Errorf("%w: zlib checksum mismatch", ErrCorrupt)
	}
	return nil
}

func inflateErr(err error) error {
	var ce flate.CorruptInputError
	var ie flate.InternalError
	if errors.As(err, &ce) || errors.As(err, &ie) || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err == io.EOF {
		return fmt.Errorf("%w: pack truncated (data runs past its end)", ErrCorrupt)
	}
	return err
}

// hashItems is the hashing goroutine: it records the entries the parser
// hands over, names whole objects and resolves the deltas whose base is
// still in the cache.
func (x *Indexer) hashItems() {
	defer close(x.hDone)
	failed := false
	for it := range x.items {
		n := int64(len(it.data))
		hold := gateHold(it.gated)
		if !failed {
			if err := x.record(&it, &hold); err != nil {
				x.fail(err)
				failed = true
			}
		} else {
			x.pool.put(it.data)
		}
		hold.release() // before the budget: see parseAll
		x.budget.release(n)
	}
}

func (x *Indexer) record(it *item, hold *gateHold) error {
	if len(x.entries) >= 1<<31-1 {
		return fmt.Errorf("%w: too many objects", ErrCorrupt)
	}
	if x.entries == nil {
		// Room for every entry the header announces, at once: growing by
		// appends would hold the old and the new array together, twice the
		// index's memory at its peak. (The parser set count before it sent
		// the first item. Pages of a fresh allocation cost memory only once
		// written, so a lying header costs address space, not memory.)
		x.entries = make([]entry, 0, min(x.count, 1<<24))
	}
	if it.off > maxEntryOffset {
		x.pool.put(it.data)
		return fmt.Errorf("%w: pack larger than %d bytes", ErrCorrupt, int64(maxEntryOffset))
	}
	i := int32(len(x.entries))
	e := entry{base: -1, crc: it.crc, typ: it.typ}
	e.setOff(it.off)
	if it.data != nil && adler32.Checksum(it.data) != it.adler {
		x.pool.put(it.data)
		return fmt.Errorf("%w: zlib checksum mismatch at offset %d", ErrCorrupt, it.off)
	}
	if it.refused != nil {
		if it.typ == TypeOfsDelta {
			e.base = x.entryAt(it.baseOff)
		}
		x.refused.add(i, it.refused)
		x.entries = append(x.entries, e)
		return nil
	}
	var declared int64 // a delta's target size, from its header
	if isDelta(it.typ) {
		_, tgt, _, err := DeltaSizes(it.data)
		if err != nil {
			x.pool.put(it.data)
			return fmt.Errorf("delta at offset %d: %w", it.off, err)
		}
		if tgt > uint64(x.lim.MaxObjectBytes) {
			// Refused on its header: nothing is allocated for it.
			x.pool.put(it.data)
			if it.typ == TypeOfsDelta {
				e.base = x.entryAt(it.baseOff)
			}
			x.refused.add(i, objectLimit("delta target of %d bytes at offset %d", tgt, it.off).(*LimitError))
			x.entries = append(x.entries, e)
			return nil
		}
		declared = int64(tgt)
	}
	switch it.typ {
	case TypeOfsDelta:
		j := x.entryAt(it.baseOff)
		if j < 0 {
			x.pool.put(it.data)
			return fmt.Errorf("%w: delta at offset %d has no entry at its base offset %d", ErrCorrupt, it.off, it.baseOff)
		}
		e.base = j
		// A large target waits for the end of the stream: the pack's
		// declared sizes are checked against its budget before any is
		// allocated (checkDeclared).
		if base := x.cache.getPinned(j); base != nil && declared <= bigDeclaredBytes {
			out, err := x.applyDelta(base, it.data, hold, x.stop)
			x.cache.unpin(j)
			x.pool.put(it.data)
			if l := asLimit(err); l != nil {
				// Refused alone: the rest of the pack is indexed.
				x.refused.add(i, l)
				x.entries = append(x.entries, e)
				return nil
			}
			if err != nil {
				return fmt.Errorf("delta at offset %d: %w", it.off, err)
			}
			e.otyp = x.entries[j].otyp
			e.hash = x.h.object(e.otyp, out)
			x.entries = append(x.entries, e)
			x.cache.put(i, out, false)
			return nil
		}
		x.pool.put(it.data)
		x.deferred++
		x.declare(i, declared)
	case TypeRefDelta:
		x.pool.put(it.data)
		x.refs = append(x.refs, refDelta{idx: i, base: it.refBase})
		x.deferred++
		x.declare(i, declared)
	default:
		e.otyp = it.typ
		if it.data == nil {
			e.hash = it.hash
		} else {
			e.hash = x.h.object(e.otyp, it.data)
			x.cache.put(i, it.data, false)
		}
	}
	x.entries = append(x.entries, e)
	return nil
}

// applyDelta applies delta to base into a buffer from the pool, within
// the limits: the target's size, from the delta's header, is checked and
// counted before anything is allocated, and a big one waits for bigGate
// (hold).
func (x *Indexer) applyDelta(base, delta []byte, hold *gateHold, stop <-chan struct{}) ([]byte, error) {
	_, tgt, _, err := DeltaSizes(delta)
	if err != nil {
		return nil, err
	}
	if tgt > uint64(x.lim.MaxObjectBytes) {
		return nil, objectLimit("delta target of %d bytes", tgt)
	}
	if err := x.name(int64(tgt)); err != nil {
		return nil, err
	}
	if !hold.admit(int64(tgt), stop) {
		return nil, errStopped
	}
	if tgt > gateBytes {
		x.big.Store(true)
	}
	return applyPooled(&x.pool, base, delta)
}

// name counts n bytes of objects named against the pack's inflate budget.
func (x *Indexer) name(n int64) error {
	if got, budget := x.named.Add(n), x.lim.inflateBudget(x.recv.Load()); got > budget {
		x.named.Add(-n) // refused: not named
		return &LimitError{What: "inflated size",
			Detail: fmt.Sprintf("a pack of %d bytes names objects of more than %d bytes", x.recv.Load(), budget)}
	}
	return nil
}

func applyPooled(pool *bufPool, base, delta []byte) ([]byte, error) {
	_, tgt, _, err := DeltaSizes(delta)
	if err != nil {
		return nil, err
	}
	var dst []byte
	if tgt <= uint64(ixPreallocBytes) {
		dst = pool.get(int(tgt))
	}
	out, err := ApplyDelta(dst, base, delta) // checks tgt before allocating
	if err != nil {
		pool.put(dst)
		return nil, err
	}
	return out, nil
}

// entryAt returns the index of the entry at offset off, or -1.
func (x *Indexer) entryAt(off int64) int32 {
	es := x.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].off() >= off })
	if i < len(es) && es[i].off() == off {
		return int32(i)
	}
	return -1
}
