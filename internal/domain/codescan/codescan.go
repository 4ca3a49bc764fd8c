// Package codescan decides when a repository's findings go to GitHub code
// scanning and how an upload is waited for (architecture §8, "Where
// developers look: code scanning"): pure logic, no I/O.
//
// An upload carries every occurrence of the repository's secrets, a
// resolved one with a suppression (code scanning shows it dismissed). A
// collection uploads when what it would send differs from the last upload
// — a secret found or gone, a resolution made or undone — not when only
// the head commit moved: the digest covers the results, not the commit.
package codescan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Digest sums the results of an upload, in any order.
type Digest struct {
	lines           []string
	Open, Dismissed int
}

// Add counts one result: the secret's fingerprint, where it is, what its
// last validity check found (the result's severity follows it), and
// whether it goes as dismissed.
func (d *Digest) Add(fingerprint, rule, file string, line int, validity string, dismissed bool) {
	d.lines = append(d.lines, fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%s\x00%t", fingerprint, rule, file, line, validity, dismissed))
	if dismissed {
		d.Dismissed++
	} else {
		d.Open++
	}
}

// Sum is the digest: the same for the same results in any order.
func (d *Digest) Sum() string {
	l := slices.Clone(d.lines)
	slices.Sort(l)
	h := sha256.Sum256([]byte(strings.Join(l, "\n")))
	return hex.EncodeToString(h[:16])
}

// Upload states, as the database keeps them.
const (
	Pending  = "pending"
	Complete = "complete"
	Failed   = "failed"
	NotSent  = "not_sent"
)

// Last is what decides whether to upload of a repository's newest upload.
type Last struct {
	Digest string
	State  string
	At     time.Time
}

// RecheckNotSent is how long after "not sent" (no App, the App lacks the
// permission) a collection looks again: an operator granting the
// permission is seen within it, and a fleet without it costs one look an
// hour per repository, not one per collection.
const RecheckNotSent = time.Hour

// Due says whether a collection uploads, and why (for the history and
// the logs): never uploaded and there is something to say; the results
// differ from the last upload's; or nothing was sent the last time and
// it is time to look again. A failed processing with the same results is
// not due: its retries are spent, and `starter show` reports it until the
// results change.
func Due(last *Last, digest string, results int, now time.Time) (bool, string) {
	switch {
	case last == nil && results == 0:
		return false, "no results and never uploaded"
	case last == nil:
		return true, "never uploaded"
	case last.Digest != digest:
		return true, "the results changed since the last upload"
	case last.State == NotSent && now.Sub(last.At) >= RecheckNotSent:
		return true, "nothing was sent; looking again"
	}
	return false, "the last upload has these results (" + last.State + ")"
}

// MaxAttempts is how many times one upload is sent when GitHub's
// processing fails: once, and once more.
const MaxAttempts = 2

// MaxPolls bounds the looks at an upload's processing status; the delays
// (PollDelay) add up to about 6 minutes.
const MaxPolls = 14

// PollDelay is the wait before look i (from 0): 1 s, doubling, at most
// 30 s. GitHub processes most uploads within seconds, a large one in
// minutes.
func PollDelay(i int) time.Duration {
	if i >= 5 {
		return 30 * time.Second
	}
	return time.Second << i
}

// Ref is the ref an upload for a branch names.
func Ref(branch string) string { return "refs/heads/" + branch }
