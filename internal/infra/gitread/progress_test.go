package gitread

import (
	"bytes"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/gittest"
)

// A read of a large object tells the Packs' OnProgress hook that it is at
// work, as it goes (each 16 MiB inflated, each large object held): the
// scan turns these calls into heartbeats, so that a single blob of GiB is
// not given up as hung (issue 31: with GITFLEET_MAX_OBJECT_BYTES=2GiB a
// scan lost 3 attempts to the heartbeat timeout). A small object calls
// nothing.
func TestReadLargeObjectReportsProgress(t *testing.T) {
	big := bytes.Repeat([]byte("a large honest file, line after line\n"), (48<<20)/37)
	p := gittest.NewPack()
	small, _ := p.Blob([]byte("small\n"))
	hb, off := p.Blob(big)
	hd := gittest.Hash("blob", append(append([]byte(nil), big...), "more\n"...))
	p.OfsDelta(hd, off, gittest.Extend(len(big), "more\n"))
	dir := filepath.Join(t.TempDir(), "large.git")
	if err := p.WriteFiles(dir, "large", false); err != nil {
		t.Fatal(err)
	}
	ps := openPacks(t, dir)
	var calls atomic.Int64
	ps.OnProgress(func() { calls.Add(1) })
	for _, tt := range []struct {
		name string
		h    plumbing.Hash
		min  int64 // calls at least
	}{
		{"small blob", small, 0},
		// 48 MiB inflated: at 16 and 32 MiB, and the object held.
		{"whole blob of 48 MiB", hb, 3},
		// Its base inflated and held, then the target held.
		{"delta on it", hd, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			r := ps.NewReader()
			data, _, err := r.Read(tt.h, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := calls.Load()
			t.Logf("%d bytes read, %d calls", len(data), n)
			if tt.min == 0 && n != 0 || n < tt.min {
				t.Errorf("%d calls of the progress hook, want at least %d (none for a small object)", n, tt.min)
			}
		})
	}
}
