package gitread

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Limits bound what reading a repository may cost a worker, whatever its
// data says. A pack of a few hundred bytes can describe objects of many
// GiB (a delta copies up to 16 MiB of its base per two bytes of
// instructions, and a chain of deltas multiplies that at each level), and
// a repository on disk can hold anything: gitread never holds an object
// larger than MaxObjectBytes, and an Indexer never receives a pack larger
// than MaxPackBytes nor names objects totalling more than inflateRatio
// times the pack's bytes. Data over a limit is an error wrapping ErrLimit
// (a *LimitError): valid Git, perhaps, but more than gitfleet reads, and
// reading it again gives the same answer.
type Limits struct {
	// MaxObjectBytes bounds every object gitread holds in memory: an
	// object read (ReadObject; Read within its own limit), a delta's data,
	// a delta's target (the intermediates of a chain included, whatever
	// the size of the object read at its top) and the base of a delta. A
	// delta declaring a larger target is refused on that header wherever
	// it is met (ObjectSize included): it can be neither read nor indexed
	// (an Indexer leaves it out of the index: Index.Refused). A whole object larger than this is still named by an
	// Indexer when it needs no memory (hashed as it inflates, no delta's
	// base), and its size read. 0 means DefaultMaxObjectBytes.
	MaxObjectBytes int64
	// MaxPackBytes bounds a pack an Indexer receives (and so the disk a
	// fetch uses). 0 means DefaultMaxPackBytes.
	MaxPackBytes int64
}

// Defaults of Limits.
const (
	// DefaultMaxObjectBytes is well above what Git hosts accept in a
	// repository (GitHub refuses files over 100 MiB).
	DefaultMaxObjectBytes = 256 << 20
	// DefaultMaxPackBytes is well above the packs of the largest public
	// repositories (a few GiB).
	DefaultMaxPackBytes = 8 << 30
)

// Bounds that need no setting.
const (
	// inflateRatio bounds the bytes an Indexer may name (the sizes of
	// every object of the pack, deltas resolved) per byte of the pack, at
	// least 4 × MaxObjectBytes. Deflate alone expands at most 1032:1; the
	// rest is what deltas copy, which the format does not bound (up to
	// 2^23 bytes per byte of instructions). Source code with long
	// histories names 10 to 30 times its pack; a history of a large file
	// rewritten daily a few hundred times.
	inflateRatio = 4096
	// MaxTreeDepth bounds how deep trees nest below a root tree, as git's
	// core.maxTreeDepth (4096): deeper trees are refused, not walked (a
	// walk recurses once per level).
	MaxTreeDepth = 4096
	// MaxRefsBytes bounds the refs of a repository gitread and the mirror
	// hold in memory: a packed-refs file, a remote's reference
	// advertisement (about a million refs).
	MaxRefsBytes = 64 << 20
	// maxRefFileBytes bounds a loose ref file (an object id or "ref:
	// <name>": git's are under 300 bytes).
	maxRefFileBytes = 4096
)

var limits atomic.Pointer[Limits]

// SetLimits sets the limits every Indexer, Packs and Walker created from
// now on applies (a worker sets them once from its configuration). Zero
// fields mean the defaults.
func SetLimits(l Limits) {
	l = l.withDefaults()
	limits.Store(&l)
}

// CurrentLimits returns the limits in force.
func CurrentLimits() Limits {
	if l := limits.Load(); l != nil {
		return *l
	}
	return Limits{}.withDefaults()
}

func (l Limits) withDefaults() Limits {
	if l.MaxObjectBytes <= 0 {
		l.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if l.MaxPackBytes <= 0 {
		l.MaxPackBytes = DefaultMaxPackBytes
	}
	return l
}

// inflateBudget is how many bytes of objects a pack of packBytes may name.
func (l Limits) inflateBudget(packBytes int64) int64 {
	return max(4*l.MaxObjectBytes, min(packBytes, 1<<50)*inflateRatio)
}

// ErrLimit is wrapped by every error about data over one of gitread's
// bounds (see Limits): it is a *LimitError.
var ErrLimit = errors.New("over a limit")

// LimitError says which bound data went over.
type LimitError struct {
	// What is the bound, in a few words: "object size", "pack size",
	// "inflated size", "delta chain", "tree depth", "refs size".
	What string
	// Setting is the configuration that sets it, if any
	// (GITFLEET_MAX_OBJECT_BYTES, GITFLEET_MAX_PACK_BYTES).
	Setting string
	// Detail says what was over it.
	Detail string
}

// Settings of the limits (read by package config).
const (
	SettingMaxObjectBytes = "GITFLEET_MAX_OBJECT_BYTES"
	SettingMaxPackBytes   = "GITFLEET_MAX_PACK_BYTES"
)

func (e *LimitError) Error() string {
	if e.Setting != "" {
		return fmt.Sprintf("over a limit: %s: %s (%s)", e.What, e.Detail, e.Setting)
	}
	return fmt.Sprintf("over a limit: %s: %s", e.What, e.Detail)
}

func (e *LimitError) Is(target error) bool { return target == ErrLimit }

func objectLimit(format string, args ...any) error {
	return &LimitError{What: "object size", Setting: SettingMaxObjectBytes, Detail: fmt.Sprintf(format, args...)}
}

func chainLimit(format string, args ...any) error {
	return &LimitError{What: "delta chain", Detail: fmt.Sprintf(format, args...)}
}

// ErrUnsafe is wrapped by the error for a file of a repository that
// gitread will not read: one reached through a symbolic link that leads
// out of the repository, or that is no regular file (a FIFO would block
// the read for ever, a device feed it for ever).
var ErrUnsafe = errors.New("unsafe file in the repository")

// Objects over gateBytes are resolved by one goroutine of the process at a
// time (the holder of bigGate): the readers of parallel scans and the
// resolving goroutines of concurrent indexers would otherwise each hold a
// few such objects at once (a chain's base, a delta, its target), and the
// limits bound each object, not how many are held. Git hosts refuse files
// over 100 MiB and repositories rarely hold many over 16 MiB, so the gate
// costs throughput on those only. A holder never waits for another
// goroutine while it holds the gate: no deadlock.
const gateBytes = 16 << 20

var bigGate = make(chan struct{}, 1)

// gateHold is one goroutine's hold on bigGate.
type gateHold bool

// admit takes the gate, if not held, for an object of n bytes over
// gateBytes; it reports false when stop is closed first.
func (g *gateHold) admit(n int64, stop <-chan struct{}) bool {
	if *g || n <= gateBytes {
		return true
	}
	select {
	case bigGate <- struct{}{}:
		*g = true
		return true
	case <-stop:
		return false
	}
}

// release gives the gate back, if held.
func (g *gateHold) release() {
	if *g {
		<-bigGate
		*g = false
	}
}
