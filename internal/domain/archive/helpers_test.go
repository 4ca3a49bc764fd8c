package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Archives are built in memory, from these files.
type file struct {
	name    string
	content string
	// Optional: a zip entry's method (default deflate) and flags; a tar
	// entry's type (default regular).
	method uint16
	stored bool
	flags  uint16
	raw    string // a zip entry's compressed bytes, for a method the writer lacks
	typ    byte
}

func f(name, content string) file { return file{name: name, content: content} }

func dir(name string) file { return file{name: name, typ: tar.TypeDir} }

func zipOf(t testing.TB, files ...file) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, x := range files {
		h := &zip.FileHeader{Name: x.name, Method: zip.Deflate, Flags: x.flags}
		if x.method != 0 {
			h.Method = x.method
		}
		if x.stored {
			h.Method = zip.Store
		}
		if x.typ == tar.TypeDir {
			h.Name, h.Method = x.name+"/", zip.Store
		}
		var w io.Writer
		var err error
		data := x.content
		if h.Method != zip.Deflate && h.Method != zip.Store {
			// A method the writer cannot compress: raw, as given.
			data = x.raw
			h.CompressedSize64, h.UncompressedSize64 = uint64(len(data)), uint64(len(x.content))
			h.CRC32 = crc32.ChecksumIEEE([]byte(x.content))
			w, err = zw.CreateRaw(h)
		} else {
			w, err = zw.CreateHeader(h)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tarOf(t testing.TB, files ...file) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, x := range files {
		h := &tar.Header{Name: x.name, Mode: 0o644, Size: int64(len(x.content)), Typeflag: tar.TypeReg}
		if x.typ != 0 {
			h.Typeflag, h.Size = x.typ, 0
		}
		if x.typ == tar.TypeSymlink {
			h.Linkname = "elsewhere"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.WriteString(tw, x.content); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sparseTar is a tar whose first file is a GNU sparse file (PAX format
// 1.0) of a million bytes holding data at its start, then more files. Go's
// writer writes no sparse files: its PAX header is written as a regular
// file and retyped.
func sparseTar(t testing.TB, name, data string, more ...file) []byte {
	t.Helper()
	var records string
	for _, kv := range [][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"},
		{"GNU.sparse.name", name}, {"GNU.sparse.realsize", "1000000"}} {
		r := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(r) + 2
		if len(strconv.Itoa(n)) != 2 {
			t.Fatal("a record too long for this helper")
		}
		records += strconv.Itoa(n) + r
	}
	sparseMap := "1\n0\n" + strconv.Itoa(len(data)) + "\n"
	body := sparseMap + strings.Repeat("\x00", 512-len(sparseMap)) + data
	b := tarOf(t, append([]file{f("PaxHeaders/"+name, records), f("GNUSparseFile.0/"+name, body)}, more...)...)
	b[156] = tar.TypeXHeader
	copy(b[148:156], "        ")
	var sum int
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// newNoise is n characters of text that does not compress.
func newNoise(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = "0123456789abcdef"[r.IntN(16)]
	}
	return string(b)
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(b, nil)
}

func xzOf(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := xz.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func snappy(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := s2.NewWriter(&out, s2.WriterSnappyCompat())
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// bzip2 has no writer in Go's library: these streams were made by bzip2(1).
var (
	bz2Hello = unhex("425a6839314159265359b12b03d6000002d9800010400010003264c8302000220988c32840000bd8de45f4e040641f8bb9229c2848589581eb00") // "bzip2 says hello\n"
	bz2Empty = unhex("425a683917724538509000000000")
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func isBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

// walked is what a Walk called back with and returned.
type walked struct {
	files   map[string]string // path → content
	opened  []string
	skipped []string // entries passed on as Skipped
	skips   []Skip
}

func walk(content []byte, opt Options) walked {
	w := walked{files: map[string]string{}}
	w.skips = Walk(content, opt, func(e Entry) {
		switch {
		case e.Opened:
			w.opened = append(w.opened, e.Path)
		case e.Skipped:
			w.skipped = append(w.skipped, e.Path)
		default:
			if e.Content == nil {
				panic("a file without content: " + e.Path)
			}
			w.files[e.Path] = string(e.Content)
		}
	})
	return w
}

func opts(depth int) Options {
	return Options{Depth: depth, MaxEntryBytes: 10 << 20, Binary: isBinary, SniffLen: 8000}
}
