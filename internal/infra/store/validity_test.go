package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"gitfleet/internal/infra/store"
)

// A secret's checks: facts kept through an unknown, revoked when a secret
// once valid is found invalid (even with unknowns between), resolved
// revoked in triage when open, and no longer revoked when it works again;
// one never valid is invalid, not revoked. The fleet filters read them.
func TestValidityTransitions(t *testing.T) {
	ctx := context.Background()
	shardID, subject := fleetShard(t)
	scope, _ := env.Store.Scope(ctx, shardID, "rules-v")
	l := acquire(t, shardID, "owner", time.Minute)
	write(t, l, scope, occ("github-pat", "cc33", 1, 0, "a.env", 1, "c1"), occ("github-pat", "dd44", 1, 40, "a.env", 2, "c1"))
	live := store.SecretKey{RuleID: "github-pat", SecretHash: "cc33"}
	dead := store.SecretKey{RuleID: "github-pat", SecretHash: "dd44"}
	record := func(k store.SecretKey, state, class, facts string) bool {
		t.Helper()
		v := store.Validity{Provider: "github", State: state, Class: class}
		if facts != "" {
			v.Facts = json.RawMessage(facts)
		}
		revoked, err := env.Store.RecordValidity(ctx, subject, scope, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return revoked
	}
	get := func(k store.SecretKey) store.Validity {
		t.Helper()
		vs, err := env.Store.Validities(ctx, []string{subject}, []store.SecretKey{k})
		if err != nil {
			t.Fatal(err)
		}
		return vs[subject][k]
	}
	keys := func(validity ...string) int {
		t.Helper()
		return len(secretsOf(t, store.FleetFilter{ShardID: shardID, Validity: validity}))
	}

	if keys("unchecked") != 2 || keys("valid") != 0 {
		t.Fatalf("before any check: %d unchecked, %d valid", keys("unchecked"), keys("valid"))
	}
	if record(live, "valid", "", `{"account":"octocat"}`) || record(dead, "invalid", "", "") {
		t.Fatal("revoked at the first check")
	}
	if record(live, "unknown", "rate-limited", "") {
		t.Fatal("an unknown revokes")
	}
	if v := get(live); v.State != "unknown" || v.Class != "rate-limited" || string(v.Facts) != `{"account": "octocat"}` || v.ValidAt == nil {
		t.Fatalf("after an unknown: %+v (%s)", v, v.Facts)
	}
	if keys("valid") != 0 || keys("unknown") != 1 || keys("invalid") != 1 || keys("unchecked") != 0 {
		t.Fatalf("filters: valid %d unknown %d invalid %d unchecked %d", keys("valid"), keys("unknown"), keys("invalid"), keys("unchecked"))
	}
	if !record(live, "invalid", "", "") {
		t.Fatal("a secret once valid, found invalid, is not revoked")
	}
	if record(live, "invalid", "", "") {
		t.Fatal("revoked twice")
	}
	if v := get(live); v.RevokedAt == nil {
		t.Fatalf("no revoked_at: %+v", v)
	}
	if v := get(dead); v.RevokedAt != nil {
		t.Fatalf("a secret never valid is revoked: %+v", v)
	}
	if keys("revoked") != 1 {
		t.Fatalf("--validity revoked: %d", keys("revoked"))
	}
	h, err := env.Store.SecretHistory(ctx, subject, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || h[0].State != store.StateRevoked || h[0].Actor != store.ValidityActor {
		t.Fatalf("triage history %+v", h)
	}
	if record(live, "valid", "", `{"account":"octocat"}`) {
		t.Fatal("valid again is revoked")
	}
	if v := get(live); v.RevokedAt != nil || v.State != "valid" {
		t.Fatalf("valid again: %+v", v)
	}
	sum, err := env.Store.SummarizeValidity(ctx, store.FleetFilter{ShardID: shardID, Ignored: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum != (store.ValiditySummary{Valid: 1, Invalid: 1}) {
		t.Fatalf("summary %+v", sum)
	}
}
