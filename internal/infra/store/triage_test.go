package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/store"
)

// fleetShard is a shard of its own repository location, which a Repo glob
// selects alone.
func fleetShard(t *testing.T) (int64, string) {
	t.Helper()
	name := fmt.Sprintf("fleet-%d", time.Now().UnixNano())
	loc := "https://h/" + name + "/r"
	id, err := env.Store.EnsureShard(context.Background(), shard.Spec{Key: "target:" + name,
		Target: target.Target{Location: loc, Selection: target.Selection{Refs: []string{"main"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return id, "target:" + name
}

func write(t *testing.T, l shard.Lease, scope int64, fs ...store.Finding) {
	t.Helper()
	if _, err := env.Store.WriteData(context.Background(), l, scope, store.DataOps{Findings: fs}); err != nil {
		t.Fatal(err)
	}
}

func secretsOf(t *testing.T, f store.FleetFilter) map[string]store.FleetSecret {
	t.Helper()
	xs, err := env.Store.FleetSecrets(context.Background(), f, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.FleetSecret{}
	for _, x := range xs {
		out[x.RuleID+"/"+x.SecretHash+x.File] = x
	}
	return out
}

// A secret's state is the subject's, not the scope's: it survives a new
// scope (rules changed, the same hash), is "seen again" only when a blob
// not known at resolution holds it, and every change is kept.
func TestTriageSurvivesScopesAndSeesARecommit(t *testing.T) {
	ctx := context.Background()
	shardID, subject := fleetShard(t)
	scope1, _ := env.Store.Scope(ctx, shardID, "rules-1")
	l := acquire(t, shardID, "owner", time.Minute)
	write(t, l, scope1, occ("r", "aa11", 1, 0, "a.env", 1, "c1"), occ("r", "aa11", 2, 0, "a.env", 1, "c2"), occ("r", "bb22", 1, 40, "a.env", 2, "c1"))
	one := store.FleetFilter{ShardID: shardID}

	matches, err := env.Store.MatchSecrets(ctx, scope1, "aa", "", 10)
	if err != nil || len(matches) != 1 || matches[0].SecretHash != "aa11" || matches[0].Where.Commit != "c1" {
		t.Fatalf("match aa: %+v %v", matches, err)
	}
	key := matches[0].SecretKey
	if _, err := env.Store.SetSecretState(ctx, subject, scope1, key, store.StateChange{State: store.StateOpen, Actor: "ann"}); !errors.Is(err, store.ErrNoChange) {
		t.Fatalf("reopening an open secret: %v", err)
	}
	if _, err := env.Store.SetSecretState(ctx, subject, scope1, key, store.StateChange{State: store.StateRevoked, Actor: "ann", Comment: "rotated"}); err != nil {
		t.Fatal(err)
	}
	check := func(step, state string, seenAgain bool) {
		t.Helper()
		got := secretsOf(t, one)["r/aa11"]
		if got.State != state || got.SeenAgain != seenAgain {
			t.Fatalf("%s: state %q seen again %t; want %q %t", step, got.State, got.SeenAgain, state, seenAgain)
		}
		if other := secretsOf(t, one)["r/bb22"]; other.State != store.StateOpen || other.SeenAgain {
			t.Fatalf("%s: the other secret: %+v", step, other)
		}
	}
	check("resolved", store.StateRevoked, false)
	if got := secretsOf(t, one)["r/aa11"]; got.StateBy != "ann" || got.Comment != "rotated" || got.Occurrences != 2 {
		t.Fatalf("resolved: %+v", got)
	}

	// The rules change: a new scope finds the same secret in the same blobs.
	scope2, _ := env.Store.Scope(ctx, shardID, "rules-2")
	write(t, l, scope2, occ("r", "aa11", 1, 0, "a.env", 1, "c1"), occ("r", "aa11", 2, 0, "a.env", 1, "c2"), occ("r", "bb22", 1, 40, "a.env", 2, "c1"))
	check("a new scope", store.StateRevoked, false)

	// A new commit holds it again.
	write(t, l, scope2, occ("r", "aa11", 7, 0, "b.env", 4, "c7"))
	check("a new blob", store.StateRevoked, true)
	if s, err := env.Store.Summary(ctx, one, 5); err != nil || s.SeenAgain != 1 || s.Secrets != 2 || s.ByState[0] != (store.Count{Name: "open", Count: 1}) ||
		s.ByState[1] != (store.Count{Name: "revoked", Count: 1}) {
		t.Fatalf("summary: %+v %v", s, err)
	}
	if got := secretsOf(t, store.FleetFilter{ShardID: shardID, SeenAgain: true}); len(got) != 1 {
		t.Fatalf("seen again only: %v", got)
	}

	if _, err := env.Store.SetSecretState(ctx, subject, scope2, key, store.StateChange{State: store.StateOpen, Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	check("reopened", store.StateOpen, false)
	if _, err := env.Store.SetSecretState(ctx, subject, scope2, key, store.StateChange{State: store.StateUsedInTests, Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	check("resolved again, knowing every blob", store.StateUsedInTests, false)
	h, err := env.Store.SecretHistory(ctx, subject, key)
	if err != nil || len(h) != 3 || h[0].State != "revoked" || h[0].Actor != "ann" || h[0].Comment != "rotated" ||
		h[1].State != "open" || h[2].State != "used_in_tests" || h[2].At.Before(h[0].At) {
		t.Fatalf("history: %+v %v", h, err)
	}
	if got := secretsOf(t, store.FleetFilter{ShardID: shardID, States: []string{"resolved"}}); len(got) != 1 {
		t.Fatalf("resolved only: %v", got)
	}
	if got := secretsOf(t, store.FleetFilter{ShardID: shardID, States: []string{"open"}}); len(got) != 1 || got["r/bb22"].RuleID == "" {
		t.Fatalf("open only: %v", got)
	}
}

// .gitleaksignore fingerprints mark findings (the commit form and the
// form without one), the marks go when the file stops naming them, an
// inline gitleaks:allow stays; a secret is suppressed when every
// occurrence is, and counted apart.
func TestSuppressedFindingsAreKeptMarkedAndCounted(t *testing.T) {
	ctx := context.Background()
	shardID, _ := fleetShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	inline := occ("r", "cc33", 3, 0, "c.go", 5, "c1")
	inline.Ignored = "gitleaks:allow"
	write(t, l, scope, occ("r", "aa11", 1, 0, "a.env", 1, "c1"), occ("r", "bb22", 2, 0, "b.env", 2, "c1"), occ("r", "bb22", 4, 0, "b.env", 2, "c2"), inline)
	one := store.FleetFilter{ShardID: shardID}
	shown := func(step string, f store.FleetFilter, want ...string) {
		t.Helper()
		got := secretsOf(t, f)
		if len(got) != len(want) {
			t.Fatalf("%s: %d secrets, want %v", step, len(got), want)
		}
		for _, w := range want {
			if _, ok := got["r/"+w]; !ok {
				t.Fatalf("%s: no %s in %v", step, w, got)
			}
		}
	}
	shown("inline", one, "aa11", "bb22")
	shown("inline, ignored too", store.FleetFilter{ShardID: shardID, Ignored: true}, "aa11", "bb22", "cc33")

	n, err := env.Store.ApplyIgnore(ctx, scope, []string{"c1:a.env:r:1", "b.env:r:2", "c9:c.go:r:5"})
	if err != nil || n != 3 {
		t.Fatalf("apply: %d, %v", n, err)
	}
	shown("ignore file", one)
	ig := secretsOf(t, store.FleetFilter{ShardID: shardID, IgnoredOnly: true})
	if ig["r/aa11"].Ignored != ".gitleaksignore" || ig["r/bb22"].IgnoredOccurrences != 2 || ig["r/cc33"].Ignored != "gitleaks:allow" {
		t.Fatalf("ignored: %+v", ig)
	}
	if s, err := env.Store.Summary(ctx, one, 5); err != nil || s.Secrets != 0 || s.Ignored != 3 {
		t.Fatalf("summary: %+v %v", s, err)
	}

	// A new occurrence no suppression names: the secret is shown again.
	write(t, l, scope, occ("r", "aa11", 5, 0, "d.env", 9, "c3"))
	shown("a new occurrence", one, "aa11")
	if got := secretsOf(t, one)["r/aa11"]; got.IgnoredOccurrences != 1 || got.Occurrences != 2 {
		t.Fatalf("a new occurrence: %+v", got)
	}

	// The file no longer names b.env: its marks go; gitleaks:allow stays.
	if n, err := env.Store.ApplyIgnore(ctx, scope, []string{"c1:a.env:r:1"}); err != nil || n != 1 {
		t.Fatalf("apply again: %d, %v", n, err)
	}
	shown("the file changed", one, "aa11", "bb22")
	if n, err := env.Store.ApplyIgnore(ctx, scope, nil); err != nil || n != 0 {
		t.Fatalf("no file: %d, %v", n, err)
	}
	if got := secretsOf(t, store.FleetFilter{ShardID: shardID, IgnoredOnly: true}); len(got) != 1 || got["r/cc33"].Ignored != "gitleaks:allow" {
		t.Fatalf("no file: %+v", got)
	}
}

// The fleet view filters by repository glob, rule, presence, first seen and
// decoding, newest first, a page at a time.
func TestFleetFiltersAndPages(t *testing.T) {
	ctx := context.Background()
	shardID, _ := fleetShard(t)
	var loc string
	if err := env.Store.Pool().QueryRow(ctx, `SELECT location FROM shards WHERE id = $1`, shardID).Scan(&loc); err != nil {
		t.Fatal(err)
	}
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	dec := occ("aws-key", "dd44", 3, 0, "c.txt", 1, "c2")
	dec.Decoded = "base64"
	write(t, l, scope, occ("github-pat", "aa11", 1, 0, "a.env", 1, "c1"), occ("github-oauth", "bb22", 2, 0, "b.env", 1, "c1"))
	write(t, l, scope, dec)
	// Presence: blob 1 at the tip; 2 and 3 not.
	upto, err := env.Store.PresenceBasis(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Finalize(ctx, store.FinalizeInput{Lease: l, ScopeID: scope, Complete: true, Covered: true,
		Presence: &store.Presence{UpTo: upto.UpTo, Tips: map[string]string{"refs/heads/main": "c2"},
			Refs: map[string][][]byte{"refs/heads/main": {{1}}}}}); err != nil {
		t.Fatal(err)
	}
	yes := true
	glob := "*" + loc[len("https://h/"):len(loc)-2] + "/?"
	for _, tt := range []struct {
		name string
		f    store.FleetFilter
		want []string // newest first
	}{
		{"the repository", store.FleetFilter{Repo: glob}, []string{"aws-key", "github-oauth", "github-pat"}},
		{"its name in capitals", store.FleetFilter{Repo: "HTTPS://H/" + loc[len("https://h/"):]}, []string{"aws-key", "github-oauth", "github-pat"}},
		{"another", store.FleetFilter{Repo: glob + "x"}, nil},
		{"rules", store.FleetFilter{Repo: glob, Rules: []string{"github-pat", "github-oauth"}}, []string{"github-oauth", "github-pat"}},
		{"present", store.FleetFilter{Repo: glob, Presence: store.Present}, []string{"github-pat"}},
		{"removed", store.FleetFilter{Repo: glob, Presence: store.Removed}, []string{"aws-key", "github-oauth"}},
		{"decoded", store.FleetFilter{Repo: glob, Decoded: &yes}, []string{"aws-key"}},
		{"since tomorrow", store.FleetFilter{Repo: glob, Since: time.Now().Add(24 * time.Hour)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			xs, err := env.Store.FleetSecrets(ctx, tt.f, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range xs {
				got = append(got, x.RuleID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Pages: two, then one, then none.
	p1, err := env.Store.FleetSecrets(ctx, store.FleetFilter{Repo: glob}, store.Page{Limit: 2})
	if err != nil || len(p1) != 2 {
		t.Fatalf("page 1: %v %v", p1, err)
	}
	p2, err := env.Store.FleetSecrets(ctx, store.FleetFilter{Repo: glob}, store.Page{After: p1[1].Cursor, Limit: 2})
	if err != nil || len(p2) != 1 || p2[0].RuleID != "github-pat" || p2[0].Repository != loc {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	s, err := env.Store.Summary(ctx, store.FleetFilter{Repo: glob}, 1)
	if err != nil || s.Secrets != 3 || s.Repositories != 1 || len(s.ByFamily) != 1 || s.ByFamily[0] != (store.Count{Name: "github", Count: 2}) ||
		len(s.ByRepository) != 1 || s.ByRepository[0] != (store.Count{Name: loc, Count: 3}) {
		t.Fatalf("summary: %+v %v", s, err)
	}
}

// Migration 00033 gives the findings written before it their secrets: the
// fleet view lists them as the per-repository view does.
func TestSecretsBackfilled(t *testing.T) {
	ctx := context.Background()
	st := scratch(t, "m_secrets")
	if err := st.MigrateTo(ctx, 32); err != nil {
		t.Fatal(err)
	}
	id, err := st.EnsureShard(ctx, shard.Spec{Key: "target:bf", Target: target.Target{Location: "https://h/o/bf"}})
	if err != nil {
		t.Fatal(err)
	}
	scope, _ := st.Scope(ctx, id, "p")
	for i, f := range []store.Finding{occ("r", "aa11", 1, 0, "a", 1, "c1"), occ("r", "aa11", 2, 0, "a", 1, "c2"), occ("r", "bb22", 2, 40, "a", 2, "c2")} {
		if _, err := st.Pool().Exec(ctx, `INSERT INTO findings (scope_id, rule_id, blob, start_offset, end_offset, line, path, commit_id,
				secret_hash, preview, secret_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '')`,
			scope, f.RuleID, f.Blob, f.Start+i, f.End, f.Line, f.Path, f.Commit, f.SecretHash, f.Preview); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	xs, err := st.FleetSecrets(ctx, store.FleetFilter{ShardID: id}, store.Page{})
	if err != nil || len(xs) != 2 || xs[0].SecretHash != "bb22" || xs[1].SecretHash != "aa11" || xs[1].Occurrences != 2 || xs[1].Last.Commit != "c2" {
		t.Fatalf("after the migration: %+v %v", xs, err)
	}
}

// A fingerprint names a file inside an archive as gitleaks does:
// archive!file.
func TestIgnoreNamesAFileInAnArchive(t *testing.T) {
	ctx := context.Background()
	shardID, _ := fleetShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "p")
	l := acquire(t, shardID, "owner", time.Minute)
	inJar := occ("r", "ee55", 1, 0, "dist/app.jar", 3, "c1")
	inJar.Archive = "config/app.env"
	write(t, l, scope, inJar, occ("r", "ff66", 2, 0, "config/app.env", 3, "c1"))
	if n, err := env.Store.ApplyIgnore(ctx, scope, []string{"dist/app.jar!config/app.env:r:3"}); err != nil || n != 1 {
		t.Fatalf("apply: %d, %v", n, err)
	}
	if got := secretsOf(t, store.FleetFilter{ShardID: shardID}); len(got) != 1 || got["r/ff66"].RuleID == "" {
		t.Fatalf("shown: %v", got)
	}
}

// A codebase the stale cleanup deletes, and a scan request retention
// retires, take their secrets' triage with them; live ones keep theirs.
func TestCleanupTakesTriageWithTheCodebase(t *testing.T) {
	ctx := context.Background()
	st := cleanupDB(t, "c_triage")
	gone := seedCodebase(t, st, "gone", 31, 1)
	live := seedCodebase(t, st, "live", -1, 1)
	for _, id := range []int64{gone, live, 0, -1} {
		subject := fmt.Sprintf("codebase:%d", id)
		used := 1
		switch id {
		case 0: // a scan request unused for long
			subject, used = "target:old", 100
		case -1: // one used lately
			subject, id = "target:new", 0
		}
		seedShard(t, st, subject, id, used, scopeSeed{"p", 1, 20})
		var scope int64
		if err := st.Pool().QueryRow(ctx, `SELECT s.id FROM scan_scopes s JOIN shards sh ON sh.id = s.shard_id WHERE sh.key = $1`, subject).Scan(&scope); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SetSecretState(ctx, subject, scope, store.SecretKey{RuleID: "r", SecretHash: "s10"},
			store.StateChange{State: store.StateRevoked, Actor: "ann"}); err != nil {
			t.Fatal(err)
		}
	}
	cleanUp(t, st, store.CleanupPlan{StaleBefore: time.Now().Add(-30 * 24 * time.Hour), Now: time.Now(), Batch: 1000,
		Retention: store.Retention{Scans: 90 * 24 * time.Hour}})
	for table, want := range map[string]int64{"secret_states": 2, "secret_state_history": 2, "secrets": 4} {
		if n := sqlCount(t, st, `SELECT count(*) FROM `+table); n != want {
			t.Errorf("%s: %d rows left, want %d (the live codebase's and scan's)", table, n, want)
		}
	}
	if n := sqlCount(t, st, `SELECT count(*) FROM secret_states WHERE subject = $1`, fmt.Sprintf("codebase:%d", live)); n != 1 {
		t.Errorf("the live codebase's state: %d rows", n)
	}
}
