package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/store"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.RunDatabase(m, &env)) }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fixture builds apply inputs for one host per test, so tests share the
// database without seeing each other's rows.
type fixture struct {
	t    *testing.T
	host string
	n    int
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, host: fmt.Sprintf("h%d.example.com", time.Now().UnixNano())}
}

func (f *fixture) repo(owner, name string) repoid.ID {
	return repoid.ID{Host: f.host, Owner: owner, Name: name}
}

// apply resolves owner/name with the API saying it is ext at apiOwner/apiName.
func (f *fixture) apply(owner, name, ext string, expect int64, verified string) identity.Outcome {
	f.t.Helper()
	f.n++
	in := store.ApplyInput{Key: fmt.Sprintf("%s/%d", f.host, f.n), WorkflowID: "wf", RunID: "run", Now: t0,
		Observation: identity.Observation{Repo: f.repo(owner, name), ExpectByNameID: expect, VerifiedSHA: verified,
			Head: fmt.Sprintf("%040d", f.n), DefaultBranch: "main"}}
	if ext != "" {
		in.API = &identity.Repository{ExternalID: ext, Owner: owner, Name: name}
	}
	res, err := env.Store.ApplyIdentity(context.Background(), in)
	if err != nil {
		f.t.Fatalf("ApplyIdentity(%s/%s ext %s): %v", owner, name, ext, err)
	}
	if !res.Changed {
		if err := env.Store.CompleteCollection(context.Background(), in.Key, res.CodebaseID, in.Head, "", t0); err != nil {
			f.t.Fatal(err)
		}
	}
	return res
}

func (f *fixture) get(id int64) *store.Codebase {
	f.t.Helper()
	cb, err := env.Store.CodebaseByID(context.Background(), id)
	if err != nil || cb == nil {
		f.t.Fatalf("codebase %d: %v %v", id, cb, err)
	}
	return cb
}

func (f *fixture) live(owner, name string) *store.Codebase {
	f.t.Helper()
	cb, err := env.Store.LiveCodebaseByName(context.Background(), f.repo(owner, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return cb
}

func TestApplyIdentityCases(t *testing.T) {
	f := newFixture(t)

	a := f.apply("alice", "repo", "100", 0, "")
	if a.Case != identity.CaseNew || a.CodebaseID == 0 {
		t.Fatalf("first collection: %+v, want case A", a)
	}
	cb := f.get(a.CodebaseID)
	if cb.ExternalID != "100" || cb.LastCommitSHA == "" || cb.LastCompletedAt == nil {
		t.Fatalf("created codebase: %+v", cb)
	}

	b := f.apply("alice", "repo", "", cb.ID, cb.LastCommitSHA)
	if b.Case != identity.CaseSame || b.CodebaseID != cb.ID {
		t.Fatalf("verified re-collection: %+v, want case B on %d", b, cb.ID)
	}

	stale := f.apply("alice", "repo", "", cb.ID, "0123456789012345678901234567890123456789")
	if !stale.Changed {
		t.Fatalf("verification of a commit the row no longer has: %+v, want Changed", stale)
	}

	d := f.apply("alice", "renamed", "100", 0, "")
	if d.Case != identity.CaseMoved || d.CodebaseID != cb.ID || d.Name != "renamed" {
		t.Fatalf("rename: %+v, want D on %d", d, cb.ID)
	}
	if f.live("alice", "repo") != nil {
		t.Fatal("old name still held after rename")
	}

	tr := f.apply("bob", "renamed", "100", 0, "")
	if tr.Case != identity.CaseMoved || tr.CodebaseID != cb.ID || tr.Owner != "bob" {
		t.Fatalf("transfer: %+v", tr)
	}

	fp := f.apply("bob", "renamed", "100", cb.ID, "")
	if fp.Case != identity.CaseForcePush || fp.CodebaseID != cb.ID {
		t.Fatalf("force push: %+v, want F", fp)
	}

	e := f.apply("bob", "renamed", "200", cb.ID, "")
	if e.Case != identity.CaseReplaced || e.CodebaseID == cb.ID || e.RetiredID != cb.ID {
		t.Fatalf("recreated: %+v, want E retiring %d", e, cb.ID)
	}
	if f.get(cb.ID).StaleSince == nil {
		t.Fatal("replaced codebase not stale")
	}

	r := f.apply("carol", "back", "100", 0, "")
	if r.Case != identity.CaseReturned || r.CodebaseID != cb.ID {
		t.Fatalf("came back: %+v, want R on %d", r, cb.ID)
	}
	if back := f.get(cb.ID); back.StaleSince != nil || back.Owner != "carol" || back.Name != "back" {
		t.Fatalf("returned codebase: %+v", back)
	}
}

// A rename or return whose target name is still held by another live row:
// that row is retired in the same transaction instead of the live-name
// index blocking the update forever.
func TestApplyIdentityTargetNameHeldByLiveRow(t *testing.T) {
	f := newFixture(t)
	x := f.apply("acme", "a", "100", 0, "")
	y := f.apply("acme", "b", "200", 0, "")
	// Swap: repository 100 is now called acme/b; acme/b's old row is live.
	res := f.apply("acme", "b", "100", y.CodebaseID, "")
	if res.Case != identity.CaseReplaced || res.CodebaseID != x.CodebaseID || res.RetiredID != y.CodebaseID {
		t.Fatalf("swap: %+v, want E moving %d and retiring %d", res, x.CodebaseID, y.CodebaseID)
	}
	if got := f.live("acme", "b"); got == nil || got.ID != x.CodebaseID {
		t.Fatalf("acme/b held by %+v, want codebase %d", got, x.CodebaseID)
	}
	// Repository 200 comes back as acme/a: R, and acme/a is free by now.
	res = f.apply("acme", "a", "200", 0, "")
	if res.Case != identity.CaseReturned || res.CodebaseID != y.CodebaseID {
		t.Fatalf("return: %+v", res)
	}

	// A stale row returning to a name a live row still holds.
	z := f.apply("acme", "c", "300", 0, "")
	f.apply("acme", "c", "400", z.CodebaseID, "") // 300 replaced at acme/c by 400: 300 is stale
	w := f.apply("acme", "d", "500", 0, "")
	res = f.apply("acme", "d", "300", w.CodebaseID, "")
	if res.Case != identity.CaseReplaced || res.CodebaseID != z.CodebaseID || res.RetiredID != w.CodebaseID {
		t.Fatalf("stale row returning onto a held name: %+v", res)
	}
	if f.get(z.CodebaseID).StaleSince != nil {
		t.Fatal("returning codebase still stale")
	}
}

func TestApplyIdentityIsIdempotent(t *testing.T) {
	f := newFixture(t)
	in := store.ApplyInput{Key: f.host + "/same", WorkflowID: "wf", RunID: "run", Now: t0,
		Observation: identity.Observation{Repo: f.repo("o", "r"), API: &identity.Repository{ExternalID: "1", Owner: "o", Name: "r"}}}
	first, err := env.Store.ApplyIdentity(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := env.Store.ApplyIdentity(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("second apply with the same key = %+v, want %+v", again, first)
	}
	var n int
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM collections WHERE key = $1`, in.Key).Scan(&n); err != nil || n != 1 {
		t.Fatalf("collections for key: %d, %v", n, err)
	}
}

func TestApplyIdentityConcurrentCreatesOneCodebase(t *testing.T) {
	f := newFixture(t)
	const n = 8
	results := make([]identity.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = env.Store.ApplyIdentity(context.Background(), store.ApplyInput{
				Key: fmt.Sprintf("%s/c%d", f.host, i), WorkflowID: "wf", RunID: "run", Now: t0,
				Observation: identity.Observation{Repo: f.repo("o", "r"),
					API: &identity.Repository{ExternalID: "77", Owner: "o", Name: "r"}}})
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("apply %d: %v", i, errs[i])
		}
		if results[i].CodebaseID != results[0].CodebaseID {
			t.Fatalf("apply %d resolved to codebase %d, apply 0 to %d", i, results[i].CodebaseID, results[0].CodebaseID)
		}
		if results[i].Case == identity.CaseNew {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d applies created the codebase, want exactly 1", created)
	}
}

func TestFailuresAndViews(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.apply("o", "r", "1", 0, "")
	fail := store.Failure{Key: f.host + "/fail1", Repo: f.repo("O", "R"), Class: "Permanent", Message: "boom", WorkflowID: "wf", RunID: "run",
		Strike: true, Now: t0}
	for range 2 { // a retried activity must not count twice
		if err := env.Store.FailCollection(ctx, fail); err != nil {
			t.Fatal(err)
		}
	}
	fail.Key = f.host + "/fail2"
	if err := env.Store.FailCollection(ctx, fail); err != nil {
		t.Fatal(err)
	}
	if got := f.get(a.CodebaseID).ConsecutiveFailures; got != 2 {
		t.Fatalf("consecutive failures = %d, want 2", got)
	}
	// The host's and the infrastructure's failures, and a cancel, are
	// recorded but charge the repository nothing.
	infra := store.Failure{Key: f.host + "/infra", Repo: f.repo("o", "r"), Class: "Retryable", Message: "database unavailable",
		WorkflowID: "wf", RunID: "run", Now: t0}
	cancelled := store.Failure{Key: f.host + "/cancel", Repo: f.repo("o", "r"), Class: "Cancelled", Message: "cancelled",
		WorkflowID: "wf", RunID: "run", Cancelled: true, Strike: true, Now: t0}
	for _, x := range []store.Failure{infra, cancelled} {
		if err := env.Store.FailCollection(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.get(a.CodebaseID).ConsecutiveFailures; got != 2 {
		t.Fatalf("consecutive failures = %d after an infrastructure failure and a cancel, want 2", got)
	}
	if hist, err := env.Store.Collections(ctx, a.CodebaseID, 2); err != nil || len(hist) != 2 || hist[0].Status != "cancelled" && hist[1].Status != "cancelled" {
		t.Fatalf("history %+v, %v: want the cancel recorded as cancelled", hist, err)
	}
	// An inaccessible repository stays so until a collection completes.
	since, err := env.Store.MarkInaccessible(ctx, a.CodebaseID, t0)
	if err != nil || !since.Equal(t0) {
		t.Fatalf("inaccessible since %v, %v", since, err)
	}
	if again, _ := env.Store.MarkInaccessible(ctx, a.CodebaseID, t0.Add(time.Hour)); !again.Equal(t0) {
		t.Fatalf("marked again: since %v, want %v", again, t0)
	}
	if cb := f.get(a.CodebaseID); cb.InaccessibleSince == nil || cb.StaleSince != nil {
		t.Fatalf("inaccessible codebase: %+v", cb)
	}
	f.apply("o", "r", "", a.CodebaseID, f.get(a.CodebaseID).LastCommitSHA)
	if got := f.get(a.CodebaseID).ConsecutiveFailures; got != 0 {
		t.Fatalf("consecutive failures after success = %d, want 0", got)
	}
	if err := env.Store.RecordView(ctx, a.CodebaseID, t0); err != nil {
		t.Fatal(err)
	}
	if v := f.get(a.CodebaseID).LastViewedAt; v == nil || !v.Equal(t0) {
		t.Fatalf("last viewed = %v", v)
	}
	if cb := f.get(a.CodebaseID); cb.InaccessibleSince != nil {
		t.Fatalf("a completed collection left the codebase inaccessible: %+v", cb)
	}
	hist, err := env.Store.Collections(ctx, a.CodebaseID, 10)
	if err != nil || len(hist) != 6 {
		t.Fatalf("history: %d entries, %v; want 6", len(hist), err)
	}
}

func TestDeleteStale(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := f.apply("o", "old", "1", 0, "")
	recent := f.apply("o", "recent", "2", 0, "")
	live := f.apply("o", "live", "3", 0, "")
	now := t0.Add(100 * 24 * time.Hour)
	if err := env.Store.MarkStale(ctx, old.CodebaseID, now.Add(-31*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.MarkStale(ctx, recent.CodebaseID, now.Add(-29*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if cb, _ := env.Store.FindCodebase(ctx, f.repo("o", "old")); cb == nil || cb.ID != old.CodebaseID || cb.StaleSince == nil {
		t.Fatalf("FindCodebase of a stale name = %+v", cb)
	}
	if _, err := env.Store.DeleteStale(ctx, now.Add(-30*24*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]bool{old.CodebaseID: false, recent.CodebaseID: true, live.CodebaseID: true} {
		cb, err := env.Store.CodebaseByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if (cb != nil) != want {
			t.Errorf("codebase %d present = %v, want %v", id, cb != nil, want)
		}
	}
	var orphans int
	_ = env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM collections WHERE host = $1 AND owner = 'o' AND name = 'old'`, f.host).Scan(&orphans)
	if orphans != 0 {
		t.Errorf("%d collections of the deleted codebase remain", orphans)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	applied, err := env.Store.Migrate(context.Background())
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, %v", applied, err)
	}
	v, err := env.Store.SchemaVersion(context.Background())
	if err != nil || v < 1 {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

// The sweep's candidate queries, oldest and newest view first, can be
// answered from their partial index (their predicate implies the index's):
// with sequential scans priced out, the plan must use codebases_sweep_ranged,
// not the primary key, and test a range's buckets in the index (Index
// Cond), not on each row fetched (Filter): a range of n reads its own
// candidates, not n times as many.
func TestSweepQueryUsesItsIndex(t *testing.T) {
	ctx := context.Background()
	conn, err := env.Store.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `RESET enable_seqscan`)
	now := time.Now()
	for _, q := range []string{store.SweepCandidatesQuery, store.SweepCandidatesNewestQuery} {
		rows, err := conn.Query(ctx, "EXPLAIN "+q, now.Add(-91*24*time.Hour), 0, now.Add(-91*24*time.Hour), now, 500, []string{"down.example"}, 256, 512)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "codebases_sweep_ranged") {
			t.Errorf("candidate query plan does not use codebases_sweep_ranged:\n%s", text)
		}
		for _, line := range plan {
			if strings.Contains(line, "hashint8") && !strings.Contains(line, "Index Cond") {
				t.Errorf("a range's buckets are not tested in the index:\n%s", text)
			}
		}
	}
}
