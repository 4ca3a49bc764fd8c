package bombs

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
)

// The bombs are what they say (All's sizes cost seconds to build: the
// benchmarks build them).
func TestBombs(t *testing.T) {
	zeros, _ := GzipZeros(10 << 20)
	r, err := gzip.NewReader(bytes.NewReader(zeros))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, r); err != nil || n != 10<<20 {
		t.Errorf("GzipZeros(10 MiB) inflates to %d bytes, %v", n, err)
	}
	if z := NestedZstd(8, 26, []byte("x")); len(z) != 8*9+1 || !bytes.HasPrefix(z, zstdMagic) {
		t.Errorf("NestedZstd: %d bytes % x", len(z), z[:9])
	}
	if _, err := XzHiddenBlock(40); err != nil {
		t.Error(err)
	}
	nested, err := NestedZip(3, 10)
	if err != nil {
		t.Fatal(err)
	}
	for level := range 3 {
		zr, err := zip.NewReader(bytes.NewReader(nested), int64(len(nested)))
		if err != nil {
			t.Fatalf("level %d: %v", level, err)
		}
		if level == 2 {
			if len(zr.File) != 10 {
				t.Errorf("the innermost lists %d entries, want 10", len(zr.File))
			}
			break
		}
		f, err := zr.File[0].Open()
		if err == nil {
			nested, err = io.ReadAll(f)
		}
		if err != nil || len(zr.File) != 1 {
			t.Fatalf("level %d: %d entries, %v", level, len(zr.File), err)
		}
	}
}
