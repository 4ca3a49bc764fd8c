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

// Reconcile compares one runner's rows with what its store holds. digests
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
// (RetryAfter with base) has passed at now.
func DueForRetry(rows []Row, now time.Time, base time.Duration) []Row {
	var out []Row
	for _, r := range rows {
		if r.State == RowError && Transient(r.ErrorReason) && !now.Before(RetryAfter(r, base)) {
			out = append(out, r)
		}
	}
	return out
}
