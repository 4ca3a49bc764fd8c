package archive

import (
	"bytes"
	"strconv"
)

// Format is a kind of archive or compressed stream.
type Format uint8

const (
	None   Format = iota
	Zip           // any zip container: .zip, .jar, .war, .apk, .docx…
	Tar           // POSIX (ustar, pax) and GNU tar
	Gzip          // a gzip stream; .tar.gz is a tar inside one
	Bzip2         // a bzip2 stream
	Zstd          // a zstd stream
	Xz            // an xz stream
	Snappy        // a framed snappy (or S2) stream
	// Recognised, not opened: Walk counts each as a Skip (SkipUnsupported),
	// so that a scan says it did not read them.
	SevenZip // a 7z archive
	Rar      // a RAR archive, version 4 or 5
)

var formatNames = [...]string{None: "none", Zip: "zip", Tar: "tar", Gzip: "gzip", Bzip2: "bzip2", Zstd: "zstd", Xz: "xz", Snappy: "snappy",
	SevenZip: "7z", Rar: "rar"}

// opens reports whether Walk opens archives of format f.
func (f Format) opens() bool { return f != None && f != SevenZip && f != Rar }

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// DetectLen is how many leading bytes Detect needs to recognise every
// format (a tar header is 512 bytes).
const DetectLen = 512

// Magic numbers, from each format's specification.
var (
	zipLocal  = []byte("PK\x03\x04")
	zipEmpty  = []byte("PK\x05\x06") // an end of central directory first: no entries
	zipSpan   = []byte("PK\x07\x08PK\x03\x04")
	gzipMagic = []byte{0x1f, 0x8b, 8} // 8: deflate, the only method defined
	bz2Block  = []byte{0x31, 0x41, 0x59, 0x26, 0x53, 0x59}
	bz2End    = []byte{0x17, 0x72, 0x45, 0x38, 0x50, 0x90} // an empty stream
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	xzMagic   = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	snappyID  = []byte("\xff\x06\x00\x00sNaPpY")
	s2ID      = []byte("\xff\x06\x00\x00S2sTwO")
	sevenZip  = []byte("7z\xbc\xaf\x27\x1c")
	rar4      = []byte("Rar!\x1a\x07\x00")
	rar5      = []byte("Rar!\x1a\x07\x01\x00")
)

// Detect recognises an archive or compressed stream by its first bytes
// (DetectLen are enough); None when b is neither.
//
// The magic numbers hold control bytes, or bytes that are not UTF-8, that
// text does not start with; bzip2's is letters and digits, so its first
// block's magic is checked too, ten bytes in all. A tar header is checked
// by its checksum as well as its magic.
func Detect(b []byte) Format {
	switch {
	case bytes.HasPrefix(b, zipLocal), bytes.HasPrefix(b, zipEmpty), bytes.HasPrefix(b, zipSpan):
		return Zip
	case bytes.HasPrefix(b, gzipMagic):
		return Gzip
	case len(b) >= 10 && b[0] == 'B' && b[1] == 'Z' && b[2] == 'h' && b[3] >= '1' && b[3] <= '9' &&
		(bytes.Equal(b[4:10], bz2Block) || bytes.Equal(b[4:10], bz2End)):
		return Bzip2
	case bytes.HasPrefix(b, zstdMagic):
		return Zstd
	case bytes.HasPrefix(b, xzMagic):
		return Xz
	case bytes.HasPrefix(b, snappyID), bytes.HasPrefix(b, s2ID):
		return Snappy
	case bytes.HasPrefix(b, sevenZip):
		return SevenZip
	case bytes.HasPrefix(b, rar4), bytes.HasPrefix(b, rar5):
		return Rar
	case isTar(b):
		return Tar
	}
	return None
}

// isTar recognises a ustar (POSIX, pax) or GNU tar header: its magic and
// its checksum. A pre-POSIX (v7) tar has no magic and is not recognised.
func isTar(b []byte) bool {
	if len(b) < 512 {
		return false
	}
	h := b[:512]
	if !bytes.Equal(h[257:263], []byte("ustar\x00")) && !bytes.Equal(h[257:265], []byte("ustar  \x00")) {
		return false
	}
	field := bytes.Trim(h[148:156], " \x00")
	want, err := strconv.ParseUint(string(field), 8, 32)
	if err != nil {
		return false
	}
	// The sum of the header's bytes with the checksum field as spaces;
	// some old tars summed signed bytes.
	var unsigned, signed int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return int64(want) == unsigned || int64(want) == signed
}
