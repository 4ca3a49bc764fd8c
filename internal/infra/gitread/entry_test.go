package gitread

import (
	"testing"
	"unsafe"
)

// The indexer holds one entry per object of the pack: its size is most of
// the indexer's memory on a large pack.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 36 {
		t.Fatalf("entry is %d bytes, want 36", n)
	}
	var e entry
	for _, off := range []int64{12, 1<<32 - 1, 1 << 32, 5<<30 + 7, maxEntryOffset} {
		e.setOff(off)
		if e.off() != off {
			t.Fatalf("offset %d reads back as %d", off, e.off())
		}
	}
}
