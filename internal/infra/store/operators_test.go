package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
)

// An operator lists the parked shards with their reasons and un-parks one:
// it is Active again, keeps its fence (nobody held it), and is listed no
// more.
func TestParkedShardsAreListedAndUnparked(t *testing.T) {
	ctx := context.Background()
	shardID := newShard(t)
	l := acquire(t, shardID, "owner", time.Minute)
	before := dbNow(t)
	if err := env.Store.Park(ctx, l, errclass.ReasonCorrupt); err != nil {
		t.Fatal(err)
	}
	listed := func() (bool, string, time.Time) {
		ps, total, err := env.Store.ParkedShards(ctx, 100000)
		if err != nil || total < int64(len(ps)) {
			t.Fatalf("parked shards: %d of %d, %v", len(ps), total, err)
		}
		for _, p := range ps {
			if p.ID == shardID {
				return true, p.Reason, p.Since
			}
		}
		return false, "", time.Time{}
	}
	if ok, reason, since := listed(); !ok || reason != errclass.ReasonCorrupt || since.Before(before.Add(-time.Second)) {
		t.Fatalf("parked shard listed %t (%q, since %s), want it with its reason, parked just now", ok, reason, since)
	}
	was, parked, err := env.Store.Unpark(ctx, shardID)
	if err != nil || !parked || was.ParkReason != errclass.ReasonCorrupt {
		t.Fatalf("unpark: %+v, %t, %v", was, parked, err)
	}
	if sh, _ := env.Store.ShardByID(ctx, shardID); sh.Status != shard.Active || sh.ParkReason != "" || sh.Fence != l.Fence {
		t.Fatalf("shard after unpark: %+v", sh)
	}
	if ok, _, _ := listed(); ok {
		t.Fatal("an un-parked shard is still listed")
	}
	if _, parked, err := env.Store.Unpark(ctx, shardID); err != nil || parked {
		t.Fatalf("unpark of an Active shard: parked %t, %v", parked, err)
	}
	if was, _, err := env.Store.Unpark(ctx, 1<<40); err != nil || was != nil {
		t.Fatalf("unpark of no shard: %+v, %v", was, err)
	}
}

// The codebases the sweep no longer refreshes are listed with their last
// failure.
func TestExcludedCodebasesAreListedWithTheirLastFailure(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("gone-%d", time.Now().UnixNano())
	var id int64
	if err := env.Store.Pool().QueryRow(ctx, `INSERT INTO codebases (host, external_repo_id, owner, name, consecutive_failures)
		VALUES ('h', $1, 'acme', $2, $3) RETURNING id`, name, name, decay.MaxFailures).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for i, msg := range []string{"older failure", "collect h/acme/x: sync mirror: not found"} {
		if _, err := env.Store.Pool().Exec(ctx, `INSERT INTO collections (key, codebase_id, host, owner, name, status, error_class,
				error_message, workflow_id, run_id, started_at, finished_at)
			VALUES ($1, $2, 'h', 'acme', $3, 'failed', 'Permanent', $4, 'w', 'r', $5, $5)`,
			fmt.Sprintf("%s-%d", name, i), id, name, msg, time.Now().Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	es, total, err := env.Store.ExcludedCodebases(ctx, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.ID == id {
			if e.Failures != decay.MaxFailures || e.Class != "Permanent" || e.Message != "collect h/acme/x: sync mirror: not found" ||
				e.LastFailureAt == nil || e.Repo.Name != name || total < 1 {
				t.Fatalf("excluded codebase %+v (of %d)", e, total)
			}
			return
		}
	}
	t.Fatalf("codebase %d with %d failures in a row not listed: %+v", id, decay.MaxFailures, es)
}
