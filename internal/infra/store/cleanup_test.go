package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/infra/store"
)

// cleanupDB is a migrated database of the test's own: retention deletes
// by age across all tables, which would take other tests' rows.
func cleanupDB(t testing.TB, name string) *store.Store {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Store.Pool().Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, env.PG.URL(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

func sqlExec(t testing.TB, st *store.Store, sql string, args ...any) {
	t.Helper()
	if _, err := st.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

func sqlCount(t testing.TB, st *store.Store, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return n
}

// seedCodebase adds a codebase (stale days ago, or live when stale < 0)
// with collections under its name, one a day for days.
func seedCodebase(t testing.TB, st *store.Store, name string, stale, days int) int64 {
	t.Helper()
	id := sqlCount(t, st, `INSERT INTO codebases (host, external_repo_id, owner, name, stale_since)
		VALUES ('h', $1::text, 'o', $1::text, CASE WHEN $2::int >= 0 THEN now() - $2::int * interval '1 day' END) RETURNING id`, name, stale)
	sqlExec(t, st, `INSERT INTO collections (key, codebase_id, host, owner, name, status, workflow_id, run_id, started_at)
		SELECT $2 || ':' || d, $1, 'h', 'o', $2, 'succeeded', 'w', 'r', now() - d * interval '1 day'
		FROM generate_series(1, $3::int) AS d`, id, name, days)
	return id
}

// scopeSeed is one scope of a seeded shard: its rule set, how many days
// ago it began, and how many blobs it saw (a finding, a path and a
// presence row per ten blobs, a receipt per 100).
type scopeSeed struct {
	policy string
	age    int
	blobs  int
}

// seedShard adds a shard with its scopes' data, checkpointed at the
// newest receipt of the last scope, last used days ago.
func seedShard(t testing.TB, st *store.Store, key string, codebase int64, used int, scopes ...scopeSeed) int64 {
	t.Helper()
	var cb any
	if codebase != 0 {
		cb = codebase
	}
	shardID := sqlCount(t, st, `INSERT INTO shards (key, codebase_id, location, status, updated_at)
		VALUES ($1, $2, 'https://h/' || $1, 'Done', now() - $3::int * interval '1 day') RETURNING id`, key, cb, used)
	for _, sc := range scopes {
		scope := sqlCount(t, st, `INSERT INTO scan_scopes (shard_id, policy_hash, created_at)
			VALUES ($1, $2, now() - $3::int * interval '1 day') RETURNING id`, shardID, sc.policy, sc.age)
		// Whole numbers only: one statement of several takes no parameters.
		sqlExec(t, st, strings.NewReplacer("$1", fmt.Sprint(scope), "$2", fmt.Sprint(sc.blobs), "$3", fmt.Sprint(shardID),
			"$4", fmt.Sprint(sc.age)).Replace(`
			INSERT INTO seen_blobs (scope_id, blob, outcome)
				SELECT $1, int8send(b), 'scanned' FROM generate_series(1, $2::int) AS b;
			INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id, secret_hash, preview, secret_path)
				SELECT $1, 'r', int8send(b), 0, 8, 1, 'f' || b, 'c', 's' || b, '', '' FROM generate_series(10, $2::int, 10) AS b;
			INSERT INTO finding_paths (scope_id, blob, path) SELECT $1, int8send(b), 'f' || b FROM generate_series(10, $2::int, 10) AS b;
			INSERT INTO finding_presence_refs (scope_id, ref, commit_id) VALUES ($1, 'refs/heads/main', 'c');
			INSERT INTO finding_presence (scope_id, ref, blob)
				SELECT $1, 'refs/heads/main', int8send(b) FROM generate_series(10, $2::int, 10) AS b;
			INSERT INTO shard_watermarks (scope_id, ref, commit_id) VALUES ($1, 'refs/heads/main', 'c');
			INSERT INTO shard_holes (scope_id, blob, path, commit_id, reason) VALUES ($1, '\x00', 'lost', 'c', 'missing');
			INSERT INTO shard_receipts (shard_id, scope_id, fence, complete, created_at)
				SELECT $3, $1, $1 * 100000 + f, true, now() - ($4::int - f / 100.0) * interval '1 day'
				FROM generate_series(0, $2::int / 100) AS f;
			UPDATE shards SET checkpoint_receipt_id = (SELECT max(id) FROM shard_receipts WHERE scope_id = $1),
				fence = (SELECT max(fence) FROM shard_receipts WHERE scope_id = $1) WHERE id = $3`))
	}
	return shardID
}

// cleanUp runs CleanupStep until done and returns what it deleted and how
// many steps it took, failing if a step deletes more than a batch.
func cleanUp(t testing.TB, st *store.Store, p store.CleanupPlan) (store.CleanupCounts, int) {
	t.Helper()
	var total store.CleanupCounts
	var c store.CleanupCursor
	for steps := 1; ; steps++ {
		r, next, done, err := st.CleanupStep(context.Background(), p, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Total() > int64(max(p.Batch, p.Codebases)) {
			t.Fatalf("step %d deleted %+v: more than a batch of %d", steps, r, p.Batch)
		}
		total.Add(r)
		if done {
			return total, steps
		}
		c = next
	}
}

// tableRows counts the rows of every table a cleanup deletes from.
func tableRows(t testing.TB, st *store.Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"codebases", "collections", "shards", "scan_scopes", "seen_blobs", "findings",
		"finding_paths", "finding_presence", "finding_presence_refs", "shard_watermarks", "shard_holes", "shard_receipts"} {
		out[table] = sqlCount(t, st, `SELECT count(*) FROM `+table)
	}
	return out
}

// A codebase stale for long enough goes with everything it holds, a batch
// at a time: no step deletes more than a batch of rows, and a live
// codebase's data is untouched.
func TestCleanupDeletesStaleCodebasesInBatches(t *testing.T) {
	ctx := context.Background()
	st := cleanupDB(t, "c_stale")
	gone := seedCodebase(t, st, "gone", 31, 40)
	seedShard(t, st, fmt.Sprintf("codebase:%d", gone), gone, 31, scopeSeed{"p1", 200, 3000}, scopeSeed{"p2", 100, 5000})
	recent := seedCodebase(t, st, "recent", 29, 40)
	seedShard(t, st, fmt.Sprintf("codebase:%d", recent), recent, 29, scopeSeed{"p2", 100, 500})
	live := seedCodebase(t, st, "live", -1, 40)
	seedShard(t, st, fmt.Sprintf("codebase:%d", live), live, 1, scopeSeed{"p2", 100, 500})
	before := tableRows(t, st)

	// Interrupted: a few steps, then a cleanup starting afresh finishes.
	plan := store.CleanupPlan{StaleBefore: time.Now().Add(-30 * 24 * time.Hour), Now: time.Now(), Batch: 1000}
	var c store.CleanupCursor
	var got store.CleanupCounts
	for range 3 {
		r, next, _, err := st.CleanupStep(ctx, plan, c)
		if err != nil {
			t.Fatal(err)
		}
		got.Add(r)
		c = next
	}
	if cb, _ := st.CodebaseByID(ctx, gone); cb != nil {
		t.Fatal("the stale codebase is still there after its first step")
	}
	rest, steps := cleanUp(t, st, plan)
	got.Add(rest)

	after := tableRows(t, st)
	// The gone codebase: 8,000 seen blobs, 800 findings, secrets, paths and
	// presence rows, 2 presence refs, watermarks and holes, 82 receipts.
	want := store.CleanupCounts{Codebases: 1, Shards: 1, Scopes: 2, Receipts: 31 + 51, Rows: 8000 + 4*800 + 2 + 2 + 2}
	if got != want {
		t.Errorf("deleted %+v, want %+v", got, want)
	}
	if steps < 10 {
		t.Errorf("%d steps for 10,400 rows in batches of 1,000", steps)
	}
	for table, n := range map[string]int64{"codebases": 1, "collections": 40, "shards": 1, "scan_scopes": 2,
		"seen_blobs": 8000, "findings": 800, "shard_holes": 2, "shard_receipts": 82} {
		if before[table]-after[table] != n {
			t.Errorf("%s: %d rows deleted, want %d", table, before[table]-after[table], n)
		}
	}
	for _, id := range []int64{recent, live} {
		if n := sqlCount(t, st, `SELECT count(*) FROM seen_blobs b JOIN scan_scopes s ON s.id = b.scope_id
			JOIN shards sh ON sh.id = s.shard_id WHERE sh.codebase_id = $1`, id); n != 500 {
			t.Errorf("codebase %d keeps %d seen blobs, want 500", id, n)
		}
	}
}

// Retention deletes what is no longer current after its time, and keeps
// what still means something: the newest collection under each name, the
// receipt a shard is checkpointed at, the scope it is checkpointed in, and
// scan requests used recently.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	st := cleanupDB(t, "c_retention")
	days := 24 * time.Hour
	cb := seedCodebase(t, st, "app", -1, 200)
	// Renamed 150 days ago: its collections before were under "old".
	sqlExec(t, st, `UPDATE collections SET name = 'old' WHERE codebase_id = $1 AND started_at < now() - interval '150 days'`, cb)
	// A rule change 20 days ago: scope p1 replaced by p2.
	seedShard(t, st, fmt.Sprintf("codebase:%d", cb), cb, 1, scopeSeed{"p1", 300, 2000}, scopeSeed{"p2", 20, 2000})
	// Replaced too, but the shard's checkpoint is still in p1 (p2's scan
	// never completed): p1 stays.
	other := seedCodebase(t, st, "other", -1, 1)
	keep := seedShard(t, st, fmt.Sprintf("codebase:%d", other), other, 1, scopeSeed{"p1", 300, 100}, scopeSeed{"p2", 20, 100})
	sqlExec(t, st, `UPDATE shards SET (checkpoint_receipt_id, fence) = (SELECT r.id, r.fence FROM shard_receipts r
		JOIN scan_scopes s ON s.id = r.scope_id WHERE s.shard_id = $1 AND s.policy_hash = 'p1' ORDER BY r.id DESC LIMIT 1)
		WHERE id = $1`, keep)
	// Scan requests: one unused for 100 days, one used yesterday.
	seedShard(t, st, "target:idle", 0, 100, scopeSeed{"p2", 100, 300})
	seedShard(t, st, "target:used", 0, 1, scopeSeed{"p2", 100, 300})

	r := store.Retention{Collections: 90 * days, Receipts: 30 * days, OldScopes: 7 * days, Scans: 90 * days}
	got, _ := cleanUp(t, st, store.CleanupPlan{Now: time.Now(), Retention: r, Batch: 500})

	// Collections: 89 of the last 90 days, and the newest under "old".
	if n := sqlCount(t, st, `SELECT count(*) FROM collections WHERE codebase_id = $1`, cb); n != 89+1 {
		t.Errorf("%d collections kept, want 90", n)
	}
	former, err := st.FormerNames(ctx, cb)
	if err != nil || len(former) != 1 || former[0].Name != "old" {
		t.Errorf("former names %v, %v; want old", former, err)
	}
	// Scopes: p1 of the app is gone, every other scope stays.
	var scopes []string
	rows, _ := st.Pool().Query(ctx, `SELECT sh.key || '/' || s.policy_hash FROM scan_scopes s JOIN shards sh ON sh.id = s.shard_id ORDER BY 1`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		scopes = append(scopes, s)
	}
	rows.Close()
	want := []string{fmt.Sprintf("codebase:%d/p2", cb), fmt.Sprintf("codebase:%d/p1", other), fmt.Sprintf("codebase:%d/p2", other), "target:used/p2"}
	if fmt.Sprint(scopes) != fmt.Sprint(want) {
		t.Errorf("scopes %v, want %v", scopes, want)
	}
	// Receipts: none older than 30 days but the checkpoints.
	if n := sqlCount(t, st, `SELECT count(*) FROM shard_receipts r WHERE created_at < now() - interval '30 days'
		AND NOT EXISTS (SELECT 1 FROM shards s WHERE s.checkpoint_receipt_id = r.id)`); n != 0 {
		t.Errorf("%d receipts older than 30 days kept", n)
	}
	if n := sqlCount(t, st, `SELECT count(*) FROM shards s WHERE checkpoint_receipt_id IS NULL`); n != 0 {
		t.Errorf("%d shards lost their checkpoint", n)
	}
	if got.Shards != 1 || got.Scopes != 2 || got.Collections != 200-90 {
		t.Errorf("deleted %+v; want 1 shard, 2 scopes, 110 collections", got)
	}

	// Zero keeps everything.
	before := tableRows(t, st)
	sqlExec(t, st, `UPDATE shards SET updated_at = now() - interval '1000 days'`)
	if got, _ := cleanUp(t, st, store.CleanupPlan{Now: time.Now().Add(1000 * days), Batch: 500}); got.Total() != 0 {
		t.Errorf("a cleanup without retention deleted %+v", got)
	}
	if after := tableRows(t, st); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("rows %v, want %v", after, before)
	}
}
