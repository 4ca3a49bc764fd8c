// Package sweeprange splits the re-collection sweep's candidates into
// ranges, one sweep a range (architecture §5): each codebase falls in one
// of Buckets buckets by a hash of its id (PostgreSQL's hashint8, computed
// by the store), and range k of n is a contiguous run of buckets. For
// every n from 1 to Buckets the n ranges are disjoint and cover every
// bucket, so a pass of n sweeps reads each codebase once.
package sweeprange

import "fmt"

// Buckets is how many buckets the codebases fall in; the most ranges a
// pass may have.
const Buckets = 1024

// MaxRanges bounds a pass's ranges: each range is a workflow with an
// activity at a time, and past this many the fleet's activity slots, not
// the ranges, bound the check rate.
const MaxRanges = 256

// Range is range K of N (0 ≤ K < N). The zero value (N = 0) is the whole
// fleet: the sweeps before ranges.
type Range struct {
	K int `json:"k"`
	N int `json:"n"`
}

// Whole reports whether r is the whole fleet (no split).
func (r Range) Whole() bool { return r.N <= 1 }

// Buckets are r's buckets, [lo, hi).
func (r Range) Buckets() (lo, hi int) {
	if r.Whole() {
		return 0, Buckets
	}
	return r.K * Buckets / r.N, (r.K + 1) * Buckets / r.N
}

// String names the range as its sweep's workflow id does: "3-of-16".
func (r Range) String() string { return fmt.Sprintf("%d-of-%d", r.K, r.N) }

// Count is how many ranges a pass has: fixed when > 0, else one per live
// worker (each range's checks run on one worker's slot at a time, so the
// check rate grows with the workers), at least 1 and at most MaxRanges.
func Count(fixed, liveWorkers int) int {
	n := fixed
	if n <= 0 {
		n = liveWorkers
	}
	return min(max(n, 1), MaxRanges)
}

// Share is range k's share of room (Collect runs that may still start,
// fleet-wide) among n ranges, so that the n shares add up to room exactly
// and the bound on running Collects holds with every range starting at
// once. turn rotates the shares (a range's count of waits), so a room
// smaller than n does not go to the same ranges every time.
func Share(room, k, n, turn int) int {
	if n <= 1 || room <= 0 {
		return max(room, 0)
	}
	i := (k + turn) % n
	return room*(i+1)/n - room*i/n
}
