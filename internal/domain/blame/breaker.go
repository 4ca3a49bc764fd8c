package blame

import (
	"slices"
	"strings"
)

// BreakerLimit is how many failures in a row of one host (or one owner of a
// host) halt that host's (owner's) part of a sweep.
const BreakerLimit = 3

// Breaker is one host's or one owner's circuit breaker in a sweep.
type Breaker struct {
	// Streak is the failures in a row so far.
	Streak int `json:"streak,omitempty"`
	// Halted: Streak reached BreakerLimit; the sweep checks nothing more
	// of this host (owner).
	Halted bool `json:"halted,omitempty"`
}

// Breakers are a sweep's circuit breakers, one a host and one an owner of a
// host (HostKey, OwnerKey), so that a dead host stops only its own part of
// the sweep, whatever the order of the candidates: a healthy host's
// repositories, before, after or between the dead one's, are still checked.
// Only keys with failures in a row are kept (a sweep carries them across
// its runs).
type Breakers map[string]Breaker

// HostKey names a host's breaker.
func HostKey(host string) string { return strings.ToLower(host) }

// OwnerKey names the breaker of an owner of a host.
func OwnerKey(host, owner string) string { return HostKey(host) + "/" + strings.ToLower(owner) }

// Fail counts a failure against key and reports whether it halted key
// (this failure, not an earlier one).
func (b Breakers) Fail(key string) bool {
	k := b[key]
	if k.Halted {
		return false
	}
	k.Streak++
	k.Halted = k.Streak >= BreakerLimit
	b[key] = k
	return k.Halted
}

// Halt halts key at once (the checks gave its host up on their own).
func (b Breakers) Halt(key string) {
	b[key] = Breaker{Streak: max(b[key].Streak, BreakerLimit), Halted: true}
}

// Succeed ends the streaks of keys that are not halted.
func (b Breakers) Succeed(keys ...string) {
	for _, key := range keys {
		if !b[key].Halted {
			delete(b, key)
		}
	}
}

// Halted reports whether a repository of owner on host is halted: its
// host's breaker or its owner's.
func (b Breakers) Halted(host, owner string) bool {
	return b[HostKey(host)].Halted || b[OwnerKey(host, owner)].Halted
}

// HaltedHosts lists the hosts whose own breaker halted (not owners'), in
// order.
func (b Breakers) HaltedHosts() []string {
	var hosts []string
	for key, k := range b {
		if k.Halted && !strings.Contains(key, "/") {
			hosts = append(hosts, key)
		}
	}
	slices.Sort(hosts)
	return hosts
}
