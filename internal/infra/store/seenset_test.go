package store_test

import (
	"context"
	"crypto/sha1" //nolint:gosec // object ids, as Git makes them
	"encoding/binary"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

// blobIDs are n distinct 20-byte ids, as Git's object ids are.
func blobIDs(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(from+i))
		h := sha1.Sum(b[:]) //nolint:gosec // ids, not security
		out[i] = h[:]
	}
	return out
}

func seenOps(ids [][]byte, outcome string) store.DataOps {
	var ops store.DataOps
	for _, id := range ids {
		ops.Seen = append(ops.Seen, store.SeenBlob{Blob: id, Outcome: outcome})
	}
	return ops
}

// seenOf asks SeenBlobs about ids and fails unless exactly want of them
// are seen.
func seenOf(t *testing.T, st *store.Store, scope int64, ids [][]byte, want int) {
	t.Helper()
	seen, err := st.SeenBlobs(context.Background(), scope, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != want {
		t.Fatalf("%d of %d blobs seen, want %d", len(seen), len(ids), want)
	}
}

// Seen blobs are packed into chunks, insert-if-absent: every id written
// is seen, none other is, a batch written again (a replay) or an id met
// twice adds nothing, and a chunk never outgrows a page's share (1,920
// bytes: 96 ids).
func TestSeenBlobsArePackedOnceEach(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, err := env.Store.Scope(ctx, shardID, "p1")
	if err != nil {
		t.Fatal(err)
	}
	l := acquire(t, shardID, "owner", time.Minute)
	if seen, err := env.Store.AnySeen(ctx, scope); err != nil || seen {
		t.Fatalf("AnySeen of a new scope: %v, %v", seen, err)
	}
	ids := blobIDs(0, 20000)
	for i := 0; i < len(ids); i += 8000 {
		batch := ids[i:min(i+8000, len(ids))]
		if _, err := env.Store.WriteData(ctx, l, scope, seenOps(batch, store.OutcomeScanned)); err != nil {
			t.Fatal(err)
		}
	}
	// A replay, and a batch meeting blobs twice, with a binary one.
	if _, err := env.Store.WriteData(ctx, l, scope, seenOps(ids[5000:9000], store.OutcomeScanned)); err != nil {
		t.Fatal(err)
	}
	twice := append(blobIDs(20000, 10), blobIDs(20000, 10)...)
	if _, err := env.Store.WriteData(ctx, l, scope, seenOps(twice, store.OutcomeBinary)); err != nil {
		t.Fatal(err)
	}
	if seen, err := env.Store.AnySeen(ctx, scope); err != nil || !seen {
		t.Fatalf("AnySeen: %v, %v", seen, err)
	}
	seenOf(t, env.Store, scope, blobIDs(0, 20010), 20010)
	seenOf(t, env.Store, scope, blobIDs(20010, 500), 0)
	seenOf(t, env.Store, scope, append(blobIDs(19990, 40), []byte{1}), 20)
	if n := sqlCount(t, env.Store, `SELECT count(*) FROM seen_blob_ids WHERE scope_id = $1`, scope); n != 20010 {
		t.Errorf("seen_blob_ids holds %d rows, want 20,010 (no id twice)", n)
	}
	if n := sqlCount(t, env.Store, `SELECT count(DISTINCT blob) FROM seen_blob_ids WHERE scope_id = $1`, scope); n != 20010 {
		t.Errorf("%d distinct ids, want 20,010", n)
	}
	if n := sqlCount(t, env.Store, `SELECT count(*) FROM seen_blobs WHERE scope_id = $1`, scope); n != 0 {
		t.Errorf("%d rows of seen_blobs: a 20-byte id seen goes in a chunk", n)
	}
	if n := sqlCount(t, env.Store, `SELECT max(length(ids)) FROM seen_blob_chunks WHERE scope_id = $1`, scope); n > 1920 {
		t.Errorf("a chunk of %d bytes", n)
	}
	// 20,010 ids in 64 buckets of 96: about 209 full chunks and one
	// partial a bucket.
	if n := sqlCount(t, env.Store, `SELECT count(*) FROM seen_blob_chunks WHERE scope_id = $1`, scope); n > 20010/96+64 {
		t.Errorf("%d chunks for 20,010 ids", n)
	}
	// Oversized blobs stay rows, counted by OversizedBlobs.
	big := blobIDs(30000, 3)
	if _, err := env.Store.WriteData(ctx, l, scope, seenOps(big, store.OutcomeOversized)); err != nil {
		t.Fatal(err)
	}
	if n, err := env.Store.OversizedBlobs(ctx, scope); err != nil || n != 3 {
		t.Errorf("OversizedBlobs = %d, %v; want 3", n, err)
	}
	seenOf(t, env.Store, scope, big, 3)
}

// The rows of seen_blobs written before migration 00058 go into chunks, a
// batch a cleanup step, and at every step each blob is seen exactly once:
// in a row or in a chunk. Oversized rows stay, as do ids of another length.
func TestCleanupPacksOldSeenBlobs(t *testing.T) {
	ctx := context.Background()
	st := cleanupDB(t, "c_pack")
	shardID, err := st.EnsureShard(ctx, shard.Spec{Key: "target:pack", Target: target.Target{Location: "https://h/o/r"}})
	if err != nil {
		t.Fatal(err)
	}
	var scopes []int64
	for _, p := range []string{"p1", "p2"} {
		scope, err := st.Scope(ctx, shardID, p)
		if err != nil {
			t.Fatal(err)
		}
		scopes = append(scopes, scope)
	}
	ids := blobIDs(0, 2500)
	for _, scope := range scopes {
		sqlExec(t, st, `INSERT INTO seen_blobs (scope_id, blob, outcome) SELECT $1, b, 'scanned' FROM unnest($2::bytea[]) AS b`, scope, ids)
		sqlExec(t, st, `INSERT INTO seen_blobs (scope_id, blob, outcome) VALUES ($1, $2, 'oversized'), ($1, '\x01', 'scanned')`,
			scope, blobIDs(9000, 1)[0])
	}
	plan := store.CleanupPlan{Now: time.Now(), Batch: 1000}
	var c store.CleanupCursor
	var packed int64
	for steps := 1; ; steps++ {
		r, next, done, err := st.CleanupStep(ctx, plan, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Packed > 1000 || r.Total() > 0 {
			t.Fatalf("step %d: %+v: more than a batch, or deleted", steps, r)
		}
		packed += r.Packed
		for _, scope := range scopes {
			seenOf(t, st, scope, ids, len(ids))
			if n := sqlCount(t, st, `SELECT count(*) - count(DISTINCT blob) FROM seen_blob_ids WHERE scope_id = $1`, scope); n != 0 {
				t.Fatalf("step %d: %d ids of scope %d both in a row and in a chunk", steps, n, scope)
			}
		}
		if done {
			break
		}
		c = next
	}
	if packed != 5000 {
		t.Errorf("packed %d rows, want 5,000", packed)
	}
	for _, scope := range scopes {
		if n := sqlCount(t, st, `SELECT count(*) FROM seen_blobs WHERE scope_id = $1`, scope); n != 2 {
			t.Errorf("scope %d keeps %d rows, want 2 (the oversized one, the 1-byte id)", scope, n)
		}
		if n, err := st.OversizedBlobs(ctx, scope); err != nil || n != 1 {
			t.Errorf("OversizedBlobs = %d, %v; want 1", n, err)
		}
		if n := sqlCount(t, st, `SELECT count(*) FROM seen_blob_ids WHERE scope_id = $1`, scope); n != 2502 {
			t.Errorf("scope %d sees %d blobs, want 2,502", scope, n)
		}
	}
	// A cleanup after it has nothing to pack.
	if r, _, done, err := st.CleanupStep(ctx, plan, store.CleanupCursor{}); err != nil || !done || r.Packed != 0 {
		t.Errorf("a cleanup after packing: %+v, done %v, %v", r, done, err)
	}
}

// Retention of superseded scopes takes a replaced scope's chunks with it,
// in batches, and leaves the live scope's: every blob it saw is still
// seen, so none is scanned twice.
func TestRetentionKeepsTheLiveScopesChunks(t *testing.T) {
	ctx := context.Background()
	st := cleanupDB(t, "c_chunks")
	shardID, err := st.EnsureShard(ctx, shard.Spec{Key: "target:chunks", Target: target.Target{Location: "https://h/o/r"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.AcquireShard(ctx, shardID, "o", time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	old, err := st.Scope(ctx, shardID, "old")
	if err != nil {
		t.Fatal(err)
	}
	live, err := st.Scope(ctx, shardID, "live")
	if err != nil {
		t.Fatal(err)
	}
	ids := blobIDs(0, 3000)
	for _, scope := range []int64{old, live} {
		if _, err := st.WriteData(ctx, c.Lease, scope, seenOps(ids, store.OutcomeScanned)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.Finalize(ctx, store.FinalizeInput{Lease: c.Lease, ScopeID: live, Complete: true, Watermarks: map[string]string{"main": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Checkpoint(ctx, c.Lease, r.ID); err != nil {
		t.Fatal(err)
	}
	// The live scope began 10 days ago, replacing the old one.
	sqlExec(t, st, `UPDATE scan_scopes SET created_at = now() - interval '10 days' WHERE shard_id = $1`, shardID)
	chunks := sqlCount(t, st, `SELECT count(*) FROM seen_blob_chunks WHERE scope_id = $1`, old)
	got, steps := cleanUp(t, st, store.CleanupPlan{Now: time.Now(), Retention: store.Retention{OldScopes: 7 * 24 * time.Hour}, Batch: 20})
	if got.Scopes != 1 || got.Rows != chunks {
		t.Errorf("deleted %+v, want the old scope and its %d chunks", got, chunks)
	}
	if steps < int(chunks/20) {
		t.Errorf("%d steps for %d chunks in batches of 20", steps, chunks)
	}
	if n := sqlCount(t, st, `SELECT count(*) FROM seen_blob_chunks WHERE scope_id = $1`, old); n != 0 {
		t.Errorf("the old scope keeps %d chunks", n)
	}
	seenOf(t, st, live, ids, len(ids))
	if n := sqlCount(t, st, `SELECT count(*) FROM seen_blob_ids WHERE scope_id = $1`, live); n != int64(len(ids)) {
		t.Errorf("the live scope sees %d blobs, want %d", n, len(ids))
	}
}
