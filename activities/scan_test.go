package activities_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/shard"
	"gitfleet/workflows"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.AllowLocal() // the helpers too: they fetch from loopback and scan local paths
	if req := os.Getenv(helperEnv); req != "" {
		os.Exit(scanHelper(req))
	}
	if spec := os.Getenv(mirrorHelperEnv); spec != "" {
		os.Exit(mirrorHelper(spec))
	}
	os.Exit(testenv.RunDatabase(m, &env))
}

var ghToken = gittest.FakePAT("Kp3")

func shards(t *testing.T, leaseFor time.Duration, batch int) *activities.Shards {
	t.Helper()
	rs, err := scan.Default()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scan.New(rs, scan.DefaultConfig(), []byte("0123456789abcdef-test-key"))
	if err != nil {
		t.Fatal(err)
	}
	return &activities.Shards{Store: env.Store, Scanner: sc, LeaseFor: leaseFor, BatchBlobs: batch}
}

func generate(t *testing.T, spec repogen.Spec) (string, repogen.Info) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo.git")
	info, err := repogen.Generate(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	return dir, info
}

func localShard(t *testing.T, s *activities.Shards, dir string) (shard.Spec, int64) {
	t.Helper()
	n, err := target.Normalize([]target.Request{{Location: dir}})
	if err != nil {
		t.Fatal(err)
	}
	tg := n.Targets[0]
	spec := shard.Spec{Key: tg.Key(), Target: target.Target{Location: tg.Location, Local: true}}
	id, err := s.EnsureShard(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec, id
}

func lease(t *testing.T, s *activities.Shards, shardID int64, owner string) shard.Lease {
	t.Helper()
	c, err := s.AcquireShard(context.Background(), workflows.AcquireShardInput{ShardID: shardID, Owner: owner, Rearm: true})
	if err != nil || c.Status != shard.Active {
		t.Fatalf("acquire: %+v, %v", c, err)
	}
	return c.Lease
}

func count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Store.Pool().QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// expireLease runs a shard's lease out on the database's clock (the one
// the lease checks use) instead of waiting for it.
func expireLease(t *testing.T, shardID int64) {
	t.Helper()
	if _, err := env.Store.Pool().Exec(context.Background(),
		`UPDATE shards SET lease_deadline = clock_timestamp() - interval '1 millisecond' WHERE id = $1`, shardID); err != nil {
		t.Fatal(err)
	}
}

func seenCount(t *testing.T, shardID int64) int {
	return count(t, `SELECT count(*) FROM seen_blob_ids b JOIN scan_scopes s ON s.id = b.scope_id WHERE s.shard_id = $1`, shardID)
}

func isClass(err error, c errclass.Class) bool {
	var app interface{ Type() string }
	return errors.As(err, &app) && app.Type() == string(c)
}

// Invariant 2: losing the lease stops the scan before it goes any further.
func TestLeaseLossStopsTheScan(t *testing.T) {
	s := shards(t, 3*time.Second, 100)
	dir, info := generate(t, repogen.Spec{Commits: 2000, FilesPerCommit: 5, BlobSize: 3000, Seed: 11})
	spec, shardID := localShard(t, s, dir)
	l := lease(t, s, shardID, "owner")

	done := make(chan error, 1)
	go func() {
		_, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec})
		done <- err
	}()
	for seenCount(t, shardID) == 0 {
		select {
		case err := <-done:
			t.Fatalf("the scan finished before the test could take its lease: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Another owner takes over.
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE shards SET fence = fence + 1 WHERE id = $1`, shardID); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !isClass(err, errclass.StaleOwner) {
		t.Fatalf("scan after losing its lease: %v, want StaleOwner", err)
	}
	stoppedAt := seenCount(t, shardID)
	if stoppedAt >= info.Blobs {
		t.Fatalf("the scan wrote all %d blobs after losing its lease", stoppedAt)
	}
	if n := count(t, `SELECT count(*) FROM shard_receipts WHERE shard_id = $1`, shardID); n != 0 {
		t.Fatalf("%d receipts written by an owner that lost its lease", n)
	}
	// Nothing can write once no goroutine runs the scan's code: wait for
	// that (its lease keeper may still be in a renewal the new fence
	// rejects), then the count is final.
	waitScanGoroutinesGone(t)
	if n := seenCount(t, shardID); n != stoppedAt {
		t.Fatalf("writes went on after the scan returned: %d → %d", stoppedAt, n)
	}
}

// scanGoroutines returns the stacks of the goroutines running code of the
// activities or of what they call in internal/ (the tests' own and the
// development stack's excepted).
func scanGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, frame := range strings.Split(g, "\n") {
			// Frames only: a "created by" line names a creator that may
			// have returned long ago.
			if strings.HasPrefix(frame, "gitfleet/activities.") || strings.HasPrefix(frame, "gitfleet/internal/infra/") ||
				strings.HasPrefix(frame, "gitfleet/internal/domain/") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// waitScanGoroutinesGone waits until no goroutine runs the scan's code:
// polled, since the runtime signals no goroutine's exit; a leaked one that
// keeps running fails the test at the deadline.
func waitScanGoroutinesGone(t *testing.T) {
	t.Helper()
	poll.Until(t, "goroutines still run the scan's code after it returned", 30*time.Second, func() (bool, string) {
		left := scanGoroutines()
		return len(left) == 0, fmt.Sprintf("%d of them:\n%s", len(left), strings.Join(left, "\n\n"))
	})
}

// Invariant 1 at the activity: a zombie attempt with a superseded fence
// writes nothing.
func TestZombieAttemptWritesNothing(t *testing.T) {
	s := shards(t, time.Minute, 10)
	dir, _ := generate(t, repogen.Spec{Commits: 20, FilesPerCommit: 2, BlobSize: 200, Seed: 5})
	spec, shardID := localShard(t, s, dir)
	zombie := lease(t, s, shardID, "owner")
	lease(t, s, shardID, "owner") // the retried attempt takes over
	_, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: zombie, Spec: spec})
	if !isClass(err, errclass.StaleOwner) {
		t.Fatalf("zombie scan: %v, want StaleOwner", err)
	}
	if n := seenCount(t, shardID); n != 0 {
		t.Fatalf("the zombie wrote %d seen blobs", n)
	}
}

// A scan placed again on another worker (its owner did not take it in
// time: workflows.runGit) takes the shard over at its first attempt: a new
// fence, so the attempt it left — still running on the old owner, paused
// here mid-scan — can no longer write; and its receipt counts what that
// attempt made durable before, as a retried attempt's does.
func TestAScanPlacedAgainTakesTheShardOver(t *testing.T) {
	ctx := context.Background()
	// Blobs over 250 bytes are skipped (oversized): the scan has skips to
	// count.
	cfg := scan.DefaultConfig()
	cfg.MaxBlobBytes = 250
	rs, err := scan.Default()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scan.New(rs, cfg, []byte("0123456789abcdef-test-key"))
	if err != nil {
		t.Fatal(err)
	}
	old, next := shards(t, time.Minute, 20), shards(t, time.Minute, 20)
	old.Scanner, next.Scanner = sc, sc
	// The old owner reads one blob at a time, each with the one slot the
	// test holds between them: it is paused wherever the test keeps it.
	slots := make(chan struct{}, 1)
	old.ScanSlots = slots
	slots <- struct{}{}
	dir, info := generate(t, repogen.Spec{Commits: 150, FilesPerCommit: 3, BlobSize: 200, Seed: 41})
	spec, shardID := localShard(t, old, dir)
	l := lease(t, old, shardID, "owner")
	zombie := make(chan error, 1)
	go func() {
		_, err := old.ScanShard(ctx, workflows.ShardWork{Lease: l, Spec: spec})
		zombie <- err
	}()
	// Let it go a blob at a time (the test's send waits behind the scan's
	// release, in order) until a batch with skipped blobs is durable.
	oversized := func() int {
		return count(t, `SELECT count(*) FROM seen_blobs b JOIN scan_scopes s ON s.id = b.scope_id
			WHERE s.shard_id = $1 AND b.outcome = 'oversized'`, shardID)
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound on failure only
	for oversized() == 0 {
		select {
		case err := <-zombie:
			t.Fatalf("the old owner's scan ended before it was paused: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no skipped blob durable after 2 minutes (%d seen)", seenCount(t, shardID))
		}
		<-slots
		slots <- struct{}{}
	}
	before, err := env.Store.RunTally(ctx, shardID)
	if err != nil || before.Scanned+before.Skipped == 0 || before.Scanned+before.Skipped >= int64(info.Blobs) {
		t.Fatalf("the old owner's durable tally %+v, %v; want part of the %d blobs", before, err, info.Blobs)
	}

	// Placed again, on another worker.
	r, err := next.ScanShard(ctx, workflows.ShardWork{Lease: l, Spec: spec, TakeOver: true})
	if err != nil || !r.Covered {
		t.Fatalf("the scan placed again: %+v, %v", r, err)
	}
	if r.Fence <= l.Fence {
		t.Fatalf("the scan placed again kept fence %d (lease %d): the attempt it left may still write", r.Fence, l.Fence)
	}
	if got := r.BlobsScanned + r.BlobsSkipped; got != int64(info.Blobs) {
		t.Fatalf("the receipt counts %d blobs (%d scanned, %d skipped), the repository has %d: what the old owner made durable (%+v) is lost",
			got, r.BlobsScanned, r.BlobsSkipped, info.Blobs, before)
	}
	// Its breakdown is the scan's too, not the last attempt's: every skip
	// is an oversized blob, this scan's own (none an earlier run's).
	if n := int64(oversized()); r.BlobsSkipped != n || r.Oversized != n || r.EarlierOversized != 0 || r.Complete {
		t.Fatalf("the receipt says %d skipped, %d oversized (%d by an earlier run), complete=%t; the scan skipped %d oversized blobs (the old owner %d)",
			r.BlobsSkipped, r.Oversized, r.EarlierOversized, r.Complete, n, before.Skips["oversized"])
	}

	// The old owner wakes up: it cannot write.
	<-slots
	if err := <-zombie; !isClass(err, errclass.StaleOwner) {
		t.Fatalf("the old owner's attempt after the takeover: %v, want StaleOwner", err)
	}
	if _, err := env.Store.WriteData(ctx, l, r.ScopeID, store.DataOps{Tally: store.Tally{Scanned: 1}}); !isClass(activities.AppError(err), errclass.StaleOwner) {
		t.Fatalf("a write under the old fence: %v, want StaleOwner", err)
	}
	after, err := env.Store.RunTally(ctx, shardID)
	if err != nil || after.Scanned != r.BlobsScanned || after.Skipped != r.BlobsSkipped {
		t.Fatalf("tally after the old owner woke up: %+v, %v; want the receipt's %d scanned, %d skipped", after, err, r.BlobsScanned, r.BlobsSkipped)
	}
	if n := count(t, `SELECT count(*) FROM shard_receipts WHERE shard_id = $1`, shardID); n != 1 {
		t.Fatalf("%d receipts, want the new owner's only", n)
	}
	if _, err := next.CheckpointShard(ctx, workflows.CheckpointInput{Lease: shard.Lease{ShardID: shardID, Owner: l.Owner, Fence: r.Fence}, ReceiptID: r.ID}); err != nil {
		t.Fatal(err)
	}
}

type findingKey struct {
	rule, blob, path, commit string
	start                    int
}

func findingSet(t *testing.T, shardID int64) map[findingKey]int {
	t.Helper()
	fs, err := env.Store.Findings(context.Background(), shardID, 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[findingKey]int{}
	for _, f := range fs {
		out[findingKey{f.RuleID, f.BlobHex, f.Path, f.Commit, f.Start}]++
	}
	return out
}

// Invariants 3 and 8: a crash between finalize and checkpoint leaves the
// frontier where it was; the next owner re-runs, finds everything seen,
// and checkpoints its own receipt — nothing duplicated, nothing lost.
func TestCrashBetweenFinalizeAndCheckpoint(t *testing.T) {
	s := shards(t, time.Minute, 20)
	dir, _ := generate(t, repogen.Spec{Commits: 50, FilesPerCommit: 3, BlobSize: 300, Seed: 9,
		Secrets: []repogen.Secret{{Commit: 20, Path: "a/creds.txt", Content: "token: " + ghToken + "\n"}}})
	spec, shardID := localShard(t, s, dir)
	first := lease(t, s, shardID, "crashed")
	r1, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: first, Spec: spec})
	if err != nil || !r1.Complete || r1.Findings != 1 {
		t.Fatalf("first scan: %+v, %v", r1, err)
	}
	// The owner dies here, before its checkpoint.
	before := findingSet(t, shardID)
	if sh, _ := env.Store.ShardByID(context.Background(), shardID); sh.CheckpointReceiptID != 0 || sh.Status != shard.Active {
		t.Fatalf("frontier moved without a checkpoint: %+v", sh)
	}
	expireLease(t, shardID) // its lease runs out

	next := lease(t, s, shardID, "next")
	r2, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: next, Spec: spec})
	if err != nil || r2.BlobsScanned != 0 || r2.Findings != 0 {
		t.Fatalf("re-run after the crash: %+v, %v; want nothing rescanned", r2, err)
	}
	if _, err := s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: first, ReceiptID: r1.ID}); !isClass(err, errclass.StaleOwner) {
		t.Fatalf("late checkpoint of the crashed owner: %v, want StaleOwner", err)
	}
	st, err := s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: next, ReceiptID: r2.ID})
	if err != nil || st != shard.Done {
		t.Fatalf("checkpoint: %s, %v", st, err)
	}
	after := findingSet(t, shardID)
	if fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 1 {
		t.Fatalf("findings changed across the crash: %v → %v", before, after)
	}
}

// Scale, and invariant 4: a repository of 10,000 commits, 50,000 blobs and
// 1,000 refs scans completely, and the control-plane rows of a shardID grow
// with its refs, not with the objects in the repository.
func TestScaleAndControlPlaneRows(t *testing.T) {
	s := shards(t, time.Minute, 2000)
	controlRows := func(shardID int64) int {
		return count(t, `SELECT (SELECT count(*) FROM shards WHERE id = $1)
			+ (SELECT count(*) FROM scan_scopes WHERE shard_id = $1)
			+ (SELECT count(*) FROM shard_receipts WHERE shard_id = $1)
			+ (SELECT count(*) FROM shard_watermarks w JOIN scan_scopes s ON s.id = w.scope_id WHERE s.shard_id = $1)`, shardID)
	}
	for _, tt := range []struct {
		spec repogen.Spec
	}{
		{repogen.Spec{Commits: 100, FilesPerCommit: 5, Refs: 1000, BlobSize: 200, Seed: 1}},
		{repogen.Spec{Commits: 10000, FilesPerCommit: 5, Refs: 1000, BlobSize: 200, Seed: 2}},
	} {
		dir, info := generate(t, tt.spec)
		spec, shardID := localShard(t, s, dir)
		r, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, shardID, "o"), Spec: spec})
		if err != nil || !r.Complete || r.Commits != int64(tt.spec.Commits) {
			t.Fatalf("scan of %d commits: %+v, %v", tt.spec.Commits, r, err)
		}
		if got := r.BlobsScanned + r.BlobsSkipped; got != int64(info.Blobs) {
			t.Fatalf("scanned %d blobs, the repository has %d", got, info.Blobs)
		}
		if rows := controlRows(shardID); rows != 3+len(info.Refs) {
			t.Fatalf("%d control-plane rows for %d blobs and %d refs, want %d", rows, info.Blobs, len(info.Refs), 3+len(info.Refs))
		}
	}
}

// A retried scan attempt took the lease over; the workflow still holds the
// first fence when it parks: the owner parks all the same.
func TestParkAfterTakeover(t *testing.T) {
	s := shards(t, time.Minute, 10)
	dir, _ := generate(t, repogen.Spec{Commits: 3, FilesPerCommit: 1, BlobSize: 100, Seed: 1})
	_, shardID := localShard(t, s, dir)
	first := lease(t, s, shardID, "owner")
	lease(t, s, shardID, "owner") // the retried attempt
	if err := s.ParkShard(context.Background(), workflows.ParkInput{Lease: first, Reason: "not found"}); err != nil {
		t.Fatalf("park with the first fence: %v", err)
	}
	if sh, _ := env.Store.ShardByID(context.Background(), shardID); sh.Status != shard.Parked || sh.ParkReason != "not found" {
		t.Fatalf("shard %+v, want parked", sh)
	}
	// Another owner's live lease is not taken to park.
	other := newShardFor(t, s, dir+"/../other")
	mine := lease(t, s, other, "owner")
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE shards SET owner = 'someone else', fence = fence + 1 WHERE id = $1`, other); err != nil {
		t.Fatal(err)
	}
	if err := s.ParkShard(context.Background(), workflows.ParkInput{Lease: mine, Reason: "x"}); !isClass(err, errclass.StaleOwner) {
		t.Fatalf("park of a shard leased by another owner: %v, want StaleOwner", err)
	}
}

func newShardFor(t *testing.T, s *activities.Shards, location string) int64 {
	t.Helper()
	id, err := s.EnsureShard(context.Background(), shard.Spec{Key: "target:" + location, Target: target.Target{Location: location, Local: true}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// One mirror sync per job: a scan handed the refs digest of a sync that
// already ran reads the mirror as it is (no request reaches the host); an
// explicit commit the mirror lacks is fetched by SHA into it, pinned under
// its synthetic ref.
func TestScanReusesTheJobsMirrorSync(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit("acme", "app", "main", map[string]string{"a.txt": "a\n"}, "a"); err != nil {
		t.Fatal(err)
	}
	s := shards(t, time.Minute, 100)
	if s.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "app")
	spec := shard.Spec{Key: "reuse:" + url, Target: target.Target{Location: url}}
	id, err := s.EnsureShard(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	gitRequests := func() int {
		n := 0
		for _, r := range fg.Requests() {
			if r.Kind == forge.Git {
				n++
			}
		}
		return n
	}
	digest, err := s.SyncShardMirror(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec})
	if err != nil || digest == "" {
		t.Fatalf("sync: %q, %v", digest, err)
	}
	before := gitRequests()
	r, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec, RefsDigest: digest})
	if err != nil || !r.Complete || r.BlobsScanned != 1 {
		t.Fatalf("scan = %+v, %v", r, err)
	}
	if n := gitRequests() - before; n != 0 {
		t.Fatalf("the scan made %d Git requests after the job's sync, want 0", n)
	}

	// A commit pushed since the sync, asked for explicitly: fetched by SHA.
	later, err := fg.Commit("acme", "app", "main", map[string]string{"b.txt": "b\n"}, "b")
	if err != nil {
		t.Fatal(err)
	}
	spec.Selection = target.Selection{Commits: []string{later}}
	spec.Key = "reuse-commit:" + url
	if id, err = s.EnsureShard(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	r, err = s.ScanShard(context.Background(), workflows.ShardWork{Lease: lease(t, s, id, "o"), Spec: spec, RefsDigest: digest})
	if err != nil || !r.Complete || r.BlobsScanned != 2 {
		t.Fatalf("scan of a fetched commit = %+v, %v", r, err)
	}
	repo, err := s.Mirrors.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	if ref, err := repo.Reference(plumbing.ReferenceName(target.SyntheticRef(later)), false); err != nil || ref.Hash().String() != later {
		t.Fatalf("synthetic ref = %v, %v", ref, err)
	}
}
