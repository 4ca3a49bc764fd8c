// Package placement decides which worker owns a repository's Git work:
// its mirror, the syncs and fetches into it, and the scans that read it.
// Ownership is a pure function of the repository and the live workers —
// rendezvous (highest random weight) hashing — so every worker and every
// workflow computes the same owner without a coordinator, and when a
// worker joins or leaves only the repositories it gains or held (about 1/N
// of them) move.
package placement

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// weight is the rendezvous score of a worker for a repository: the first
// 8 bytes of SHA-256 over both, so it spreads evenly whatever the names.
func weight(worker, key string) uint64 {
	h := sha256.New()
	h.Write([]byte(worker))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// Rank orders workers by their claim on key, the owner first, then the
// worker that takes over if the owner goes, and so on. Ties (never seen
// with SHA-256, but possible) fall back to the workers' names.
func Rank(key string, workers []string) []string {
	type scored struct {
		name string
		w    uint64
	}
	s := make([]scored, 0, len(workers))
	for _, w := range workers {
		s = append(s, scored{w, weight(w, key)})
	}
	slices.SortFunc(s, func(a, b scored) int {
		switch {
		case a.w > b.w:
			return -1
		case a.w < b.w:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.name
	}
	return out
}

// URLKey is the key of a repository cloned from url (a collection's clone
// URL, a codebase shard's location): workflows place its Git work under
// it, and a worker tells which of its mirrors it owns by it.
func URLKey(url string) string { return strings.ToLower(url) }

// Owner is the worker that owns key among workers ("" when there are
// none).
func Owner(key string, workers []string) string {
	best, bestW := "", uint64(0)
	for _, w := range workers {
		if x := weight(w, key); best == "" || x > bestW || (x == bestW && w < best) {
			best, bestW = w, x
		}
	}
	return best
}

// State is a worker's registration state.
type State string

const (
	// Active workers own repositories.
	Active State = "active"
	// Draining workers finish what they hold and take nothing new: their
	// repositories go to the next in rank.
	Draining State = "draining"
)

// ValidWorkerID checks a worker id: it names a task queue and a row, so
// letters, digits, '.', '-' and '_', up to 64.
func ValidWorkerID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("worker id %q: want 1 to 64 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("worker id %q: only letters, digits, '.', '-' and '_'", id)
		}
	}
	return nil
}
