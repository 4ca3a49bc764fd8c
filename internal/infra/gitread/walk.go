package gitread

import (
	"context"
	"errors"
	"fmt"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Range is one ref's work: the commits reachable from Tip and not from any of
// Stops.
//
// A Tip naming a tree or a blob (directly or through annotated tags: git
// allows refs to any object) has no history: the tree's blobs, or the blob,
// are reported once with a zero Blob.Commit (see Blob). A Tip that is not in
// the repository is skipped and counted (Stats.MissingTips).
//
// Stops are the watermarks: usually the ref's previous tip. A Stop that is
// no longer an ancestor of Tip (the ref was force-pushed) still excludes the
// history it shares with Tip; only the commits new on Tip's side are walked.
// A Stop that is not in the repository (force-pushed away and garbage
// collected, or never fetched) is ignored without error, so the whole history
// of Tip is walked: blobs scanned before are still not re-scanned, as long
// as the caller's Options.Seen remembers them. Tip and Stops may name
// annotated tags; they are peeled to commits.
type Range struct {
	Ref   string
	Tip   plumbing.Hash
	Stops []plumbing.Hash
}

// Blob is a blob introduced by a commit.
type Blob struct {
	Hash plumbing.Hash
	// Path is the blob's path in Commit's tree, '/'-separated. For a blob
	// a ref names directly it is the ref's name (Range.Ref).
	Path string
	// Commit introduced the blob; Ref is the Range.Ref of the range walked.
	// Commit is zero for the blobs of a tree or blob a ref names directly
	// (no commit introduced them).
	Commit plumbing.Hash
	Ref    string
	// Mode is the entry's mode: filemode.Regular, Executable, Deprecated or
	// Symlink.
	Mode filemode.FileMode
	// Size is the blob's size in bytes (read from the object header; the
	// content is not loaded).
	Size int64
}

// Options configure a Walker.
type Options struct {
	// Seen is asked before a blob is reported; returning true skips it (the
	// caller's seen-blobs set, possibly batched against a database). Called
	// at most once per blob hash per Walk, from Walk's goroutine. Nil means
	// nothing was seen.
	Seen func(plumbing.Hash) bool
	// Again, when set, is called for every introduction of a blob already
	// met in this Walk (each of Stats.Duplicates): at another path, or by
	// another commit at the same path. Its Size is not read (zero). Called
	// from Walk's goroutine; an error stops the walk and is returned as is.
	// (A scanner learns from it every path at which a blob holding a
	// secret was introduced, without reading the blob again.)
	Again func(Blob) error
	// Missed, when set, is called for every blob met for the first time
	// in this Walk that the walk could not read (counted in MissingBlobs or
	// CorruptBlobs; err says which: plumbing.ErrObjectNotFound or
	// ErrCorrupt), so the caller can record where it was. Its Size is zero.
	// Called from Walk's goroutine; an error stops the walk and is returned
	// as is. When set, it is also called for what the walk refuses over one
	// of the limits (err wraps ErrLimit, a *LimitError; counted in
	// RefusedBlobs or RefusedTrees): a blob whose size is over them (a
	// delta declaring a huge target, or one its pack's indexer left out of
	// the index over a limit: Packs.Refused), and a tree nested deeper than
	// MaxTreeDepth (b is the tree, its Mode filemode.Dir, its Path its
	// directory's), whose content is not walked. The walk then goes on
	// with the rest: one crafted object hides nothing else. Unset, a
	// refusal is an error that stops the walk.
	Missed func(b Blob, err error) error
	// Diffed, when set, is called after each commit is diffed (each of
	// Stats.Commits), from Walk's goroutine: a caller's live count of the
	// history walked (a scan's progress), where Stats comes only at the end.
	Diffed func()
	// TreeCacheBytes bounds the LRU cache of parsed trees; 0 means 8 MiB,
	// negative disables it.
	TreeCacheBytes int
	// Packs, when set, are the repository's packs (OpenPacks of the same
	// repository): the Walker then reads commits, trees and tags, and the
	// sizes of the blobs it reports, with a PackReader of its own, and
	// through go-git only the objects the packs do not have (alternates,
	// packs written after OpenPacks). It spares go-git's decoding and its
	// in-memory pack indexes, which go-git builds on its first read of a
	// freshly opened repository. The walk is the same, in the same order.
	// The caller closes the Packs after the Walker's last use.
	Packs *Packs
}

// Stats are the counts of one Walk.
type Stats struct {
	// Ranges is the number of ranges walked; EmptyRanges those that had no
	// commit left to diff (the tip is a stop, or everything was diffed by an
	// earlier range). MissingStops counts stops not in the repository (or
	// not commits), which were ignored.
	Ranges, EmptyRanges, MissingStops int
	// Commits is the number of commits diffed; SharedCommits the commits
	// reached again by a later range and not diffed twice; CommitsRead the
	// commit objects read (the boundary of excluded history included).
	Commits, SharedCommits, CommitsRead int
	// Trees is the number of trees visited (compared or listed);
	// TreeCacheHits how many of them came from the parsed-tree cache.
	Trees, TreeCacheHits int
	// Blobs is the number of blobs reported to fn and BlobBytes their total
	// size; SkippedSeen those Options.Seen skipped; Duplicates the times a
	// blob already met in this Walk was introduced again (at another path or
	// by another commit) and not reported or asked about again.
	Blobs       int
	BlobBytes   int64
	SkippedSeen int
	Duplicates  int
	// What the walk could not read and went on without (each is a reason
	// the caller's scan is not complete): MissingTips are tips not in the
	// repository (their ranges were skipped); MissingCommits are parents
	// missing below a commit that is no shallow boundary (the shallow file
	// lists those: their missing parents are expected, not counted);
	// MissingTrees are trees not in the repository (a partial clone with a
	// tree filter), whose blobs were not reported; MissingBlobs and
	// CorruptBlobs are blobs not in the repository (a partial clone) or
	// whose data is damaged (ErrCorrupt), not reported either. A damaged
	// commit or tree is an error: the walk cannot know what lies behind it.
	MissingTips, MissingCommits, MissingTrees, MissingBlobs, CorruptBlobs int
	// RefusedBlobs and RefusedTrees were refused over a limit and passed to
	// Options.Missed (see there); not reported, nor walked.
	RefusedBlobs, RefusedTrees int
	// TreeTips and BlobTips count the ranges whose tip was a tree or a blob.
	TreeTips, BlobTips int
}

// ErrTipNotFound is wrapped by Walk's error when a range has no Tip.
var ErrTipNotFound = errors.New("gitread: tip not found")

// Walker walks one repository. Its Walks and ReadBlob calls take turns on
// the repository's storage (go-git's is not safe for concurrent use, nor is
// the Walker's PackReader), so they
// may be called from several goroutines: a scanner can read and scan the
// blobs one Walk reports in worker goroutines with Walker.ReadBlob while the
// walk goes on. Other users of the same *git.Repository (the package-level
// ReadBlob included) must not run at the same time as a Walk; open another
// repository for them.
type Walker struct {
	repo *git.Repository
	s    storer.EncodedObjectStorer
	pr   *PackReader // of Options.Packs; nil: go-git only
	opts Options
	mu   sync.Mutex // serializes storage (and pr) access
	// shallow are the boundary commits of a shallow clone: their parents
	// are missing by design.
	shallow map[plumbing.Hash]bool
}

// readRaw reads object h of type t into buf (grown as needed). An object
// of another type is not found, as with go-git.
func (w *Walker) readRaw(t plumbing.ObjectType, h plumbing.Hash, buf []byte) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pr != nil {
		typ, data, err := w.pr.ReadObject(h, buf)
		switch {
		case err == nil && typ == t:
			return data, nil
		case err == nil:
			return buf, fmt.Errorf("object %s is a %s, not a %s: %w", h, typ, t, plumbing.ErrObjectNotFound)
		case !errors.Is(err, plumbing.ErrObjectNotFound):
			return buf, err
		}
	}
	return readRaw(w.s, t, h, buf)
}

// readAny reads object h whatever its type, unless it is a blob (only its
// type is returned).
func (w *Walker) readAny(h plumbing.Hash, buf []byte) (plumbing.ObjectType, []byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pr != nil {
		typ, data, err := w.pr.readObject(h, readNotBlob, buf)
		switch {
		case err == nil && typ == plumbing.BlobObject:
			return typ, buf, nil
		case err == nil:
			return typ, data, nil
		case !errors.Is(err, plumbing.ErrObjectNotFound):
			return plumbing.InvalidObject, buf, err
		}
	}
	obj, err := w.s.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return plumbing.InvalidObject, buf, DataError(err)
	}
	if obj.Type() == plumbing.BlobObject {
		return obj.Type(), buf, nil
	}
	buf, err = readObject(obj, buf)
	return obj.Type(), buf, err
}

// objectSize returns the size of object h, whatever its type (as go-git's
// EncodedObjectSize).
func (w *Walker) objectSize(h plumbing.Hash) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pr != nil {
		_, size, err := w.pr.objectSize(h, false)
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return size, err
		}
	}
	size, err := w.s.EncodedObjectSize(h)
	return size, DataError(err)
}

// New returns a Walker of repo (and of opts.Packs, its packs, if set).
func New(repo *git.Repository, opts Options) *Walker {
	if opts.TreeCacheBytes == 0 {
		opts.TreeCacheBytes = 8 << 20
	}
	w := &Walker{repo: repo, s: repo.Storer, opts: opts}
	if hs, err := repo.Storer.Shallow(); err == nil && len(hs) > 0 {
		w.shallow = make(map[plumbing.Hash]bool, len(hs))
		for _, h := range hs {
			w.shallow[h] = true
		}
	}
	if opts.Packs != nil {
		w.pr = opts.Packs.newReader(walkBaseCacheBytes, walkBaseCacheSlots)
		w.pr.targetsOnly = true
	}
	return w
}

// Done ends the Walker's use of its pack reader (Options.Packs): the
// reader, with the trees it has cached (the latest versions of the trees
// walked, most of them those of the tips), goes to the next
// Packs.NewReader, which a reader of the tips' trees then finds warm.
// The Walker may still be used after, reading through go-git only.
func (w *Walker) Done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pr != nil {
		w.opts.Packs.adopt(w.pr)
		w.pr = nil
	}
}

// Per-range marks of the commit walk.
const (
	fQueued = 1 << iota // pushed on the queue
	fPopped             // taken off the queue
	fUnint              // reachable from a stop
	fDead               // object missing (shallow boundary): never queued
)

// cstate is a Walk's state of one commit.
type cstate struct {
	info      commitInfo
	missing   bool // not in the repository
	processed bool // diffed in this Walk
	closed    bool // processed, and so is everything below it
	pending   int32
	waiters   []*cstate // processed children waiting for this one to close
}

type queued struct {
	h    plumbing.Hash
	when int64
}

type walk struct {
	w     *Walker
	ctx   context.Context
	fn    func(Blob) error
	stats Stats

	commits map[plumbing.Hash]*cstate
	blobs   map[plumbing.Hash]struct{}
	trees   *treeCache
	tags    map[plumbing.Hash]plumbing.Hash // annotated tags peeled: their targets

	// per range
	marks       map[plumbing.Hash]uint8
	queue       []queued
	interesting int // queued, not popped, not uninteresting
	order       []plumbing.Hash
	stack       []plumbing.Hash

	// per commit
	ref    string
	commit plumbing.Hash
	path   []byte
	depth  int // of the trees being diffed below the root (MaxTreeDepth)
	ticks  int

	buf []byte
}

// Walk calls fn for every blob introduced by a commit in any of the ranges,
// once per blob hash per Walk, in the order described in the package
// documentation. It stops early when ctx is cancelled (returning ctx.Err())
// or fn returns an error (returned as is). A range without a Tip is an
// error wrapping ErrTipNotFound; ranges before it have been walked.
//
// What is missing from the repository is skipped and counted in the Stats,
// and the walk goes on: a tip, a tree or a blob (a partial clone), a parent
// commit (its child is diffed as a root: a shallow clone's boundary, or
// counted as missing if the repository is not shallow there). A blob whose
// data is damaged is skipped and counted too. A damaged commit, tree or tag
// is an error wrapping ErrCorrupt. The Stats count what was done, also on
// error.
func (w *Walker) Walk(ctx context.Context, ranges []Range, fn func(Blob) error) (Stats, error) {
	wk := &walk{
		w:       w,
		ctx:     ctx,
		fn:      fn,
		commits: make(map[plumbing.Hash]*cstate),
		blobs:   make(map[plumbing.Hash]struct{}),
		trees:   newTreeCache(w.opts.TreeCacheBytes),
		tags:    make(map[plumbing.Hash]plumbing.Hash),
		marks:   make(map[plumbing.Hash]uint8),
	}
	for _, r := range ranges {
		if err := ctx.Err(); err != nil {
			return wk.stats, err
		}
		if err := wk.walkRange(r); err != nil {
			return wk.stats, err
		}
	}
	return wk.stats, nil
}

func (wk *walk) walkRange(r Range) error {
	wk.stats.Ranges++
	if r.Tip.IsZero() {
		return fmt.Errorf("%w: ref %q has no tip", ErrTipNotFound, r.Ref)
	}
	tip, typ, err := wk.peel(r.Tip)
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		wk.stats.MissingTips++
		wk.stats.EmptyRanges++
		return nil
	case err != nil:
		return fmt.Errorf("ref %q tip %s: %w", r.Ref, r.Tip, err)
	case typ == plumbing.TreeObject:
		wk.stats.TreeTips++
		wk.ref, wk.commit, wk.path = r.Ref, plumbing.ZeroHash, wk.path[:0]
		return wk.diffTree(plumbing.ZeroHash, tip)
	case typ == plumbing.BlobObject:
		wk.stats.BlobTips++
		wk.ref, wk.commit, wk.path = r.Ref, plumbing.ZeroHash, wk.path[:0]
		return wk.report(tip, []byte(r.Ref), modeRegular|0o644)
	case typ != plumbing.CommitObject:
		return fmt.Errorf("%w: ref %q tip %s names a %s", ErrCorrupt, r.Ref, r.Tip, typ)
	}
	commits, err := wk.collect(r, tip)
	if err != nil {
		return err
	}
	if len(commits) == 0 {
		wk.stats.EmptyRanges++
		return nil
	}
	wk.ref = r.Ref
	for i := len(commits) - 1; i >= 0; i-- { // oldest first
		if err := wk.ctx.Err(); err != nil {
			return err
		}
		if err := wk.diffCommit(commits[i]); err != nil {
			return err
		}
	}
	return nil
}

// load returns the state of commit h, reading the commit if needed. A
// missing commit has st.missing set and no error.
func (wk *walk) load(h plumbing.Hash) (*cstate, error) {
	if st := wk.commits[h]; st != nil {
		return st, nil
	}
	var err error
	wk.buf, err = wk.w.readRaw(plumbing.CommitObject, h, wk.buf)
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		st := &cstate{missing: true}
		wk.commits[h] = st
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("commit %s: %w", h, err)
	}
	return wk.store(h, wk.buf)
}

// store parses raw commit h into a new state.
func (wk *walk) store(h plumbing.Hash, raw []byte) (*cstate, error) {
	st := &cstate{}
	wk.stats.CommitsRead++
	if err := parseCommit(raw, &st.info); err != nil {
		return nil, fmt.Errorf("commit %s: %w", h, err)
	}
	if len(st.info.parents) == 0 {
		st.info.parents = nil
	}
	wk.commits[h] = st
	return st, nil
}

// MaxTagChain bounds a chain of annotated tags (tags of tags). Git sets no
// bound, and a chain cannot loop (each tag names its target by hash), so
// this only guards against absurd repositories.
const MaxTagChain = 10_000

// peel follows annotated tags from h to the object they end at, and returns
// it with its type; a commit is loaded. A tag is read once per Walk (every
// range peels the same stops).
func (wk *walk) peel(h plumbing.Hash) (plumbing.Hash, plumbing.ObjectType, error) {
	for range MaxTagChain {
		if st := wk.commits[h]; st != nil && !st.missing {
			return h, plumbing.CommitObject, nil
		}
		if target, ok := wk.tags[h]; ok {
			h = target
			continue
		}
		var typ plumbing.ObjectType
		var err error
		typ, wk.buf, err = wk.w.readAny(h, wk.buf)
		if err != nil {
			return h, typ, err
		}
		switch typ {
		case plumbing.CommitObject:
			_, err := wk.store(h, wk.buf)
			return h, typ, err
		case plumbing.TagObject:
			target, ok := tagTarget(wk.buf)
			if !ok {
				return h, typ, fmt.Errorf("%w: tag %s: malformed", ErrCorrupt, h)
			}
			wk.tags[h] = target
			h = target
		default:
			return h, typ, nil
		}
	}
	return h, plumbing.InvalidObject, fmt.Errorf("%w: tag %s: a chain of more than %d tags", ErrCorrupt, h, MaxTagChain)
}

func tagTarget(raw []byte) (plumbing.Hash, bool) {
	const prefix = "object "
	if len(raw) < len(prefix)+40 || string(raw[:len(prefix)]) != prefix {
		return plumbing.ZeroHash, false
	}
	return parseHex(raw[len(prefix) : len(prefix)+40])
}

// smallMarks is the size of a range's marks that the next range clears
// rather than replaces.
const smallMarks = 256

// collect returns the commits of r not yet diffed in this Walk, newest first.
//
// It is Git's revision walk: a queue ordered by committer date (newest
// first), the stops' ancestry marked uninteresting as it is reached, ending
// when only uninteresting commits are queued (and a few more, to absorb
// clock skew). With skewed dates a commit may be taken for interesting too
// early; the walk then diffs more than needed, never less, and the caller's
// seen-set absorbs the difference. Commits already diffed by an earlier
// range are walked through but not returned, and the walk stops at closed
// commits (everything below already diffed).
func (wk *walk) collect(r Range, tip plumbing.Hash) ([]plumbing.Hash, error) {
	// Clearing a map costs its capacity, not its entries: after a range
	// that marked a long history, every later range (a repository of
	// many refs) would pay for it again.
	if len(wk.marks) > smallMarks {
		wk.marks = make(map[plumbing.Hash]uint8)
	} else {
		clear(wk.marks)
	}
	wk.queue = wk.queue[:0]
	wk.order = wk.order[:0]
	wk.interesting = 0

	for _, s := range r.Stops {
		c, typ, err := wk.peel(s)
		if errors.Is(err, plumbing.ErrObjectNotFound) || err == nil && typ != plumbing.CommitObject {
			wk.stats.MissingStops++
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ref %q stop %s: %w", r.Ref, s, err)
		}
		if err := wk.push(c, true); err != nil {
			return nil, err
		}
	}
	if err := wk.push(tip, false); err != nil {
		return nil, err
	}
	if st := wk.commits[tip]; st != nil && st.missing {
		return nil, fmt.Errorf("%w: ref %q tip %s", ErrTipNotFound, r.Ref, r.Tip)
	}

	slop := 5
	for len(wk.queue) > 0 {
		if wk.interesting == 0 {
			if slop == 0 || len(wk.order) == 0 {
				break // the tip is a stop's ancestor: nothing to walk
			}
			slop--
		}
		if wk.ticks++; wk.ticks&63 == 0 {
			if err := wk.ctx.Err(); err != nil {
				return nil, err
			}
		}
		h := wk.pop()
		m := wk.marks[h]
		wk.marks[h] = m | fPopped
		if m&fUnint == 0 {
			wk.interesting--
		}
		st := wk.commits[h]
		if m&fUnint == 0 {
			wk.order = append(wk.order, h)
		}
		if st.closed {
			continue
		}
		for _, p := range st.info.parents {
			if err := wk.push(p, m&fUnint != 0); err != nil {
				return nil, err
			}
		}
	}

	// Keep what is still interesting (a late stop may have reached a commit
	// already taken) and not diffed yet.
	out := wk.order[:0]
	for _, h := range wk.order {
		if wk.marks[h]&fUnint != 0 {
			continue
		}
		if wk.commits[h].processed {
			wk.stats.SharedCommits++
			continue
		}
		out = append(out, h)
	}
	return out, nil
}

// push queues commit h (once per range), marking it uninteresting if unint.
func (wk *walk) push(h plumbing.Hash, unint bool) error {
	m, ok := wk.marks[h]
	if !ok {
		st, err := wk.load(h)
		if err != nil {
			return err
		}
		if st.missing {
			wk.marks[h] = fDead
			return nil
		}
	}
	if m&fDead != 0 {
		return nil
	}
	if unint && m&fUnint == 0 {
		wk.markUninteresting(h)
		m = wk.marks[h]
	}
	if m&fQueued == 0 {
		wk.marks[h] = m | fQueued
		wk.heapPush(queued{h: h, when: wk.commits[h].info.when})
		if m&fUnint == 0 {
			wk.interesting++
		}
	}
	return nil
}

// markUninteresting marks h and, if it was already walked, its walked
// ancestry as reachable from a stop.
func (wk *walk) markUninteresting(h plumbing.Hash) {
	wk.stack = append(wk.stack[:0], h)
	for len(wk.stack) > 0 {
		x := wk.stack[len(wk.stack)-1]
		wk.stack = wk.stack[:len(wk.stack)-1]
		m := wk.marks[x]
		if m&(fUnint|fDead) != 0 {
			continue
		}
		wk.marks[x] = m | fUnint
		if m&fQueued != 0 && m&fPopped == 0 {
			wk.interesting--
		}
		if m&fPopped != 0 {
			if st := wk.commits[x]; !st.closed {
				for _, p := range st.info.parents {
					if _, ok := wk.marks[p]; ok {
						wk.stack = append(wk.stack, p)
					}
				}
			}
		}
	}
}

// The queue is a binary heap: newest committer date first, then lowest hash.
func (wk *walk) less(i, j int) bool {
	a, b := &wk.queue[i], &wk.queue[j]
	if a.when != b.when {
		return a.when > b.when
	}
	return string(a.h[:]) < string(b.h[:])
}

func (wk *walk) heapPush(q queued) {
	wk.queue = append(wk.queue, q)
	for i := len(wk.queue) - 1; i > 0; {
		p := (i - 1) / 2
		if !wk.less(i, p) {
			break
		}
		wk.queue[i], wk.queue[p] = wk.queue[p], wk.queue[i]
		i = p
	}
}

func (wk *walk) pop() plumbing.Hash {
	q := wk.queue
	top := q[0].h
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && wk.less(r, l) {
			c = r
		}
		if !wk.less(c, i) {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	wk.queue = q
	return top
}

// diffCommit reports the blobs commit h introduces and marks it processed.
func (wk *walk) diffCommit(h plumbing.Hash) error {
	st := wk.commits[h]
	var parentTree plumbing.Hash
	if len(st.info.parents) > 0 {
		ps, err := wk.load(st.info.parents[0])
		if err != nil {
			return err
		}
		switch {
		case !ps.missing:
			parentTree = ps.info.tree
		case !wk.w.shallow[h]:
			// Not a shallow boundary: the parent should be here.
			wk.stats.MissingCommits++
		}
		// A missing parent makes the commit a root.
	}
	wk.commit = h
	wk.path = wk.path[:0]
	if err := wk.diffTree(parentTree, st.info.tree); err != nil {
		return err
	}
	wk.stats.Commits++
	if wk.w.opts.Diffed != nil {
		wk.w.opts.Diffed()
	}
	wk.processed(st)
	return nil
}

// processed marks st diffed and closes it (and, in turn, its waiting
// descendants) once all its parents are closed.
func (wk *walk) processed(st *cstate) {
	st.processed = true
	var pending int32
	for _, p := range st.info.parents {
		ps := wk.commits[p]
		if ps == nil || ps.missing || ps.closed {
			continue
		}
		pending++
		ps.waiters = append(ps.waiters, st)
	}
	st.pending = pending
	if pending > 0 {
		return
	}
	todo := []*cstate{st}
	for len(todo) > 0 {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		c.closed = true
		for _, w := range c.waiters {
			if w.pending--; w.pending == 0 {
				todo = append(todo, w)
			}
		}
		c.waiters = nil
	}
}

func (wk *walk) tree(h plumbing.Hash) (*tree, error) {
	wk.stats.Trees++
	if wk.ticks++; wk.ticks&255 == 0 {
		if err := wk.ctx.Err(); err != nil {
			return nil, err
		}
	}
	if t := wk.trees.get(h); t != nil {
		wk.stats.TreeCacheHits++
		return t, nil
	}
	raw, err := wk.w.readRaw(plumbing.TreeObject, h, nil)
	if err != nil {
		return nil, fmt.Errorf("tree %s in commit %s: %w", h, wk.commit, err)
	}
	t, err := parseTree(raw)
	if err != nil {
		return nil, fmt.Errorf("tree %s in commit %s: %w", h, wk.commit, err)
	}
	wk.trees.put(h, t)
	return t, nil
}

// diffTree reports the blobs of tree newH not in tree oldH (zero: none) at
// the same path, recursing into changed subtrees only. wk.path holds the
// directory prefix of both trees ("" or "dir/sub/").
func (wk *walk) diffTree(oldH, newH plumbing.Hash) error {
	if oldH == newH {
		return nil
	}
	// The old tree first: the new one is most often a delta on it, which
	// the reader then has in its cache.
	var ot *tree
	var err error
	if !oldH.IsZero() {
		// A missing old tree (counted when its commit was diffed, or
		// beyond the range) is taken as empty: more is reported, not less.
		if ot, err = wk.tree(oldH); err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) {
			return err
		}
	}
	nt, err := wk.tree(newH)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		wk.stats.MissingTrees++
		return nil
	}
	if err != nil {
		return err
	}
	base := len(wk.path)
	i := 0 // next entry of ot
	for j := range nt.entries {
		e := &nt.entries[j]
		typ := e.mode & modeTypeMask
		if typ == modeGitlink {
			continue
		}
		name := nt.name(e)
		isDir := typ == modeDir
		var oe *treeEntry
		for ot != nil && i < len(ot.entries) {
			o := &ot.entries[i]
			c := compareEntries(ot.name(o), o.mode&modeTypeMask == modeDir, name, isDir)
			if c < 0 {
				i++
				continue
			}
			if c == 0 {
				oe = o
				i++
			}
			break
		}
		h := nt.hash(e)
		if isDir {
			var oh plumbing.Hash
			if oe != nil {
				oh = ot.hash(oe)
			}
			if oh == h {
				continue
			}
			if wk.depth == MaxTreeDepth {
				// Refused, not walked: the walk recurses once per level.
				limit := &LimitError{What: "tree depth", Detail: fmt.Sprintf("tree %s in commit %s nests more than %d trees deep", newH, wk.commit, MaxTreeDepth)}
				if wk.w.opts.Missed == nil {
					return limit
				}
				if _, dup := wk.blobs[h]; dup { // refused once per Walk, as blobs are reported
					continue
				}
				wk.blobs[h] = struct{}{}
				wk.stats.RefusedTrees++
				if err := wk.missed(h, wk.pathOf(name)+"/", uint32(filemode.Dir), limit); err != nil {
					return err
				}
				continue
			}
			wk.path = append(append(wk.path[:base], name...), '/')
			wk.depth++
			err := wk.diffTree(oh, h)
			wk.depth--
			wk.path = wk.path[:base]
			if err != nil {
				return err
			}
			continue
		}
		if typ != modeRegular && typ != modeSymlink {
			continue // not a file mode Git writes
		}
		if oe != nil && ot.hash(oe) == h {
			continue
		}
		if err := wk.report(h, name, e.mode); err != nil {
			return err
		}
	}
	return nil
}

// missed tells Options.Missed of a blob the walk could not read.
func (wk *walk) missed(h plumbing.Hash, path string, mode uint32, err error) error {
	if wk.w.opts.Missed == nil {
		return nil
	}
	return wk.w.opts.Missed(Blob{Hash: h, Path: path, Commit: wk.commit, Ref: wk.ref, Mode: filemode.FileMode(mode)}, err)
}

// pathOf is the path of entry name of the tree being diffed.
func (wk *walk) pathOf(name []byte) string {
	base := len(wk.path)
	wk.path = append(wk.path, name...)
	path := string(wk.path)
	wk.path = wk.path[:base]
	return path
}

func (wk *walk) report(h plumbing.Hash, name []byte, mode uint32) error {
	if _, dup := wk.blobs[h]; dup {
		wk.stats.Duplicates++
		if again := wk.w.opts.Again; again != nil {
			return again(Blob{Hash: h, Path: wk.pathOf(name), Commit: wk.commit, Ref: wk.ref, Mode: filemode.FileMode(mode)})
		}
		return nil
	}
	wk.blobs[h] = struct{}{}
	if seen := wk.w.opts.Seen; seen != nil && seen(h) {
		wk.stats.SkippedSeen++
		return nil
	}
	path := wk.pathOf(name)
	size, err := wk.w.objectSize(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) && wk.w.opts.Packs != nil {
		// Not in the repository because its pack's indexer refused it
		// (over a limit when fetched): told as the refusal it is.
		if refused := wk.w.opts.Packs.Refused(h); refused != nil {
			err = refused
		}
	}
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		wk.stats.MissingBlobs++
		return wk.missed(h, path, mode, plumbing.ErrObjectNotFound)
	case errors.Is(err, ErrCorrupt):
		wk.stats.CorruptBlobs++
		return wk.missed(h, path, mode, ErrCorrupt)
	case errors.Is(err, ErrLimit) && wk.w.opts.Missed != nil:
		wk.stats.RefusedBlobs++
		return wk.missed(h, path, mode, fmt.Errorf("blob %s at %q in commit %s: %w", h, path, wk.commit, err))
	case err != nil:
		// Quoted: a path is one name to whoever redacts the message,
		// spaces and all.
		return fmt.Errorf("blob %s at %q in commit %s: %w", h, path, wk.commit, err)
	}
	wk.stats.Blobs++
	wk.stats.BlobBytes += size
	return wk.fn(Blob{
		Hash:   h,
		Path:   path,
		Commit: wk.commit,
		Ref:    wk.ref,
		Mode:   filemode.FileMode(mode),
		Size:   size,
	})
}
