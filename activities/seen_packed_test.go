package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Exactly-once across the seen set's re-encoding (migration 00058): a
// scope's seen blobs written as rows before it, packed into chunks by the
// daily cleanup while nothing else changes, are still seen. A scan that
// walks the whole history again (its watermarks gone) then scans only the
// one blob a new commit adds: none twice, findings unchanged.
func TestScanAfterPackingScansNothingTwice(t *testing.T) {
	ctx := context.Background()
	s := shards(t, time.Minute, 40)
	dir, _ := generate(t, repogen.Spec{Commits: 80, FilesPerCommit: 3, BlobSize: 300, Seed: 58,
		Secrets: []repogen.Secret{{Commit: 30, Path: "a/creds.txt", Content: "token: " + ghToken + "\n"}}})
	spec, shardID := localShard(t, s, dir)
	l := lease(t, s, shardID, "first")
	r1, err := s.ScanShard(ctx, workflows.ShardWork{Lease: l, Spec: spec})
	if err != nil || !r1.Complete || r1.Findings != 1 || r1.BlobsScanned == 0 {
		t.Fatalf("first scan: %+v, %v", r1, err)
	}
	if _, err := s.CheckpointShard(ctx, workflows.CheckpointInput{Lease: l, ReceiptID: r1.ID}); err != nil {
		t.Fatal(err)
	}
	seen := seenCount(t, shardID)
	if chunks := count(t, `SELECT count(*) FROM seen_blob_chunks WHERE scope_id = $1`, r1.ScopeID); chunks == 0 || seen < int(r1.BlobsScanned) {
		t.Fatalf("%d chunks, %d blobs seen after scanning %d", chunks, seen, r1.BlobsScanned)
	}
	before := findingSet(t, shardID)

	// As a release before 00058 wrote them: a row a blob.
	for _, q := range []string{
		`INSERT INTO seen_blobs (scope_id, blob, outcome) SELECT scope_id, blob, 'scanned' FROM seen_blob_ids
			WHERE scope_id = $1 AND blob NOT IN (SELECT blob FROM seen_blobs WHERE scope_id = $1)`,
		`DELETE FROM seen_blob_chunks WHERE scope_id = $1`,
		`DELETE FROM shard_watermarks WHERE scope_id = $1`,
	} {
		if _, err := env.Store.Pool().Exec(ctx, q, r1.ScopeID); err != nil {
			t.Fatal(err)
		}
	}
	// The cleanup packs them, 50 a step (no retention: nothing else goes).
	var c store.CleanupCursor
	var packed int64
	for {
		r, next, done, err := env.Store.CleanupStep(ctx, store.CleanupPlan{Now: time.Now(), Batch: 50}, c)
		if err != nil {
			t.Fatal(err)
		}
		packed += r.Packed
		if done {
			break
		}
		c = next
	}
	if packed < int64(seen) || count(t, `SELECT count(*) FROM seen_blobs WHERE scope_id = $1`, r1.ScopeID) != 0 {
		t.Fatalf("packed %d of %d", packed, seen)
	}
	if n := seenCount(t, shardID); n != seen {
		t.Fatalf("%d blobs seen after packing, %d before", n, seen)
	}

	git := func(stdin string, args ...string) string {
		return strings.TrimSpace(gittest.Git(t, dir, strings.NewReader(stdin), args...))
	}
	blob := git("a file no commit had\n", "hash-object", "-w", "--stdin")
	tree := git(git("", "ls-tree", "HEAD")+"\n100644 blob "+blob+"\tnew.txt\n", "mktree")
	git("", "update-ref", "HEAD", git("", "commit-tree", tree, "-p", "HEAD", "-m", "one more"))

	l2 := lease(t, s, shardID, "second")
	r2, err := s.ScanShard(ctx, workflows.ShardWork{Lease: l2, Spec: spec})
	if err != nil || !r2.Complete || r2.ScopeID != r1.ScopeID {
		t.Fatalf("second scan: %+v, %v", r2, err)
	}
	if r2.BlobsScanned+r2.BlobsSkipped != 1 || r2.Findings != 0 {
		t.Errorf("second scan of the whole history scanned %d blobs and skipped %d (findings %d): want the new one only",
			r2.BlobsScanned, r2.BlobsSkipped, r2.Findings)
	}
	if n := seenCount(t, shardID); n != seen+1 {
		t.Errorf("%d blobs seen, want %d", n, seen+1)
	}
	if after := findingSet(t, shardID); len(after) != len(before) {
		t.Errorf("findings %v, before %v", after, before)
	}
}
