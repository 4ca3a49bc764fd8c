package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"gitfleet/internal/domain/archive"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/liveness"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/store"
)

// repository is an opened repository to scan.
type repository struct {
	repo   *git.Repository
	closer io.Closer
	path   string
	// path of the mirror (or the local repository), for writing synthetic refs.
	mirror bool
	url    string
	// refsDigest names the mirror's refs as its sync saw them.
	refsDigest string
	// held: the mirror already held the refs this job's sync saw (this
	// attempt did not fetch).
	held bool
	// reading marks the mirror read while the scan reads it
	// (Mirrors.Reading): eviction and repacks leave it alone.
	reading io.Closer
}

func (r *repository) Close() error {
	err := r.closer.Close()
	if r.reading != nil {
		err = errors.Join(err, r.reading.Close())
	}
	return err
}

// reopen opens the repository afresh: go-git reads a repository's list of
// packs once, and a fetch by SHA adds a pack.
func (r *repository) reopen() error {
	if err := r.closer.Close(); err != nil {
		return err
	}
	repo, closer, err := gitread.Open(r.path, walkCacheBytes)
	if err != nil {
		return fmt.Errorf("reopen the mirror: %w", err)
	}
	r.repo, r.closer = repo, closer
	return nil
}

// open syncs a URL target's mirror (or checks a local target) and opens it.
// A mirror that holds the refs this job's sync saw (refsDigest) is opened
// as it is: one sync per job, wherever its activities run.
func (s *Shards) open(ctx context.Context, spec shard.Spec, refsDigest string, p *progress) (*repository, error) {
	if spec.Local {
		// The starter checked the path on its own machine: this one opens
		// only what lies under its local root (GITFLEET_LOCAL_ROOT).
		path, err := reach.LocalRepository(reach.LocalRoot(), spec.Location)
		if err != nil {
			return nil, err
		}
		repo, closer, err := gitread.Open(path, walkCacheBytes)
		if err != nil {
			return nil, errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound, fmt.Errorf("open the local repository: %w", err))
		}
		return &repository{repo: repo, closer: closer, path: path}, nil
	}
	remote := mirror.Remote{URL: spec.Location, RefsDigest: refsDigest}
	held := s.Mirrors.Holds(spec.Location, refsDigest)
	if !held {
		// Alive while the fetch moves (each beat a step), given up once the
		// remote goes silent.
		fetch, stop := liveness.Watch(ctx, within(ctx, s.Liveness), p.step)
		var err error
		remote, err = s.Mirrors.Sync(fetch, spec.Location)
		stop()
		if err != nil {
			return nil, stalled(fetch, err)
		}
	}
	reading, err := s.Mirrors.Reading(ctx, remote.URL)
	if err != nil {
		return nil, err
	}
	repo, closer, err := gitread.Open(s.Mirrors.Path(remote.URL), walkCacheBytes)
	if err != nil {
		reading.Close()
		if remote.Empty {
			return nil, errclass.Permanentf(errclass.ReasonEmptyRepository, "the repository is empty")
		}
		// The sync (or Holds) just opened it: it vanished under us (a
		// Discard by another attempt) and the next attempt syncs it anew.
		return nil, errclass.Wrap(errclass.Retryable, errclass.ReasonRace, fmt.Errorf("open the mirror: %w", err))
	}
	return &repository{repo: repo, closer: closer, path: s.Mirrors.Path(remote.URL), mirror: true, url: remote.URL,
		refsDigest: remote.RefsDigest, held: held, reading: reading}, nil
}

// ScanShard is Executing and InnerDurable: it walks (watermark, tip] of
// every selected ref, scans each blob the scope has not seen, tries the
// scope's holes again, writes the data ops in fenced batches as it goes (a
// crash loses at most two, and replaying a batch changes nothing), and
// finalizes: the watermarks of the refs it walked to their tips, what it
// could not read recorded as holes. It returns the receipt.
//
// A retried attempt, and a scan placed again on another worker
// (w.TakeOver), take over the lease with a new fence first, so the attempt
// they replace — if still running somewhere — can no longer write; they
// carry what it made durable into their receipt.
func (s *Shards) ScanShard(ctx context.Context, w workflows.ShardWork) (shard.Receipt, error) {
	lease := w.Lease
	var carried store.Tally // what the attempts this one retries made durable
	if !w.TakeOver && (!activity.IsActivity(ctx) || activity.GetInfo(ctx).Attempt == 1) {
		// The attempt may have waited in the queue past the lease.
		if err := s.renew(ctx, lease); err != nil {
			return shard.Receipt{}, AppError(err)
		}
		// The claim reset the tally already (AcquireShard); so does this,
		// for claims of workers from before.
		if err := s.Store.ResetRunTally(ctx, lease); err != nil {
			return shard.Receipt{}, AppError(err)
		}
	} else {
		c, err := s.Store.AcquireShard(ctx, lease.ShardID, lease.Owner, s.leaseFor(), false)
		if err != nil {
			return shard.Receipt{}, AppError(err)
		}
		if c.Status != shard.Active || c.Busy {
			return shard.Receipt{}, AppError(errclass.StaleOwnerf("shard %d is %s (busy=%t)", lease.ShardID, c.Status, c.Busy))
		}
		lease = c.Lease
		// Under the new fence, the attempts replaced add nothing more.
		if carried, err = s.Store.RunTally(ctx, lease.ShardID); err != nil {
			return shard.Receipt{}, AppError(err)
		}
	}
	log := s.logger(ctx, lease.ShardID, lease.Fence)
	r, err := s.scan(ctx, lease, w, carried, log)
	if err != nil {
		c := errclass.Classify(err)
		log.Warn("scan stopped", zap.String("class", string(c.Class)), zap.String("reason", c.Reason))
		return shard.Receipt{}, s.redactedError(boundUnreachable(ctx, s.UnreachableWaits, err))
	}
	log.Info("scan finalized", zap.Int64("receipt", r.ID), zap.Bool("complete", r.Complete), zap.Int64("commits", r.Commits),
		zap.Int64("blobs", r.BlobsScanned), zap.Int64("bytes", r.BytesScanned), zap.Int64("skipped", r.BlobsSkipped),
		zap.Int64("findings", r.Findings), zap.Any("archiveSkips", r.ArchiveSkips))
	return r, nil
}

// scan is one attempt of ScanShard; carried is what the attempts it
// retries made durable, which its receipt counts too: the scan's totals.
func (s *Shards) scan(ctx context.Context, lease shard.Lease, w workflows.ShardWork, carried store.Tally, log *zap.Logger) (_ shard.Receipt, err error) {
	began := time.Now()
	var run *scanRun
	// The keeper renews the lease and heartbeats; losing the lease cancels
	// the scan at once.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var progress progress
	stopKeeper := s.keepLease(ctx, lease, &progress, cancel)
	defer stopKeeper()

	repo, err := s.open(ctx, w.Spec, w.RefsDigest, &progress)
	if err != nil {
		return shard.Receipt{}, err
	}
	defer repo.Close() //nolint:errcheck // read only: nothing to lose
	// A mirror found damaged that this attempt did not fetch is discarded,
	// and the next attempt fetches it afresh; damage in one it fetched is
	// the remote's, and a local repository's is its own: Permanent. A
	// mirror left with holes a later run may read is discarded too: the
	// next run fetches it whole, and tries them on a fresh copy.
	defer func() {
		switch c := errclass.Classify(err); {
		case c != nil && c.Class == errclass.Permanent && c.Reason == errclass.ReasonCorrupt && repo.mirror && repo.held:
			if derr := s.Mirrors.Discard(ctx, repo.url); derr == nil {
				err = errclass.Wrap(errclass.Retryable, "damaged mirror discarded", err)
			}
		case err == nil && repo.mirror && run != nil && run.openHoles:
			if derr := s.Mirrors.Discard(ctx, repo.url); derr != nil {
				log.Warn("mirror with holes not discarded", zap.Error(s.redactedError(derr)))
			}
		}
	}()

	loaded := progress.wait(dbWait)
	defer loaded()
	scopeID, err := s.Store.KeyedScope(ctx, lease.ShardID, s.Scanner.Policy(), s.Scanner.KeyVersion())
	if err != nil {
		return shard.Receipt{}, err
	}
	marks, err := s.Store.Watermarks(ctx, scopeID)
	if err != nil {
		return shard.Receipt{}, err
	}
	holes, err := s.Store.Holes(ctx, scopeID)
	if err != nil {
		return shard.Receipt{}, err
	}
	fetched := progress.wait(syncWait) // an explicit commit the mirror lacks is fetched
	tips, ignored, err := s.selectRefs(ctx, repo, w.Spec.Selection)
	fetched()
	if err != nil {
		return shard.Receipt{}, err
	}
	ranges := rangesFor(tips, marks)
	var refsIgnored int64
	for reason, n := range ignored {
		refsIgnored += int64(n)
		log.Warn("refs ignored", zap.String("reason", reason), zap.Int("refs", n))
	}
	// mirrorSynced: the mirror lacked the refs its job's sync saw (or the
	// job synced none), so this scan fetched it itself — on a worker other
	// than the one that synced, a second copy (architecture §2, "Repository
	// affinity").
	log.Info("scan starting", zap.Int("refs", len(tips)), zap.Int("watermarks", len(marks)), zap.Int("holes", len(holes)),
		zap.Bool("mirrorSynced", repo.mirror && !repo.held))

	// The walk reads commits and trees, and the scan goroutines blobs,
	// straight from the packs, each with a reader of its own (the scan
	// goroutines in parallel, into a buffer each reuses); only what the
	// packs lack goes through go-git, which then loads its own indexes.
	// (Closed after the walk and the scan, before the repository.)
	packs, err := gitread.OpenPacks(repo.path)
	if err != nil {
		return shard.Receipt{}, fmt.Errorf("open the packs: %w", err)
	}
	defer packs.Close() //nolint:errcheck // read only: nothing to lose
	// A single large object (a blob of GiB under a raised
	// GITFLEET_MAX_OBJECT_BYTES, a chain of large deltas) can take minutes
	// to read: the readers' signs of life as they resolve it are steps,
	// which keep the heartbeats going (issue 31: 3 attempts lost to the
	// heartbeat timeout before one read it).
	packs.OnProgress(progress.step)
	basis, err := s.Store.PresenceBasis(ctx, scopeID)
	if err != nil {
		return shard.Receipt{}, err
	}
	anySeen, err := s.Store.AnySeen(ctx, scopeID)
	if err != nil {
		return shard.Receipt{}, err
	}
	loaded()
	readers := make([]*gitread.PackReader, s.parallelism())
	for i := range readers {
		readers[i] = packs.NewReader()
	}
	run = &scanRun{ctx: ctx, s: s, lease: lease, scopeID: scopeID, packs: packs,
		readers: readers, buffers: make([][]byte, len(readers)), progress: &progress, wanted: wantedBlobs(basis), fresh: !anySeen,
		holes: holesOf(holes), met: map[plumbing.Hash]bool{}, newHoles: map[plumbing.Hash]bool{}, rangeOf: map[string]int{},
		sourceOnly: !repo.mirror}
	for i, rg := range ranges {
		run.rangeOf[rg.Ref] = i
	}
	walker := gitread.New(repo.repo, gitread.Options{Packs: packs, TreeCacheBytes: treeCacheBytes, Again: run.addAgain, Missed: run.missed,
		Diffed: progress.diffed})
	run.walker = walker
	run.deadline = time.Now().Add(s.budget(w))
	// The batch in flight is done before the packs close, whatever happens.
	defer func() { _ = run.finish() }()
	s.Stages.since(stageSetup, began)
	walking := time.Now()
	stats, walkErr := run.walker.Walk(ctx, ranges, run.add)
	s.Stages.add(stageWalk, time.Since(walking)-run.waited)
	if lost := leaseLost(ctx); lost != nil {
		return shard.Receipt{}, lost
	}
	if walkErr != nil && !errors.Is(walkErr, errBudget) {
		if ctx.Err() != nil {
			return shard.Receipt{}, ctx.Err()
		}
		return shard.Receipt{}, walkErr
	}
	run.counts.Refused += int64(stats.RefusedBlobs + stats.RefusedTrees)
	// The holes the walk did not meet again are tried once more, as if met.
	holesCut := false
	if walkErr == nil {
		if holesCut, err = run.retryHoles(holes); err != nil {
			return shard.Receipt{}, err
		}
	}
	if err := run.flush(ctx); err != nil {
		return shard.Receipt{}, err
	}
	finalizing := time.Now()
	defer s.Stages.since(stageFinalize, finalizing)
	// Objects refused over a limit are read around, as holes (lost), and
	// the rest is scanned: one crafted object hides nothing else. Only a
	// scope of which nothing could be read at all is refused with the
	// first refusal's reason (Permanent: the workflow parks the shard).
	if run.refusal != nil && !anySeen && run.seenRows.Load() == 0 {
		return shard.Receipt{}, run.refusal
	}
	// The walk's reader has the tips' trees cached: presence reads them.
	walker.Done()
	// What the walk could not read it skipped and counted: the run is
	// Partial, and the next one tries again.
	run.counts.Missing += int64(stats.MissingTips + stats.MissingCommits + stats.MissingTrees + stats.MissingBlobs)
	run.counts.Corrupt += int64(stats.CorruptBlobs)
	run.skipped += int64(stats.MissingBlobs + stats.CorruptBlobs)
	run.counts.OutOfTime = walkErr != nil || holesCut
	run.counts.RefsIgnored = refsIgnored
	// The watermarks of the refs walked to their tips move there, unless
	// the walk met missing commits or trees: what lies below them is
	// unknown, and so is which refs reach them. Blobs it could not read
	// are holes, tried again by every later run without walking again.
	tainted := stats.MissingTips+stats.MissingCommits+stats.MissingTrees > 0
	walked := len(ranges)
	if walkErr != nil {
		walked = run.reached // the ranges before the one time ran out in
	}
	// Only the watermarks that move are written: a repository of many
	// refs of which few moved costs what those few cost.
	watermarks := map[string]string{}
	for _, rg := range ranges[:walked] {
		if tip := rg.Tip.String(); !tainted && marks[rg.Ref] != tip {
			watermarks[rg.Ref] = tip
		}
	}
	covered := walkErr == nil && !tainted
	// What the attempts this one retries skipped is the scan's too: its
	// breakdown, and the partial run it makes.
	run.counts.AddBreakdown(carried.Skips)
	var was shard.Counts
	was.AddBreakdown(carried.Skips)
	run.partial = run.partial || (was.Oversized > 0 && s.Scanner.IsPartial(scan.SkipOversized)) ||
		(was.Binary > 0 && s.Scanner.IsPartial(scan.SkipBinary))
	for _, r := range archive.Reasons() {
		run.partial = run.partial || (was.ArchiveSkips.Of(r) > 0 && s.Scanner.ArchiveSkipIsPartial(r))
	}
	// Blobs earlier runs skipped as oversized are seen: no run reads them
	// again, and every run says they were never scanned.
	oversized, err := s.Store.OversizedBlobs(ctx, scopeID)
	if err != nil {
		return shard.Receipt{}, err
	}
	run.counts.EarlierOversized = max(oversized-run.counts.Oversized, 0)
	earlierPartial := run.counts.EarlierOversized > 0 && s.Scanner.IsPartial(scan.SkipOversized)
	complete := covered && !holesCut && !run.partial && !earlierPartial &&
		run.counts.Missing == 0 && run.counts.Corrupt == 0 && run.counts.Unreadable == 0 && run.counts.Refused == 0
	if !complete {
		log.Warn("scan partial", zap.Int64("missing", run.counts.Missing), zap.Int64("corrupt", run.counts.Corrupt),
			zap.Int64("refused", run.counts.Refused),
			zap.Int64("unreadable", run.counts.Unreadable), zap.Int64("oversized", run.counts.Oversized),
			zap.Bool("outOfTime", run.counts.OutOfTime), zap.Bool("covered", covered), zap.Int("refsWalked", walked), zap.Bool("tainted", tainted))
	}
	counts := run.counts
	counts.Commits, counts.BlobsScanned, counts.BytesScanned = int64(stats.Commits), run.scanned+carried.Scanned, run.bytes+carried.Bytes
	counts.BlobsSkipped, counts.Findings = run.skipped+carried.Skipped, run.findings+carried.Findings
	defer progress.wait(presenceWait)()
	return s.finalize(ctx, repo, packs, tips, store.FinalizeInput{
		Lease: lease, ScopeID: scopeID, Complete: complete, Covered: covered, Watermarks: watermarks,
		Stats: counts,
	})
}

// maxHoleAttempts is how many runs try a hole in a mirror, each on a copy
// fetched afresh (a run leaving holes discards the mirror), before it is
// taken as missing or damaged in the source itself: lost.
const maxHoleAttempts = 3

func holesOf(holes []store.Hole) map[plumbing.Hash]store.Hole {
	m := make(map[plumbing.Hash]store.Hole, len(holes))
	for _, h := range holes {
		var k plumbing.Hash
		if copy(k[:], h.Blob) == len(k) {
			m[k] = h
		}
	}
	return m
}

// retryHoles tries the holes the walk did not meet again, in blob order,
// as if the walk had met them where they were first met. It reports
// whether the time budget cut it short.
func (r *scanRun) retryHoles(holes []store.Hole) (cut bool, _ error) {
	for _, h := range holes {
		var k plumbing.Hash
		// A refused object is not tried again: the same data trips the
		// same bound (and a refused tree is no blob).
		if copy(k[:], h.Blob) != len(k) || r.met[k] || errclass.IsLimit(h.Reason) {
			continue
		}
		err := r.add(gitread.Blob{Hash: k, Path: h.Path, Commit: plumbing.NewHash(h.Commit)})
		switch {
		case errors.Is(err, errBudget):
			return true, nil
		case err != nil:
			return false, err
		}
	}
	return false, nil
}

var errBudget = errors.New("time budget spent")

// walkCacheBytes is go-git's object cache, for what the walk and the scan
// read through go-git: objects the packs opened for the scan lack, and the
// selection's explicit commits (gitread keeps its own tree cache, and its
// pack reader its own cache of delta bases).
const walkCacheBytes = 4 << 20

// treeCacheBytes bounds the walk's cache of parsed trees.
const treeCacheBytes = 2 << 20

// selectRefs resolves the selection to ref → tips: every branch and tag by
// default; named refs (symbolic ones resolved); explicit commits as
// synthetic refs. Refs are read as git reads them (gitread.ReadRefs): a
// broken ref is ignored and counted by reason, never fatal. A tip may name
// any object: the walk peels tags and scans trees and blobs too.
func (s *Shards) selectRefs(ctx context.Context, r *repository, sel target.Selection) (map[string]plumbing.Hash, map[string]int, error) {
	refs, err := gitread.ReadRefs(r.path)
	if err != nil {
		return nil, nil, err
	}
	tips := map[string]plumbing.Hash{}
	if sel.Empty() {
		for _, ref := range refs.Refs {
			if strings.HasPrefix(ref.Name, "refs/heads/") || strings.HasPrefix(ref.Name, "refs/tags/") {
				tips[ref.Name] = ref.Hash
			}
		}
		return tips, refs.Ignored, nil
	}
	for _, name := range sel.Refs {
		full, h, err := s.resolveRef(refs, name)
		if err != nil {
			return nil, nil, err
		}
		tips[full] = h
	}
	for _, c := range sel.Commits {
		h, err := s.commit(ctx, r, c)
		if err != nil {
			return nil, nil, err
		}
		tips[target.SyntheticRef(c)] = h
	}
	return tips, refs.Ignored, nil
}

func (s *Shards) resolveRef(refs *gitread.RefList, name string) (string, plumbing.Hash, error) {
	candidates := []string{name}
	if !strings.HasPrefix(name, "refs/") {
		candidates = []string{"refs/heads/" + name, "refs/tags/" + name}
	}
	for _, c := range candidates {
		if h, ok := refs.Resolve(c); ok {
			return c, h, nil
		}
	}
	return "", plumbing.ZeroHash, errclass.Permanentf(errclass.ReasonNotFound, "the selected ref does not exist (digest %s)", s.digest(name))
}

// commit checks that an explicit commit exists and is a commit, fetching it
// by SHA into a mirror that lacks it, and pins it there under its synthetic
// ref so later fetches never prune it.
func (s *Shards) commit(ctx context.Context, r *repository, hexID string) (plumbing.Hash, error) {
	if len(hexID) != 40 {
		return plumbing.ZeroHash, errclass.Permanentf(errclass.ReasonUnsupported, "only SHA-1 repositories are supported")
	}
	h := plumbing.NewHash(hexID)
	obj, err := r.repo.Storer.EncodedObject(plumbing.AnyObject, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) && r.mirror {
		found, fetchErr := s.Mirrors.FetchCommit(ctx, r.url, hexID, target.SyntheticRef(hexID))
		if fetchErr != nil {
			return plumbing.ZeroHash, fetchErr
		}
		if found {
			if err := r.reopen(); err != nil {
				return plumbing.ZeroHash, err
			}
			obj, err = r.repo.Storer.EncodedObject(plumbing.AnyObject, h)
		}
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return plumbing.ZeroHash, errclass.Permanentf(errclass.ReasonNotFound, "the selected commit does not exist in the repository")
	}
	if err != nil {
		return plumbing.ZeroHash, gitread.DataError(err)
	}
	if obj.Type() != plumbing.CommitObject {
		return plumbing.ZeroHash, errclass.Permanentf(errclass.ReasonInvalidInput, "the selected object is a %s, not a commit", obj.Type())
	}
	if r.mirror {
		if err := r.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(target.SyntheticRef(hexID)), h)); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if _, err := object.GetCommit(r.repo.Storer, h); err != nil {
		return plumbing.ZeroHash, errclass.Wrap(errclass.Permanent, "poisoned", err)
	}
	return h, nil
}

// rangesFor builds the walk: each ref from its tip down to any watermark.
// Every watermark stops every ref — what is reachable from one was scanned.
func rangesFor(tips map[string]plumbing.Hash, marks map[string]string) []gitread.Range {
	var stops []plumbing.Hash
	for _, c := range marks {
		if plumbing.IsHash(c) {
			stops = append(stops, plumbing.NewHash(c))
		}
	}
	slices.SortFunc(stops, func(a, b plumbing.Hash) int { return strings.Compare(a.String(), b.String()) })
	stops = slices.Compact(stops)
	refs := make([]string, 0, len(tips))
	for ref := range tips {
		refs = append(refs, ref)
	}
	slices.Sort(refs) // a deterministic walk: first-seen paths and commits do not depend on map order
	ranges := make([]gitread.Range, 0, len(refs))
	for _, ref := range refs {
		ranges = append(ranges, gitread.Range{Ref: ref, Tip: tips[ref], Stops: stops})
	}
	return ranges
}

// scanRun is one scan's pipeline: blobs from the walk are batched, checked
// against the seen set, read, scanned in parallel and written durably.
type scanRun struct {
	ctx      context.Context // the walk's callback carries none
	s        *Shards
	lease    shard.Lease
	scopeID  int64
	walker   *gitread.Walker
	packs    *gitread.Packs
	readers  []*gitread.PackReader // one per scan goroutine
	buffers  [][]byte              // and a read buffer each, reused blob after blob
	progress *progress
	deadline time.Time
	// worked: a batch had blobs the scope had not seen.
	worked atomic.Bool
	// waited is how long the walk waited for the batch in flight.
	waited time.Duration

	pending []gitread.Blob
	// pendingAgain are blobs the walk met again (gitread.Options.Again),
	// since the pending ones: their paths are recorded if they hold
	// findings, which the flush of their first meeting's batch (or an
	// earlier one) decides.
	pendingAgain []gitread.Blob
	// fresh: the scope had seen no blob when the run started, and the walk
	// reports a blob once, so none it reports is seen (but by a zombie
	// attempt, whose rows the run's would only repeat).
	fresh bool
	// wanted are the blobs holding findings: the scope's before the run,
	// and those the run's flushed batches found. Only flushBatch uses it.
	wanted map[plumbing.Hash]bool
	// inflight is the flush of the previous batch (its error), running
	// while the walk gathers the next; nil: none.
	inflight chan error
	// writing is the write of the data ops of the batch flushed before
	// (its error), running while the next one is scanned; nil: none.
	writing chan error

	scanned, bytes, skipped, findings int64
	partial                           bool
	// counts are the skips by reason (see shard.Counts).
	counts shard.Counts

	// holes are the scope's holes when the run started (read only); met
	// those the walk met again (the walk's goroutine only). pendingHoles
	// are the blobs the walk could not read since the last batch.
	holes        map[plumbing.Hash]store.Hole
	met          map[plumbing.Hash]bool
	pendingHoles []store.Hole
	// newHoles are the blobs this run left as holes (under holesMu: the
	// walk and the flushes add to it); openHoles: some of them a later run
	// may read.
	holesMu   sync.Mutex
	newHoles  map[plumbing.Hash]bool
	openHoles bool
	// refusal is the first object refused over a limit (under holesMu);
	// seenRows counts the blobs the run marked seen (read, or skipped by
	// the scanner): with none, and none before, nothing could be read.
	refusal  error
	seenRows atomic.Int64
	// sourceOnly: the repository is the source itself (a local one): what
	// it lacks or has damaged cannot be recovered.
	sourceOnly bool
	// rangeOf is each ref's place in the walk's order; reached the
	// furthest range the walk reported a blob of.
	rangeOf map[string]int
	reached int
}

// reach notes that the walk is in ref's range.
func (r *scanRun) reach(ref string) {
	if i, ok := r.rangeOf[ref]; ok && i > r.reached {
		r.reached = i
	}
}

// isHole says whether a blob was a hole when the run started or became one.
func (r *scanRun) isHole(h plumbing.Hash) bool {
	if _, ok := r.holes[h]; ok {
		return true
	}
	r.holesMu.Lock()
	defer r.holesMu.Unlock()
	return r.newHoles[h]
}

// hole records that blob b could not be read, for reason. It is lost when
// the repository is the source, or when it stayed unreadable in as many
// mirrors fetched afresh as maxHoleAttempts, or when refused (not nil: the
// object is over one of gitread's limits, reason the limit's).
func (r *scanRun) hole(b gitread.Blob, reason string, refused error) store.Hole {
	lost := r.sourceOnly || r.holes[b.Hash].Attempts+1 >= maxHoleAttempts || refused != nil
	r.holesMu.Lock()
	r.newHoles[b.Hash] = true
	r.openHoles = r.openHoles || !lost
	if r.refusal == nil {
		r.refusal = refused
	}
	r.holesMu.Unlock()
	return store.Hole{Blob: append([]byte(nil), b.Hash[:]...), Path: b.Path, Commit: b.Commit.String(), Reason: reason, Lost: lost}
}

// missed takes a blob the walk met and could not read, or an object it
// refused over a limit (a tree too deep included): a hole.
func (r *scanRun) missed(b gitread.Blob, err error) error {
	r.progress.step()
	r.reach(b.Ref)
	if _, ok := r.holes[b.Hash]; ok {
		r.met[b.Hash] = true
	}
	var h store.Hole
	switch reason, refused := limitReason(err); {
	case refused:
		h = r.hole(b, reason, err)
	case errors.Is(err, gitread.ErrCorrupt):
		h = r.hole(b, store.HoleCorrupt, nil)
	default:
		h = r.hole(b, store.HoleMissing, nil)
	}
	r.pendingHoles = append(r.pendingHoles, h)
	return nil
}

// limitReason is the reason of an error over one of gitread's limits
// ("over a limit: delta chain"), if it is one.
func limitReason(err error) (string, bool) {
	if !errors.Is(err, gitread.ErrLimit) {
		return "", false
	}
	return errclass.Classify(err).Reason, true
}

func (r *scanRun) batchSize() int {
	if r.s.BatchBlobs > 0 {
		return r.s.BatchBlobs
	}
	return DefaultBatchBlobs
}

// DefaultBatchBlobs is how many blobs a scan handles between durable
// writes. A batch is also the window in which reads are put in pack order
// (readOrder): the larger, the more versions of a file share the reading
// of their delta chain (on the real-code corpus 8,000 inflate 290 MB where
// 2,000 inflate 410 MB); a crash loses at most two batches.
const DefaultBatchBlobs = 8000

// readRun is how many neighbouring blobs a reader takes at a time.
const readRun = 64

// readOrder returns the indexes of blobs in the order their packs hold
// them; those no pack holds come last, in walk order.
func (r *scanRun) readOrder(blobs []gitread.Blob) []int {
	type at struct {
		pack int
		off  int64
		i    int
	}
	pos := make([]at, len(blobs))
	for i, b := range blobs {
		p, off, ok := r.packs.Position(b.Hash)
		if !ok {
			p, off = math.MaxInt, int64(i)
		}
		pos[i] = at{p, off, i}
	}
	slices.SortFunc(pos, func(x, y at) int {
		if x.pack != y.pack {
			return cmp.Compare(x.pack, y.pack)
		}
		return cmp.Compare(x.off, y.off)
	})
	order := make([]int, len(pos))
	for k, p := range pos {
		order[k] = p.i
	}
	return order
}

// add takes a blob from the walk. A full batch is flushed on another
// goroutine while the walk goes on to gather the next one: the walk, the
// scan of the previous batch and the write of the one before overlap, and
// at most one batch is scanned and one written at a time (batches are
// written in order).
func (r *scanRun) add(b gitread.Blob) error {
	r.progress.step()
	r.reach(b.Ref)
	if _, ok := r.holes[b.Hash]; ok {
		r.met[b.Hash] = true
	}
	r.pending = append(r.pending, b)
	return r.maybeFlush()
}

// addAgain takes a blob the walk met again.
func (r *scanRun) addAgain(b gitread.Blob) error {
	r.progress.step()
	r.reach(b.Ref)
	r.pendingAgain = append(r.pendingAgain, b)
	return r.maybeFlush()
}

func (r *scanRun) maybeFlush() error {
	if len(r.pending)+len(r.pendingAgain) < r.batchSize() {
		return nil
	}
	waiting := time.Now()
	err := r.wait()
	r.waited += time.Since(waiting)
	if err != nil {
		return err
	}
	batch, again, holes := r.pending, r.pendingAgain, r.pendingHoles
	r.pending, r.pendingAgain, r.pendingHoles = nil, nil, nil
	done := make(chan error, 1)
	r.inflight = done
	go func() { done <- r.flushBatch(r.ctx, batch, again, holes) }()
	// The budget ends the run only once it has read something new: a run
	// that continues another walks the history that one walked again (it
	// finds its blobs seen) and must get further than it did.
	if !r.deadline.IsZero() && time.Now().After(r.deadline) && r.worked.Load() {
		return errBudget
	}
	return nil
}

// wait waits for the batch in flight, if any, and returns its error.
func (r *scanRun) wait() error {
	return waitFor(&r.inflight)
}

// finish waits for the batch in flight and the write in flight.
func (r *scanRun) finish() error {
	return errors.Join(r.wait(), waitFor(&r.writing))
}

// waitFor waits for *c, if any, and returns its error.
func waitFor(c *chan error) error {
	if *c == nil {
		return nil
	}
	err := <-*c
	*c = nil
	return err
}

// flush waits for the batch in flight, then flushes the pending one and
// waits for its write.
func (r *scanRun) flush(ctx context.Context) error {
	if err := r.wait(); err != nil {
		return err
	}
	batch, again, holes := r.pending, r.pendingAgain, r.pendingHoles
	r.pending, r.pendingAgain, r.pendingHoles = nil, nil, nil
	if err := r.flushBatch(ctx, batch, again, holes); err != nil {
		return err
	}
	return waitFor(&r.writing)
}

type scanned struct {
	seen     store.SeenBlob
	findings []store.Finding
	bytes    int64
	skipped  bool
	partial  bool
	// hole: why it could not be read (a store.Hole* reason, or a limit's),
	// if so; refused: the error of a limit it is over
	hole    string
	refused error
	// why it was skipped (a field of shard.Counts)
	why *int64
	// archiveSkips: what of an archive blob was left out, and why
	archiveSkips []archive.Skip
	// err: the blob's repository is refused, not read around (unsafe): the
	// scan stops, Permanent
	err error
}

// flushBatch scans a batch and writes its data ops under the fence, with
// the paths of the blobs holding findings (or left as holes) that the batch
// and again (blobs met again) met them at, and the holes the walk met
// (holes). One runs at a time: it alone updates the run's counts and
// wanted. The write runs on while the next batch is scanned (after the
// previous write: they land in order).
func (r *scanRun) flushBatch(ctx context.Context, batch, again []gitread.Blob, holes []store.Hole) error {
	if len(batch)+len(again)+len(holes) == 0 {
		return nil
	}
	seen := map[string]bool{}
	if !r.fresh {
		hashes := make([][]byte, len(batch))
		for i := range batch {
			hashes[i] = batch[i].Hash[:]
		}
		var err error
		looked, asked := r.progress.wait(dbWait), time.Now()
		seen, err = r.s.Store.SeenBlobs(ctx, r.scopeID, hashes)
		looked()
		r.s.Stages.since(stageSeen, asked)
		if err != nil {
			return err
		}
	}
	var todo []gitread.Blob
	ops := store.DataOps{Holes: holes}
	for _, h := range holes {
		ops.Paths = append(ops.Paths, store.BlobPath{Blob: h.Blob, Path: h.Path})
	}
	for _, b := range batch {
		switch {
		case !seen[string(b.Hash[:])]:
			todo = append(todo, b)
		case r.isHole(b.Hash): // read by another run meanwhile
			ops.Filled = append(ops.Filled, b.Hash[:])
		case r.wanted[b.Hash]: // scanned before, met at a path of its own now
			ops.Paths = append(ops.Paths, store.BlobPath{Blob: b.Hash[:], Path: b.Path})
		}
	}
	if len(todo) > 0 {
		r.worked.Store(true)
	}
	results := make([]scanned, len(todo))
	// The batch's skips by reason, durable with its data (Tally.Skips),
	// then the run's.
	var c shard.Counts
	var wg sync.WaitGroup
	work := make(chan []int)
	for i, reader := range r.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run := range work {
				for _, j := range run {
					r.s.acquire()
					results[j] = r.scanBlob(reader, &r.buffers[i], todo[j], &c)
					r.s.release()
					r.progress.step()
				}
			}
		}()
	}
	// Blobs are read in pack order, a run of neighbours per reader (see
	// gitread.Packs.Position); results stay in walk order, so the first
	// finding of a secret is still its oldest.
	order := r.readOrder(todo)
	for k := 0; k < len(order); k += readRun {
		work <- order[k:min(k+readRun, len(order))]
	}
	close(work)
	wg.Wait()
	for _, res := range results {
		if res.err != nil {
			return res.err
		}
	}

	var bytes, scanned, skipped int64
	for i, res := range results {
		b := todo[i]
		switch {
		case res.hole != "":
			h := r.hole(b, res.hole, res.refused)
			ops.Holes = append(ops.Holes, h)
			ops.Paths = append(ops.Paths, store.BlobPath{Blob: h.Blob, Path: b.Path})
		case res.seen.Blob != nil && r.isHole(b.Hash):
			ops.Filled = append(ops.Filled, res.seen.Blob)
			ops.FilledFindings = ops.FilledFindings || len(res.findings) > 0
		}
		if res.seen.Blob != nil {
			ops.Seen = append(ops.Seen, res.seen)
			r.seenRows.Add(1)
		}
		if len(res.findings) > 0 {
			r.wanted[todo[i].Hash] = true
		}
		ops.Findings = append(ops.Findings, res.findings...)
		bytes += res.bytes
		if res.skipped {
			skipped++
			if res.why != nil {
				*res.why++
			}
		} else {
			scanned++
			metrics.BlobsScanned.Inc()
		}
		r.partial = r.partial || res.partial
		for _, k := range res.archiveSkips {
			c.ArchiveSkips.Add(k.Reason, 1)
		}
	}
	r.bytes, r.scanned, r.skipped = r.bytes+bytes, r.scanned+scanned, r.skipped+skipped
	skips := c.Breakdown()
	r.counts.AddBreakdown(skips)
	ops.Tally = store.Tally{Scanned: scanned, Skipped: skipped, Bytes: bytes, Skips: skips}
	for _, b := range again {
		if r.wanted[b.Hash] || r.isHole(b.Hash) {
			ops.Paths = append(ops.Paths, store.BlobPath{Blob: b.Hash[:], Path: b.Path})
		}
	}
	if err := waitFor(&r.writing); err != nil {
		return err
	}
	done := make(chan error, 1)
	r.writing = done
	blobs := int64(len(todo))
	go func() { done <- r.write(ctx, ops, blobs, bytes) }()
	return nil
}

// write writes a batch's data ops. One runs at a time: it alone updates
// the run's count of findings.
func (r *scanRun) write(ctx context.Context, ops store.DataOps, blobs, bytes int64) error {
	written, writing := r.progress.wait(dbWait), time.Now()
	n, err := r.s.Store.WriteData(ctx, r.lease, r.scopeID, ops)
	written()
	r.s.Stages.since(stageWrite, writing)
	if err != nil {
		return err
	}
	r.findings += n
	metrics.BytesScanned.Add(bytes)
	metrics.Findings.Add(n)
	r.progress.add(blobs, bytes, n)
	return nil
}

// scanBlob reads and scans one blob. An unreadable blob is skipped and
// makes the run Partial, and is not marked seen: it is a hole, which the
// next run tries again.
// c only names the counter of the reason (flush counts, on its goroutine).
// Memory of the blob reads: a reader's buffer over keepBufBytes is
// dropped after its blob; after a blob of freeAfterBytes the heap is
// returned to the system.
const (
	keepBufBytes         = 16 << 20
	freeAfterBytes int64 = 128 << 20
)

func (r *scanRun) scanBlob(reader *gitread.PackReader, buf *[]byte, b gitread.Blob, c *shard.Counts) scanned {
	limit := r.s.Scanner.MaxBlobBytes()
	reading := time.Now()
	content, size, err := reader.Read(b.Hash, limit, *buf)
	r.s.Stages.since(stageInflate, reading)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// Not in a pack the scan opened (alternates, a pack written since).
		content, size, err = r.walker.ReadBlob(b.Hash, limit)
	}
	if err == nil && cap(content) > cap(*buf) {
		*buf = content[:0]
	}
	hash := append([]byte(nil), b.Hash[:]...)
	switch {
	case errors.Is(err, gitread.ErrUnsafe):
		return scanned{err: err}
	case errors.Is(err, gitread.ErrLimit):
		// Over a limit (a delta cycle, a bomb the walk's size read let
		// through): a hole, lost, and the rest of the batch is scanned.
		reason, _ := limitReason(err)
		err = fmt.Errorf("blob %s at %q in commit %s: %w", b.Hash, b.Path, b.Commit, err)
		return scanned{skipped: true, partial: true, why: &c.Refused, hole: reason, refused: err}
	case errors.Is(err, gitread.ErrTooLarge):
		res := r.s.Scanner.Oversized(size)
		return scanned{seen: store.SeenBlob{Blob: hash, Outcome: store.OutcomeOversized}, skipped: true, partial: res.Partial, why: &c.Oversized}
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return scanned{skipped: true, partial: true, why: &c.Missing, hole: store.HoleMissing}
	case errors.Is(err, gitread.ErrCorrupt):
		return scanned{skipped: true, partial: true, why: &c.Corrupt, hole: store.HoleCorrupt}
	case err != nil:
		return scanned{skipped: true, partial: true, why: &c.Unreadable, hole: store.HoleUnreadable}
	}
	scanning := time.Now()
	res := r.s.Scanner.Scan(b.Path, content, b.Commit.String())
	r.s.Stages.since(stageScan, scanning)
	out := scanned{bytes: int64(len(content)), partial: res.Partial, archiveSkips: res.ArchiveSkips}
	// No buffer stays sized by the largest blob of the scan; after a huge
	// one, its memory goes back to the system now rather than after the
	// runtime's scavenger gets to it (minutes: the worker would hold its
	// peak through every later scan). The collection it costs is nothing
	// beside reading that blob.
	if cap(*buf) > keepBufBytes {
		*buf = nil
	}
	if out.bytes >= freeAfterBytes {
		debug.FreeOSMemory() // content is dead here: collected
	}
	switch res.Skipped {
	case scan.SkipBinary:
		out.seen, out.skipped, out.why = store.SeenBlob{Blob: hash, Outcome: store.OutcomeBinary}, true, &c.Binary
	case scan.SkipOversized:
		out.seen, out.skipped, out.why = store.SeenBlob{Blob: hash, Outcome: store.OutcomeOversized}, true, &c.Oversized
	default:
		out.seen = store.SeenBlob{Blob: hash, Outcome: store.OutcomeScanned}
	}
	for _, f := range res.Findings {
		out.findings = append(out.findings, store.Finding{RuleID: f.RuleID, Blob: hash, Start: f.Start, End: f.End,
			Line: f.Line, Path: b.Path, Commit: b.Commit.String(), SecretHash: f.SecretHash, Preview: f.Preview, Decoded: f.Decoded,
			Archive: f.Archive, Ignored: inlineCause(f)})
	}
	return out
}
