package archive

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Separator joins the levels of an inner path, as gitleaks writes them:
// "lib/app.jar!config/application.properties" is a file inside app.jar,
// itself inside lib/ of the archive walked.
const Separator = "!"

// Version names what Walk opens and how; a policy that depends on it
// records it, so that a change here makes archives be scanned again.
const Version = "archive/2 zip,tar,gzip,bzip2,zstd,xz,snappy"

// Limits bound the work of one Walk, all levels together. A zero field
// means its default.
type Limits struct {
	// Bytes is how many bytes decompression may produce: zip entries and
	// gzip, bzip2, zstd, xz and snappy streams, at every level. It also
	// bounds the memory a walk holds (see Walk).
	Bytes int64
	// Entries is how many entries (files, directories, links) the
	// archives may list.
	Entries int
	// Ratio is how many bytes decompression may produce per byte of the
	// walked content, once it has produced RatioGrace bytes: a zip bomb
	// stops at its first megabyte, not at Bytes.
	Ratio int
	// Memory bounds what the walk holds besides the walked content (see
	// memory.go): files being read, zip directories, decoders' windows.
	Memory int64
}

const (
	// DefaultBytes: a blob the scanner reads whole is at most 10 MiB, and
	// text compresses some 3 to 10 times; 64 MiB reads that whole and
	// bounds the worst case to a fraction of a second of decompression.
	DefaultBytes = 64 << 20
	// DefaultEntries: a large jar lists a few thousand classes.
	DefaultEntries = 10_000
	// DefaultRatio: ordinary content, text included, expands less than
	// 100 times (Apache POI's zip bomb guard uses the same bound).
	DefaultRatio = 100
	// RatioGrace is how much decompression may produce before Ratio
	// applies, so that a small archive of repetitive text is read whole.
	RatioGrace = 1 << 20
	// DefaultMemory: a 10 MiB file read at each of three levels and the
	// window of zstd -19 (8 MiB) or the dictionary of xz -6 (8 MiB) fit
	// many times over; a stream asking a larger window or dictionary than
	// is left (xz -9: 64 MiB, zstd --ultra -22: 128 MiB) is not read.
	DefaultMemory = 64 << 20
)

// DefaultLimits are the defaults of every field.
func DefaultLimits() Limits {
	return Limits{Bytes: DefaultBytes, Entries: DefaultEntries, Ratio: DefaultRatio, Memory: DefaultMemory}
}

// WithDefaults is l with its zero (or negative) fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.Bytes <= 0 {
		l.Bytes = d.Bytes
	}
	if l.Entries <= 0 {
		l.Entries = d.Entries
	}
	if l.Ratio <= 0 {
		l.Ratio = d.Ratio
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	return l
}

// String is the effective limits, for a policy digest.
func (l Limits) String() string {
	l = l.WithDefaults()
	return fmt.Sprintf("bytes:%d,entries:%d,ratio:%d,grace:%d,memory:%d", l.Bytes, l.Entries, l.Ratio, RatioGrace, l.Memory)
}

// Options say how deep Walk goes and what it reads.
type Options struct {
	// Depth is how many levels of archives are opened: 1 opens the walked
	// content only, 2 the archives in it too, and so on. A compressed
	// archive (.tar.gz, .zip.xz) is one level.
	Depth int
	// MaxEntryBytes: a larger file is skipped (SkipEntrySize), and so is
	// a larger nested zip or xz, which must be held whole to be opened;
	// but see Overlap. Zero or negative: no limit but Limits.Bytes.
	MaxEntryBytes int64
	// Overlap, when positive, passes a text file larger than a part may
	// be — MaxEntryBytes, or what the walk's memory has left — on in
	// parts (Entry.Part) of that size, each overlapping the one before by
	// Overlap bytes, read through the same buffer, instead of skipping
	// it; a part must be at least 2 × Overlap, or the file is skipped.
	// Limits.Bytes still bounds what is read.
	Overlap int
	Limits  Limits
	// Binary, when set, says from a file's first SniffLen bytes whether it
	// is binary: such a file is passed on as Skipped without being read
	// further (a jar's classes cost 8 KiB each, not their size).
	Binary   func(head []byte) bool
	SniffLen int
	// Pool, when set, bounds the walks in progress at once: Walk waits
	// for a place in it.
	Pool *Pool
}

// Entry is a regular file inside the walked archive.
type Entry struct {
	// Path is its inner path, the levels joined with Separator, each name
	// shown as the archive spells it (see display). The content of a
	// compressed stream that is no archive (a .gz of a text file) is
	// passed on at the stream's own path: "" for the walked content
	// itself, as gitleaks names it.
	Path string
	// Content is the file's content, valid during the call only; nil when
	// Opened or Skipped.
	Content []byte
	// Opened: the file is an archive, whose entries follow.
	Opened bool
	// Skipped: the file was not read. A Skip says why.
	Skipped bool
	// Part is set when the file is passed on in parts (Options.Overlap):
	// Content is then one part of it, and the file's entries follow one
	// another, in order, the last with Part.Last.
	Part *Part
}

// Part says where a part of a file passed on in parts is. Parts overlap by
// Options.Overlap bytes: part k+1 starts Overlap bytes before part k
// ends. Each keeps [From, To) of its Content — the first from 0, the
// last to its end, the others Overlap/2 in from either end — and the
// parts' kept ranges tile the file, each byte in exactly one: what starts
// in a part's kept range and reaches no further than Overlap/2 either
// side of its start is whole in that part.
type Part struct {
	Offset int64 // of Content[0] in the file
	Lines  int64 // '\n's in the file before Offset
	Column int64 // bytes from the start of Offset's line to Offset
	From   int   // the kept range of Content
	To     int
	Last   bool
}

// Reason says why a file, or the rest of an archive, was not read.
type Reason string

const (
	SkipDepth       Reason = "depth"         // an archive nested deeper than Options.Depth
	SkipEntrySize   Reason = "entry-size"    // a file larger than Options.MaxEntryBytes
	SkipBytes       Reason = "expanded-size" // Limits.Bytes reached: the walk ends
	SkipEntries     Reason = "entries"       // Limits.Entries reached: the walk ends
	SkipRatio       Reason = "ratio"         // Limits.Ratio reached: the walk ends
	SkipMemory      Reason = "memory"        // over Limits.Memory: a window, a dictionary, a directory, a file
	SkipCorrupt     Reason = "corrupt"       // damaged or truncated: the rest of that archive
	SkipEncrypted   Reason = "encrypted"     // an encrypted zip entry
	SkipUnsupported Reason = "unsupported"   // a compression method, entry kind or archive (7z, rar) not read
	SkipBinary      Reason = "binary"        // a binary file (Options.Binary): not read past its first bytes
)

// Reasons are every Reason, in a stable order.
func Reasons() []Reason {
	return []Reason{SkipDepth, SkipEntrySize, SkipBytes, SkipEntries, SkipRatio, SkipMemory, SkipCorrupt, SkipEncrypted, SkipUnsupported, SkipBinary}
}

var reasonWords = map[Reason]string{
	SkipDepth:       "nested deeper than the depth limit",
	SkipEntrySize:   "file larger than the size limit",
	SkipBytes:       "expanded size over the limit",
	SkipEntries:     "more entries than the limit",
	SkipRatio:       "expansion ratio over the limit",
	SkipMemory:      "would need more memory to decompress than the limit",
	SkipCorrupt:     "damaged or truncated archive",
	SkipEncrypted:   "encrypted entry",
	SkipUnsupported: "compression method, entry kind or archive format not supported",
	SkipBinary:      "binary file",
}

// Describe says what r means, in words that read after "skipped: ".
func (r Reason) Describe() string {
	if w, ok := reasonWords[r]; ok {
		return w
	}
	return string(r)
}

// Skip is something Walk did not read: a file, or the rest of an archive
// (Path is then the archive's, "" for the walked content itself).
type Skip struct {
	Path   string
	Reason Reason
	// Detail says more, for a log: the error of a damaged archive, the
	// limit reached.
	Detail string
}

// Walk opens content, an archive or compressed stream (see Detect), and
// calls fn for each regular file in it, in the archive's order, at every
// level down to opt.Depth. It returns what it skipped, and why; content
// that Detect does not recognise has nothing to walk.
//
// Memory: besides content, a walk holds at most opt.Limits.Memory (see
// memory.go).
func Walk(content []byte, opt Options, fn func(Entry)) []Skip {
	f := Detect(content)
	if f == None {
		return nil
	}
	opt.Limits = opt.Limits.WithDefaults()
	opt.SniffLen = max(opt.SniffLen, DetectLen)
	if opt.MaxEntryBytes <= 0 {
		opt.MaxEntryBytes = math.MaxInt64 - 1
	}
	opt.Pool.acquire()
	defer opt.Pool.release()
	w := &walker{opt: opt, fn: fn, input: int64(len(content))}
	if !f.opens() {
		w.skip("", SkipUnsupported, fmt.Sprintf("%s archive, not opened", f))
		return w.skips
	}
	if opt.Depth < 1 {
		w.skip("", SkipDepth, fmt.Sprintf("%s, archives not opened", f))
		return w.skips
	}
	_ = w.open(f, bytes.NewReader(content), content, "", 1)
	return w.skips
}

type walker struct {
	opt      Options
	fn       func(Entry)
	skips    []Skip
	input    int64 // bytes of the walked content
	expanded int64 // bytes decompression produced
	entries  int
	halted   bool     // a limit of the whole walk was reached
	reading  int      // how deep the file reads in progress are nested
	bufs     [][]byte // by reading, reused file to file
	held     int64    // memory held: bufs' arrays, directories, windows (memory.go)
}

// errHalt unwinds the walk once a limit of the whole walk is reached (the
// Skip is recorded where it was).
var errHalt = errors.New("archive: walk halted at a limit")

// recorded is an error whose Skip is already recorded, by the stream that
// failed: the archives reading through it stop without recording again.
type recorded struct{ error }

func (w *walker) skip(at string, r Reason, detail string) {
	w.skips = append(w.skips, Skip{Path: at, Reason: r, Detail: detail})
}

func (w *walker) halt(at string, r Reason, detail string) error {
	if !w.halted {
		w.halted = true
		w.skip(at, r, detail)
	}
	return errHalt
}

// settle ends an archive at path on err: a halt goes on unwinding, a
// recorded error stops here, any other is recorded as damage at path.
func (w *walker) settle(at string, err error) error {
	var rec recorded
	switch {
	case err == nil, errors.As(err, &rec):
		return nil
	case errors.Is(err, errHalt):
		return errHalt
	}
	w.skip(at, SkipCorrupt, err.Error())
	return nil
}

// count counts an entry of the archive at path.
func (w *walker) count(at string) error {
	if w.halted {
		return errHalt
	}
	w.entries++
	if w.entries > w.opt.Limits.Entries {
		return w.halt(at, SkipEntries, fmt.Sprintf("more than %d entries", w.opt.Limits.Entries))
	}
	return nil
}

// open walks the archive or stream of format f at path as level level. r
// reads it; b is its whole content for a zip, its first bytes (at least
// DetectLen) otherwise.
func (w *walker) open(f Format, r io.Reader, b []byte, at string, level int) error {
	switch f {
	case Zip:
		return w.zip(b, at, level)
	case Tar:
		return w.tar(r, at, level)
	}
	return w.stream(f, r, b, at, level)
}

// file reads one file at path: an entry of an archive at level (entry), or
// what a compressed stream at level holds.
func (w *walker) file(r io.Reader, at string, level int, entry bool) error {
	// Each file being read holds a buffer of its own while the files
	// nested in it are read: buffers go by how deep the reads are nested.
	w.reading++
	defer func() { w.reading-- }()
	buf := w.buf()
	head, eof, err := fill(buf, r, int64(w.opt.SniffLen))
	w.keep(head)
	if err != nil {
		return err
	}
	f := Detect(head)
	next := level + 1
	if f != None && !f.opens() {
		w.skip(at, SkipUnsupported, fmt.Sprintf("%s archive, not opened", f))
		if entry {
			w.fn(Entry{Path: at, Skipped: true})
		}
		return nil
	}
	if f != None {
		if !entry && (f == Tar || f == Zip) {
			next = level // .tar.gz is one archive
		}
		if next > w.opt.Depth {
			w.skip(at, SkipDepth, fmt.Sprintf("%s at level %d, the limit is %d", f, next, w.opt.Depth))
			if entry {
				w.fn(Entry{Path: at, Skipped: true})
			}
			return nil
		}
		if entry {
			w.fn(Entry{Path: at, Opened: true})
		}
		if f != Zip { // streamed
			return w.open(f, io.MultiReader(bytes.NewReader(head), r), head, at, next)
		}
	} else if w.opt.Binary != nil && w.opt.Binary(head) {
		if !entry && !eof {
			// A compressed stream's content, one file: read on to its end
			// through this buffer, so that the walk's limits see its size
			// and a bomb of binary (a gzip of 2 GiB of zeros) is cut short
			// as a bomb, not let pass as one binary file. An entry of an
			// archive is not (a jar's thousands of classes would cost
			// their size): it is bounded by the entries around it.
			if err := drain(r, head[:cap(head)]); err != nil {
				return err
			}
		}
		w.skip(at, SkipBinary, fmt.Sprintf("binary in its first %d bytes", len(head)))
		if entry {
			w.fn(Entry{Path: at, Skipped: true})
		}
		return nil
	}
	// The file is read whole into this level's buffer, which may grow by
	// what the walk's memory has left.
	all, limit, reason := head, w.opt.MaxEntryBytes, SkipEntrySize
	if room := int64(cap(head)) + w.opt.Limits.Memory - w.held; room < limit {
		limit, reason = room, SkipMemory
	}
	if !eof {
		all, _, err = fill(head, r, limit+1)
		w.keep(all)
		if err != nil {
			return err
		}
	}
	if int64(len(all)) > limit {
		if f == None && w.opt.Overlap > 0 && limit >= 2*int64(w.opt.Overlap) {
			return w.parts(all, r, limit, at)
		}
		w.skip(at, reason, fmt.Sprintf("over %d bytes", limit))
		if entry && f == None {
			w.fn(Entry{Path: at, Skipped: true})
		}
		return nil
	}
	if f != None {
		return w.open(f, nil, all, at, next)
	}
	if all == nil {
		all = []byte{}
	}
	w.fn(Entry{Path: at, Content: all})
	return nil
}

// parts passes on the file at path, larger than size, in parts of size
// bytes (see Part): buf, this level's buffer, holds its first size+1
// bytes, r the rest. One byte more than a part is read ahead, to know
// whether the part is the last. Nothing is allocated: each part is read
// into buf after the overlap is moved to its start.
func (w *walker) parts(buf []byte, r io.Reader, size int64, at string) error {
	overlap := int64(w.opt.Overlap)
	half := int(overlap / 2)
	var p Part
	for {
		p.Last = int64(len(buf)) <= size
		content := buf[:min(int64(len(buf)), size)]
		p.From, p.To = 0, len(content)
		if p.Offset > 0 {
			p.From = half
		}
		if !p.Last {
			p.To = len(content) - half
		}
		part := p
		w.fn(Entry{Path: at, Content: content, Part: &part})
		if p.Last {
			return nil
		}
		step := size - overlap
		passed := content[:step]
		if k := bytes.LastIndexByte(passed, '\n'); k >= 0 {
			p.Lines += int64(bytes.Count(passed, []byte{'\n'}))
			p.Column = step - int64(k+1)
		} else {
			p.Column += step
		}
		p.Offset += step
		buf = buf[:copy(buf, buf[step:])]
		var err error
		if buf, _, err = fill(buf, r, size+1); err != nil {
			return err
		}
	}
}

// buf is the buffer of the read at the current nesting, empty.
func (w *walker) buf() []byte {
	for len(w.bufs) <= w.reading {
		w.bufs = append(w.bufs, nil)
	}
	return w.bufs[w.reading][:0]
}

// keep keeps b's array as the current read's buffer when it grew.
func (w *walker) keep(b []byte) {
	if old := cap(w.bufs[w.reading]); cap(b) > old {
		w.held += int64(cap(b) - old)
		w.bufs[w.reading] = b[:0]
	}
}

// drain reads r to its end through buf.
func drain(r io.Reader, buf []byte) error {
	for {
		_, err := r.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fill appends from r to buf until buf holds n bytes or r ends (eof).
func fill(buf []byte, r io.Reader, n int64) (_ []byte, eof bool, err error) {
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grow := max(len(buf), 4096)
			if room := n - int64(len(buf)); int64(grow) > room {
				grow = int(room)
			}
			buf = slices.Grow(buf, grow)
		}
		end := cap(buf)
		if int64(end) > n {
			end = int(n)
		}
		m, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// ---- zip ----

// Zip compression methods beyond store and deflate that Walk reads.
const (
	zipBzip2 = 12
	zipZstd  = 93
)

func (w *walker) zip(b []byte, at string, level int) error {
	if need, ok := zipDirectoryMemory(b); ok {
		if err := w.reserve(need, "zip directory"); err != nil {
			w.skip(at, SkipMemory, err.Error())
			return nil
		}
		defer w.unreserve(need)
	}
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are only displayed
		w.skip(at, SkipCorrupt, err.Error())
		return nil
	}
	// Each entry's decoder is granted its memory when the entry is opened
	// and gives it back when it is closed.
	for method, f := range map[uint16]Format{zip.Deflate: Gzip, zipBzip2: Bzip2, zipZstd: Zstd} {
		z.RegisterDecompressor(method, func(r io.Reader) io.ReadCloser { return w.zipDecoder(f, r) })
	}
	for _, f := range z.File {
		if err := w.count(at); err != nil {
			return err
		}
		if !f.Mode().IsRegular() { // directories, links
			continue
		}
		p := join(at, display(f.Name))
		if f.Flags&0x1 != 0 {
			w.skip(p, SkipEncrypted, "")
			w.fn(Entry{Path: p, Skipped: true})
			continue
		}
		rc, err := f.Open()
		if err != nil {
			reason := SkipCorrupt
			if errors.Is(err, zip.ErrAlgorithm) {
				reason, err = SkipUnsupported, fmt.Errorf("zip compression method %d", f.Method)
			}
			w.skip(p, reason, err.Error())
			w.fn(Entry{Path: p, Skipped: true})
			continue
		}
		// Entries are independent: a damaged one does not end the zip.
		err = w.settle(p, w.file(w.counted(rc, p), p, level, true))
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- tar ----

func (w *walker) tar(r io.Reader, at string, level int) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) { // names are only displayed
			return w.settle(at, err)
		}
		if err := w.count(at); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeGNUSparse {
			continue // directories, links, devices: no content
		}
		p := join(at, display(h.Name))
		if sparse(h) {
			// Holes read as zeros without coming from the input or a
			// decompressor: no limit but the file's size would bound them.
			w.skip(p, SkipUnsupported, "sparse file")
			w.fn(Entry{Path: p, Skipped: true})
			continue
		}
		// A tar is one stream: a damaged file ends it.
		if err := w.file(tr, p, level, true); err != nil {
			return w.settle(at, err)
		}
	}
}

func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// ---- compressed streams ----

// stream walks a compressed stream at path as level: what it holds is an
// archive of the same level (a tar), or one file at the stream's path.
func (w *walker) stream(f Format, r io.Reader, head []byte, at string, level int) error {
	need, window, err := streamMemory(f, head)
	if err == nil {
		err = w.reserve(need, f.String())
	}
	if err != nil {
		w.skip(at, reasonOf(err), err.Error())
		return nil
	}
	defer w.unreserve(need)
	rc, reason, err := decompressor(f, r, window)
	if err != nil {
		w.skip(at, reason, err.Error())
		return nil
	}
	defer rc.Close()
	return w.settle(at, w.file(w.counted(rc, at), at, level, false))
}

// counted reads what a decompressor at path produces against the walk's
// limits, and records its first error (as damage at path).
func (w *walker) counted(r io.Reader, at string) io.Reader {
	return &counter{w: w, r: r, at: at}
}

type counter struct {
	w   *walker
	r   io.Reader
	at  string
	err error // sticky
}

func (c *counter) Read(p []byte) (int, error) {
	w := c.w
	if c.err != nil {
		return 0, c.err
	}
	if w.halted {
		return 0, errHalt
	}
	// Never ask for more than the limit allows, and one byte to see it
	// passed.
	if left := w.opt.Limits.Bytes - w.expanded + 1; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := safeRead(c.r, p)
	w.expanded += int64(n)
	switch l := w.opt.Limits; {
	case w.expanded > l.Bytes:
		c.err = w.halt(c.at, SkipBytes, fmt.Sprintf("over %d bytes decompressed", l.Bytes))
		return 0, c.err
	case w.expanded > RatioGrace && w.expanded > int64(l.Ratio)*w.input:
		c.err = w.halt(c.at, SkipRatio, fmt.Sprintf("over %d:1, %d bytes decompressed from %d", l.Ratio, w.expanded, w.input))
		return 0, c.err
	case err != nil && err != io.EOF:
		if errors.Is(err, errHalt) {
			return n, err
		}
		w.skip(c.at, reasonOf(err), err.Error())
		c.err = recorded{err}
		return n, c.err
	}
	return n, err
}

// safeRead reads from a decompressor, whose panic on hostile input (a bug
// of its own) is taken for damage, not let through.
func safeRead(r io.Reader, p []byte) (n int, err error) {
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, fmt.Errorf("decompressor failure: %v", v)
		}
	}()
	return r.Read(p)
}

// zipDecoder decodes a zip entry compressed as f (Gzip for deflate) within
// the walk's memory: what its header asks is reserved until Close.
func (w *walker) zipDecoder(f Format, r io.Reader) io.ReadCloser {
	br := bufio.NewReaderSize(r, entryHeadLen)
	head, _ := br.Peek(entryHeadLen) // what the stream has of it
	need, window := int64(gzipMemory), int64(0)
	var err error
	if f != Gzip {
		need, window, err = streamMemory(f, head)
	}
	if err == nil {
		err = w.reserve(need, f.String())
	}
	if err != nil {
		return io.NopCloser(errReader{err})
	}
	var rc io.ReadCloser
	if f == Gzip {
		rc = flate.NewReader(br)
	} else if rc, _, err = decompressor(f, br, window); err != nil {
		w.unreserve(need)
		return io.NopCloser(errReader{err})
	}
	return &reserved{ReadCloser: rc, release: func() { w.unreserve(need) }}
}

// reserved gives back its reservation once, when closed.
type reserved struct {
	io.ReadCloser
	release func()
}

func (r *reserved) Close() error {
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return r.ReadCloser.Close()
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// ---- names ----

func join(outer, name string) string {
	if outer == "" {
		return name
	}
	return outer + Separator + name
}

// display is how an entry's name is shown: cleaned as gitleaks cleans it
// ("./a" is "a"; a leading "../" or "/" stays, visible), with control and
// format characters and bytes that are not UTF-8 escaped as \xNN or \uNNNN,
// so that a name can neither hide part of itself, nor break a line of
// output or a database row. It is never used as a file system path.
func display(name string) string {
	name = path.Clean(name)
	clean := true
	for _, r := range name {
		if escaped(r) {
			clean = false
			break
		}
	}
	if clean {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, name[i])
		case escaped(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	return b.String()
}

func escaped(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
