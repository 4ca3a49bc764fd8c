package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"

	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
)

func newShard(t *testing.T) int64 {
	t.Helper()
	id, err := env.Store.EnsureShard(context.Background(), shard.Spec{
		Key:    fmt.Sprintf("target:test-%d", time.Now().UnixNano()),
		Target: target.Target{Location: "https://h/o/r", Selection: target.Selection{Refs: []string{"main"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func acquire(t *testing.T, shardID int64, owner string, leaseFor time.Duration) shard.Lease {
	t.Helper()
	c, err := env.Store.AcquireShard(context.Background(), shardID, owner, leaseFor, true)
	if err != nil || c.Status != shard.Active {
		t.Fatalf("acquire: %+v, %v", c, err)
	}
	return c.Lease
}

func isStaleOwner(err error) bool {
	c := errclass.Classify(err)
	return c != nil && c.Class == errclass.StaleOwner
}

func finding(blob byte, start int) store.Finding {
	return store.Finding{RuleID: "r", Blob: []byte{blob}, Start: start, End: start + 4, Line: 1, Path: "p", Commit: "c",
		SecretHash: "h", Preview: "ab…"}
}

// Invariant 1: a stale fence is never accepted again.
func TestSupersededFenceIsRejectedForever(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p1")
	old := acquire(t, shardID, "owner", time.Minute)
	// Another owner may not take a live lease...
	if c, err := env.Store.AcquireShard(ctx, shardID, "other", time.Minute, true); err != nil || !c.Busy || c.Lease.Fence != 0 {
		t.Fatalf("acquire of a leased shard by another owner: %+v, %v; want Busy", c, err)
	}
	// ...but an owner takes over from its own earlier attempt, fencing it off.
	cur := acquire(t, shardID, "owner", time.Minute)
	if cur.Fence != old.Fence+1 {
		t.Fatalf("fences %d then %d", old.Fence, cur.Fence)
	}
	ops := store.DataOps{Seen: []store.SeenBlob{{Blob: []byte{1}, Outcome: store.OutcomeScanned}}, Findings: []store.Finding{finding(1, 0)}}
	if _, err := env.Store.WriteData(ctx, old, scope, ops); !isStaleOwner(err) {
		t.Fatalf("zombie write: %v, want StaleOwner", err)
	}
	if _, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: old, ScopeID: scope, Complete: true, Watermarks: map[string]string{"main": "c"}}); !isStaleOwner(err) {
		t.Fatalf("zombie finalize: %v, want StaleOwner", err)
	}
	if err := env.Store.Park(ctx, old, "zombie"); !isStaleOwner(err) {
		t.Fatalf("zombie park: %v, want StaleOwner", err)
	}
	if _, err := env.Store.RenewLease(ctx, old, time.Minute); !isStaleOwner(err) {
		t.Fatalf("zombie renew: %v, want StaleOwner", err)
	}
	// The current owner finishes; the old fence stays rejected afterwards.
	r, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: cur, ScopeID: scope, Data: ops, Complete: true, Watermarks: map[string]string{"main": "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := env.Store.Checkpoint(ctx, cur, r.ID); err != nil || st != shard.Done {
		t.Fatalf("checkpoint: %s, %v", st, err)
	}
	if _, err := env.Store.WriteData(ctx, old, scope, ops); !isStaleOwner(err) {
		t.Fatalf("zombie write after completion: %v, want StaleOwner", err)
	}
	if _, err := env.Store.Checkpoint(ctx, old, r.ID); !isStaleOwner(err) {
		t.Fatalf("zombie checkpoint with the new owner's receipt: %v, want StaleOwner", err)
	}
	fs, _ := env.Store.Findings(ctx, shardID, 10)
	if len(fs) != 1 {
		t.Fatalf("%d findings, want 1 (only the current owner's)", len(fs))
	}
}

// dbNow reads the database's clock, the one lease deadlines are set and
// checked on.
func dbNow(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// expireLease runs a shard's lease out: its deadline moves into the past
// on the database's clock, which the lease checks compare with, so expiry
// is simulated instead of waited for.
func expireLease(t *testing.T, shardID int64) {
	t.Helper()
	if _, err := env.Store.Pool().Exec(context.Background(),
		`UPDATE shards SET lease_deadline = clock_timestamp() - interval '1 millisecond' WHERE id = $1`, shardID); err != nil {
		t.Fatal(err)
	}
}

// within says whether deadline is leaseFor after some instant of [before, after].
func within(deadline, before, after time.Time, leaseFor time.Duration) bool {
	return !deadline.Before(before.Add(leaseFor)) && !deadline.After(after.Add(leaseFor))
}

// A lease that ran out is the owner's until someone takes the shard over:
// an activity that waited in the queue past the deadline renews it and
// writes; once another owner has taken over (a new fence), the old one can
// do neither.
func TestExpiredLeaseIsTheOwnersUntilTakenOver(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p1")
	before := dbNow(t)
	c, err := env.Store.AcquireShard(ctx, shardID, "slow", time.Minute, true)
	after := dbNow(t)
	if err != nil || c.Status != shard.Active {
		t.Fatalf("acquire: %+v, %v", c, err)
	}
	l := c.Lease
	if !within(c.Deadline, before, after, time.Minute) {
		t.Fatalf("acquired lease runs until %s, want a minute after [%s, %s]", c.Deadline, before, after)
	}
	before = dbNow(t)
	deadline, err := env.Store.RenewLease(ctx, l, 2*time.Minute)
	after = dbNow(t)
	if err != nil {
		t.Fatalf("renew of a live lease: %v", err)
	}
	if !within(deadline, before, after, 2*time.Minute) {
		t.Fatalf("renewed lease runs until %s, want two minutes after [%s, %s]", deadline, before, after)
	}
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{}); err != nil {
		t.Fatalf("write under a live lease: %v", err)
	}
	if c, err := env.Store.AcquireShard(ctx, shardID, "next", time.Minute, true); err != nil || !c.Busy || !c.Deadline.Equal(deadline) {
		t.Fatalf("acquire of a live lease by another owner: %+v, %v; want Busy until %s", c, err, deadline)
	}

	// The deadline passes while the owner's next activity waits in the
	// queue; nobody takes the shard meanwhile.
	expireLease(t, shardID)
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{}); err != nil {
		t.Fatalf("write after expiry, fence still current: %v", err)
	}
	before = dbNow(t)
	deadline, err = env.Store.RenewLease(ctx, l, time.Minute)
	after = dbNow(t)
	if err != nil || !within(deadline, before, after, time.Minute) {
		t.Fatalf("renew after expiry, fence still current: %s, %v; want a minute after [%s, %s]", deadline, err, before, after)
	}
	if c, err := env.Store.AcquireShard(ctx, shardID, "next", time.Minute, true); err != nil || !c.Busy {
		t.Fatalf("acquire of a renewed lease by another owner: %+v, %v; want Busy", c, err)
	}

	// Now it runs out and another owner takes over with a higher fence.
	expireLease(t, shardID)
	l2 := acquire(t, shardID, "next", time.Minute)
	if l2.Fence <= l.Fence {
		t.Fatalf("new fence %d not above %d", l2.Fence, l.Fence)
	}
	if _, err := env.Store.WriteData(ctx, l, scope, store.DataOps{}); !isStaleOwner(err) {
		t.Fatalf("write after a takeover: %v, want StaleOwner", err)
	}
	if _, err := env.Store.RenewLease(ctx, l, time.Minute); !isStaleOwner(err) {
		t.Fatalf("renew after a takeover: %v, want StaleOwner", err)
	}

	// A checkpoint releases the shard: the fence no longer holds it.
	r, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l2, ScopeID: scope, Complete: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Checkpoint(ctx, l2, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.RenewLease(ctx, l2, time.Minute); !isStaleOwner(err) {
		t.Fatalf("renew after the checkpoint released the shard: %v, want StaleOwner", err)
	}
	if _, err := env.Store.WriteData(ctx, l2, scope, store.DataOps{}); !isStaleOwner(err) {
		t.Fatalf("write after the checkpoint released the shard: %v, want StaleOwner", err)
	}
}

// Invariant 3: watermarks move only with a finalize; the frontier only to
// a receipt of the current fence.
func TestFinalizeAndCheckpoint(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p1")
	l := acquire(t, shardID, "owner", time.Minute)
	ops := store.DataOps{Seen: []store.SeenBlob{{Blob: []byte{7}, Outcome: store.OutcomeScanned}}, Findings: []store.Finding{finding(7, 3)}}
	if seen, err := env.Store.AnySeen(ctx, scope); err != nil || seen {
		t.Fatalf("a new scope has seen blobs: %t, %v", seen, err)
	}

	// A run whose time ran out before it walked any ref to its tip.
	partial, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l, ScopeID: scope, Data: ops, Complete: false})
	if err != nil {
		t.Fatal(err)
	}
	if wm, _ := env.Store.Watermarks(ctx, scope); len(wm) != 0 {
		t.Fatalf("a finalize without watermarks moved them: %v", wm)
	}
	if seen, err := env.Store.AnySeen(ctx, scope); err != nil || !seen {
		t.Fatalf("the scope has seen no blob after a finalize wrote one: %t, %v", seen, err)
	}
	again, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l, ScopeID: scope, Data: ops, Complete: true,
		Watermarks: map[string]string{"main": "tip"}})
	if err != nil || again != partial {
		t.Fatalf("retried finalize of the same fence = %+v, %v; want the first receipt %+v", again, err, partial)
	}
	if partial.Findings != 1 {
		t.Fatalf("receipt counts %d new findings, want 1", partial.Findings)
	}
	if st, err := env.Store.Checkpoint(ctx, l, partial.ID); err != nil || st != shard.Active {
		t.Fatalf("checkpoint of a Partial run: %s, %v; want Active", st, err)
	}
	if st, err := env.Store.Checkpoint(ctx, l, partial.ID); err != nil || st != shard.Active {
		t.Fatalf("retried checkpoint: %s, %v", st, err)
	}

	l2 := acquire(t, shardID, "owner2", time.Minute)
	if _, err := env.Store.Checkpoint(ctx, l2, partial.ID); !isStaleOwner(err) {
		t.Fatalf("checkpoint from an older fence's receipt: %v, want StaleOwner", err)
	}
	if _, err := env.Store.Checkpoint(ctx, l2, partial.ID+100000); !isStaleOwner(err) {
		t.Fatalf("checkpoint without a receipt: %v, want StaleOwner", err)
	}
	complete, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l2, ScopeID: scope, Data: ops, Complete: true,
		Watermarks: map[string]string{"main": "tip", "dev": "tip2"}})
	if err != nil {
		t.Fatal(err)
	}
	if complete.Findings != 0 {
		t.Fatalf("replayed data ops counted %d new findings", complete.Findings)
	}
	if wm, _ := env.Store.Watermarks(ctx, scope); wm["main"] != "tip" || wm["dev"] != "tip2" {
		t.Fatalf("watermarks after a Complete finalize: %v", wm)
	}
	sh, _ := env.Store.ShardByID(ctx, shardID)
	if sh.CheckpointReceiptID != partial.ID {
		t.Fatalf("frontier moved before the checkpoint: %d", sh.CheckpointReceiptID)
	}
	if st, err := env.Store.Checkpoint(ctx, l2, complete.ID); err != nil || st != shard.Done {
		t.Fatalf("checkpoint: %s, %v; want Done", st, err)
	}
	fs, _ := env.Store.Findings(ctx, shardID, 10)
	seen, _ := env.Store.SeenBlobs(ctx, scope, [][]byte{{7}, {8}})
	if len(fs) != 1 || !seen["\x07"] || seen["\x08"] {
		t.Fatalf("data after replays: %d findings, seen %v", len(fs), seen)
	}
}

// A run that could not read a blob records it as a hole and still moves
// the watermarks of the refs it walked: the shard stays Active while a
// later run may read the hole, is Done once it cannot be recovered, and
// the hole goes when its blob is read (findings in it make the next
// presence start afresh).
func TestHolesKeepTheWatermarks(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p1")
	hole := store.Hole{Blob: []byte{9}, Path: "big.txt", Commit: "c1", Reason: store.HoleMissing}
	run := func(owner string, ops store.DataOps, in store.FinalizeInput) (shard.Receipt, shard.Status) {
		t.Helper()
		l := acquire(t, shardID, owner, time.Minute)
		if _, err := env.Store.WriteData(ctx, l, scope, ops); err != nil {
			t.Fatal(err)
		}
		in.Lease, in.ScopeID = l, scope
		r, err := env.Store.Finalize(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		st, err := env.Store.Checkpoint(ctx, l, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r, st
	}

	// A mirror lacks the blob: a later run may read it.
	r, st := run("o1", store.DataOps{Holes: []store.Hole{hole}}, store.FinalizeInput{Covered: true, Watermarks: map[string]string{"main": "t1"}})
	if !r.Covered || r.Complete || r.Holes != 1 || r.Lost != 0 || st != shard.Active {
		t.Fatalf("run with a hole: %+v, %s; want covered, 1 open hole, Active", r, st)
	}
	if wm, _ := env.Store.Watermarks(ctx, scope); wm["main"] != "t1" {
		t.Fatalf("watermarks %v, want main at t1 despite the hole", wm)
	}
	// Tried again, in vain, on a copy fetched afresh: lost.
	hole.Lost = true
	r, st = run("o2", store.DataOps{Holes: []store.Hole{hole}}, store.FinalizeInput{Covered: true, Watermarks: map[string]string{"main": "t2"}})
	if r.Holes != 0 || r.Lost != 1 || st != shard.Done {
		t.Fatalf("run with a lost hole: %+v, %s; want 1 lost, Done", r, st)
	}
	if hs, err := env.Store.Holes(ctx, scope); err != nil || len(hs) != 1 || hs[0].Attempts != 2 || !hs[0].Lost || hs[0].Path != "big.txt" {
		t.Fatalf("holes %+v, %v; want the one hole, tried twice, lost", hs, err)
	}
	// The source is repaired: the blob is read, with a secret in it.
	if _, err := env.Store.Pool().Exec(ctx, `INSERT INTO finding_presence_refs (scope_id, ref, commit_id) VALUES ($1, 'main', 't2')`, scope); err != nil {
		t.Fatal(err)
	}
	f := finding(9, 0)
	f.Path = "big.txt"
	r, st = run("o3", store.DataOps{Seen: []store.SeenBlob{{Blob: []byte{9}, Outcome: store.OutcomeScanned}}, Findings: []store.Finding{f},
		Filled: [][]byte{{9}}, FilledFindings: true}, store.FinalizeInput{Complete: true, Watermarks: map[string]string{"main": "t2"}})
	if r.Holes != 0 || r.Lost != 0 || !r.Complete || st != shard.Done {
		t.Fatalf("run that read the hole: %+v, %s", r, st)
	}
	if hs, _ := env.Store.Holes(ctx, scope); len(hs) != 0 {
		t.Fatalf("holes %+v after the blob was read", hs)
	}
	if basis, err := env.Store.PresenceBasis(ctx, scope); err != nil || len(basis.Tips) != 0 {
		t.Fatalf("presence tips %v, %v: a filled hole with findings must make presence start afresh", basis.Tips, err)
	}
}

func TestParkAndRearm(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	l := acquire(t, shardID, "owner", time.Minute)
	if err := env.Store.Park(ctx, l, errclass.ReasonPermissionDenied); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Park(ctx, l, errclass.ReasonPermissionDenied); err != nil {
		t.Fatalf("retried park: %v", err)
	}
	c, err := env.Store.AcquireShard(ctx, shardID, "next", time.Minute, true)
	if err != nil || c.Status != shard.Parked || c.ParkReason != errclass.ReasonPermissionDenied || c.Lease.Fence != 0 {
		t.Fatalf("acquire of a parked shard: %+v, %v", c, err)
	}

	done := newShard(t)
	scope, _ := env.Store.Scope(ctx, done, "p")
	l = acquire(t, done, "owner", time.Minute)
	r, _ := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l, ScopeID: scope, Complete: true})
	if _, err := env.Store.Checkpoint(ctx, l, r.ID); err != nil {
		t.Fatal(err)
	}
	if c, _ := env.Store.AcquireShard(ctx, done, "x", time.Minute, false); c.Status != shard.Done {
		t.Fatalf("acquire without rearm of a Done shard: %+v", c)
	}
	if c, _ := env.Store.AcquireShard(ctx, done, "x", time.Minute, true); c.Status != shard.Active || c.Lease.Fence != l.Fence+1 {
		t.Fatalf("rearm of a Done shard: %+v", c)
	}
}
