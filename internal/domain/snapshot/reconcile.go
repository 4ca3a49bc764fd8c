package snapshot

import (
	"sort"
	"time"
)

// Held is an image a runner's store holds.
type Held struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Fix is what a reconcile does about one snapshot on one runner.
type Fix string

const (
	// FixRepull: the row says ready but the image is gone (or another
	// image sits under its name): pull it again.
	FixRepull Fix = "repull"
	// FixRemoveImage: the store holds an image no row accounts for.
	FixRemoveImage Fix = "remove-image"
	// FixFinishRemoval: a removal did not reach the runner (it was
	// offline): remove the image and delete the row.
	FixFinishRemoval Fix = "finish-removal"
)

// Action is one fix.
type Action struct {
	Fix      Fix    `json:"fix"`
	Snapshot string `json:"snapshot"`
}

// Check is one runner's part of a reconcile over one range of snapshot
// names, read in the safe order: its rows (Before), then what its store
// holds (Held), then its rows again (After). Digests are the snapshots'
// known digests by name.
type Check struct {
	Before, After []Row
	Held          []Held
	Digests       map[string]string
}

// Actions says what to fix. The order of the reads is what makes them
// safe against a pull finishing while the reconcile looks: a row exists
// before its pull starts, and a pull records its image in the store before
// its row goes ready. So an image no row accounts for after the listing is
// an orphan (removed), whereas one listed before its row was read again
// may belong to a pull that has just finished; and a ready row whose image
// is missing is pulled again only if it was ready, unchanged (one
// Version), from before the listing to after it — a row that became ready
// meanwhile may have recorded its image after the listing. Rows in flight,
// and their images, are the propagation's and are left alone; a removing
// row is finished.
func (c Check) Actions() []Action {
	holds := map[string]string{}
	for _, h := range c.Held {
		holds[h.Name] = h.Digest
	}
	before := map[string]Row{}
	for _, r := range c.Before {
		before[r.SnapshotRef] = r
	}
	var out []Action
	accounted := map[string]bool{}
	for _, r := range c.After {
		accounted[r.SnapshotRef] = true
		switch r.State {
		case RowReady:
			d, has := holds[r.SnapshotRef]
			if has && (c.Digests[r.SnapshotRef] == "" || d == c.Digests[r.SnapshotRef]) {
				continue
			}
			if b, ok := before[r.SnapshotRef]; ok && b.State == RowReady && b.Version == r.Version {
				out = append(out, Action{FixRepull, r.SnapshotRef})
			}
		case RowRemoving:
			out = append(out, Action{FixFinishRemoval, r.SnapshotRef})
		}
	}
	for _, h := range c.Held {
		if !accounted[h.Name] {
			out = append(out, Action{FixRemoveImage, h.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Snapshot < out[j].Snapshot })
	return out
}

// Reconcile compares one runner's rows with what its store holds, the rows
// read before the listing (reconciles before version 1 of
// "reconcile-paged"; Check replaces it: an image pulled between the two
// reads was removed as an orphan while its row went ready). digests
// are the snapshots' known digests by name (a ready row whose image has
// another digest is pulled again). Rows in flight are the propagation's
// business and left alone; so are images whose row is in flight (a pull
// about to finish).
func Reconcile(rows []Row, digests map[string]string, held []Held) []Action {
	holds := map[string]string{}
	for _, h := range held {
		holds[h.Name] = h.Digest
	}
	var out []Action
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.SnapshotRef] = true
		d, has := holds[r.SnapshotRef]
		switch r.State {
		case RowReady:
			if !has || (digests[r.SnapshotRef] != "" && d != digests[r.SnapshotRef]) {
				out = append(out, Action{FixRepull, r.SnapshotRef})
			}
		case RowRemoving:
			out = append(out, Action{FixFinishRemoval, r.SnapshotRef})
		}
	}
	for _, h := range held {
		if !seen[h.Name] {
			out = append(out, Action{FixRemoveImage, h.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Snapshot < out[j].Snapshot })
	return out
}

// DueForRetry lists the rows in error for a transient reason whose backoff
// (RetryAfter with base) has passed at now; a failed build only until it
// has been retried MaxBuildRetries times.
func DueForRetry(rows []Row, now time.Time, base time.Duration) []Row {
	var out []Row
	for _, r := range rows {
		if due, ok := NextRetry(r, base); ok && !now.Before(due) {
			out = append(out, r)
		}
	}
	return out
}

// DefaultRetryBase is the first backoff of a row in error for a transient
// reason, unless the reconcile is given another.
const DefaultRetryBase = time.Minute

// NextRetry says from when the reconcile retries a row in error (its
// backoff, RetryAfter with base); ok is false for a row no reconcile
// retries: not in error, failed for a reason no retry changes, or a build
// retried MaxBuildRetries times.
func NextRetry(r Row, base time.Duration) (due time.Time, ok bool) {
	if r.State != RowError || !Transient(r.ErrorReason) || IsBuildFailure(r.ErrorReason) && r.Retries >= MaxBuildRetries {
		return time.Time{}, false
	}
	return RetryAfter(r, base), true
}
