package shard

import (
	"encoding/json"
	"strings"
	"testing"

	"gitfleet/internal/domain/archive"
)

// Every archive skip reason has a counter of its own, and counts with
// none are left out of the JSON.
func TestArchiveSkipsCountEachReason(t *testing.T) {
	var a ArchiveSkips
	for i, r := range archive.Reasons() {
		a.Add(r, int64(i+1))
	}
	seen := map[int64]bool{}
	for i, r := range archive.Reasons() {
		if n := a.Of(r); n != int64(i+1) || seen[n] {
			t.Errorf("%s: %d, want %d", r, n, i+1)
		}
		seen[a.Of(r)] = true
	}
	b, err := json.Marshal(Counts{Commits: 1})
	if err != nil || string(b) != `{"commits":1,"blobsScanned":0,"bytesScanned":0,"blobsSkipped":0,"findings":0}` {
		t.Errorf("JSON %s, %v", b, err)
	}
	c := Counts{}
	c.ArchiveSkips.Add(archive.SkipRatio, 2)
	if b, _ := json.Marshal(c); !strings.HasSuffix(string(b), `,"archiveSkips":{"ratio":2}}`) {
		t.Errorf("JSON %s", b)
	}
}

// A run leaves its shard Done when it read everything, or walked every ref
// to its tip and what it could not read cannot be recovered; otherwise the
// shard stays Active for the next run to continue.
func TestReceiptSettled(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    Receipt
		want bool
	}{
		{"complete", Receipt{Complete: true, Covered: true}, true},
		{"complete before holes were recorded", Receipt{Complete: true}, true},
		{"covered, an oversized blob skipped", Receipt{Covered: true}, true},
		{"covered, the holes are lost", Receipt{Covered: true, Lost: 2}, true},
		{"covered, a hole a later run may read", Receipt{Covered: true, Holes: 1, Lost: 2}, false},
		{"out of time", Receipt{Counts: Counts{OutOfTime: true}}, false},
		{"not covered", Receipt{Holes: 0}, false},
	} {
		if got := tt.r.Settled(); got != tt.want {
			t.Errorf("%s: settled = %t, want %t", tt.name, got, tt.want)
		}
	}
}

// A breakdown names every count a batch adds blob by blob, each once, and
// adding two attempts' breakdowns adds each count.
func TestBreakdownAddsEveryCount(t *testing.T) {
	var a Counts
	a.Missing, a.Corrupt, a.Unreadable, a.Oversized, a.Binary = 1, 2, 3, 4, 5
	for i, r := range archive.Reasons() {
		a.ArchiveSkips.Add(r, int64(10+i))
	}
	a.Commits, a.BlobsScanned, a.OutOfTime = 7, 8, true // not the batches' to sum
	m := a.Breakdown()
	if len(m) != 5+len(archive.Reasons()) {
		t.Fatalf("breakdown %v: %d names, want %d", m, len(m), 5+len(archive.Reasons()))
	}
	b := Counts{Binary: 1, Commits: 3}
	b.AddBreakdown(m)
	b.AddBreakdown(m)
	want := Counts{Missing: 2, Corrupt: 4, Unreadable: 6, Oversized: 8, Binary: 11, Commits: 3}
	for i, r := range archive.Reasons() {
		want.ArchiveSkips.Add(r, 2*int64(10+i))
	}
	if b != want {
		t.Fatalf("two breakdowns added: %+v, want %+v", b, want)
	}
	if m := (Counts{Commits: 1}).Breakdown(); len(m) != 0 {
		t.Fatalf("breakdown of no skips: %v, want none", m)
	}
}
