package identity

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	api := &Repository{ExternalID: "100", Owner: "alice", Name: "repo"}
	named := &Codebase{ID: 1, ExternalID: "100", Owner: "alice", Name: "repo", LastCommitSHA: "c1"}
	namedNoCommit := &Codebase{ID: 1, ExternalID: "100", Owner: "alice", Name: "repo"}
	namedLower := &Codebase{ID: 1, ExternalID: "100", Owner: "ALICE", Name: "Repo", LastCommitSHA: "c1"}
	other := &Codebase{ID: 2, ExternalID: "200", Owner: "alice", Name: "repo", LastCommitSHA: "c9"}
	movedLive := &Codebase{ID: 3, ExternalID: "100", Owner: "alice", Name: "old", LastCommitSHA: "c1"}
	movedStale := &Codebase{ID: 4, ExternalID: "100", Owner: "bob", Name: "repo", Stale: true}
	sameStale := &Codebase{ID: 5, ExternalID: "100", Owner: "alice", Name: "repo", Stale: true}

	tests := []struct {
		name    string
		facts   Facts
		want    Decision
		wantErr error
	}{
		{"A new", Facts{API: api}, Decision{Case: CaseNew}, nil},
		{"B verified needs no API", Facts{ByName: named, Verified: true}, Decision{Case: CaseSame, Target: named}, nil},
		{"B verified ignores API", Facts{ByName: named, Verified: true, API: &Repository{ExternalID: "999"}}, Decision{Case: CaseSame, Target: named}, nil},
		{"B nothing collected yet, API same id", Facts{ByName: namedNoCommit, API: api, ByExternalID: namedNoCommit}, Decision{Case: CaseSame, Target: namedNoCommit}, nil},
		{"unverified without API", Facts{ByName: named}, Decision{}, ErrNeedAPI},
		{"nothing without API", Facts{}, Decision{}, ErrNeedAPI},
		{"D rename", Facts{API: api, ByExternalID: movedLive}, Decision{Case: CaseMoved, Target: movedLive, Rename: true}, nil},
		{"D letter case only", Facts{ByName: namedLower, API: api, ByExternalID: namedLower}, Decision{Case: CaseForcePush, Target: namedLower, Rename: true}, nil},
		{"E recreated", Facts{ByName: other, API: api}, Decision{Case: CaseReplaced, Retire: other}, nil},
		{"E name taken by a moved repo", Facts{ByName: other, API: api, ByExternalID: movedLive}, Decision{Case: CaseReplaced, Retire: other, Target: movedLive, Rename: true}, nil},
		{"E name taken by a returning repo", Facts{ByName: other, API: api, ByExternalID: movedStale}, Decision{Case: CaseReplaced, Retire: other, Target: movedStale, Rename: true, Unstale: true}, nil},
		{"F force push", Facts{ByName: named, API: api, ByExternalID: named}, Decision{Case: CaseForcePush, Target: named}, nil},
		{"R came back elsewhere", Facts{API: api, ByExternalID: movedStale}, Decision{Case: CaseReturned, Target: movedStale, Rename: true, Unstale: true}, nil},
		{"R came back at the same name", Facts{API: api, ByExternalID: sameStale}, Decision{Case: CaseReturned, Target: sameStale, Unstale: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decide(tt.facts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decide() error = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecideRejectsInconsistentFacts(t *testing.T) {
	api := &Repository{ExternalID: "100", Owner: "alice", Name: "repo"}
	for name, f := range map[string]Facts{
		"stale row by name":    {ByName: &Codebase{ID: 1, Stale: true}, API: api},
		"by-id row of another": {API: api, ByExternalID: &Codebase{ID: 2, ExternalID: "7"}},
	} {
		if _, err := Decide(f); err == nil || errors.Is(err, ErrNeedAPI) {
			t.Errorf("%s: Decide() error = %v, want an inconsistency error", name, err)
		}
	}
}

func TestNeedsAPI(t *testing.T) {
	c := &Codebase{ID: 1}
	for _, tt := range []struct {
		byName   *Codebase
		verified bool
		want     bool
	}{{nil, false, true}, {nil, true, true}, {c, false, true}, {c, true, false}} {
		if got := NeedsAPI(tt.byName, tt.verified); got != tt.want {
			t.Errorf("NeedsAPI(%v, %v) = %v", tt.byName != nil, tt.verified, got)
		}
	}
}

func TestCheckRace(t *testing.T) {
	created := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	api := Repository{ExternalID: "1", Owner: "Alice", Name: "Repo", CreatedAt: created}
	for _, tt := range []struct {
		owner, name string
		clonedAt    time.Time
		race        bool
	}{
		{"alice", "repo", created.Add(time.Hour), false}, // case differs only
		{"Alice", "Repo", created, false},                // created in the clone's second
		{"Alice", "Repo", created.Add(500 * time.Millisecond), false},
		{"Alice", "Repo", time.Time{}, false}, // clone time unknown (older runs)
		{"alice", "old", created.Add(time.Hour), true},
		{"bob", "repo", created.Add(time.Hour), true},
		{"Alice", "Repo", created.Add(-time.Second), true}, // deleted and created anew after the clone
	} {
		err := CheckRace(tt.owner, tt.name, tt.clonedAt, api)
		if got := errors.Is(err, ErrRaceConditionDetected); got != tt.race || (err != nil && !tt.race) {
			t.Errorf("CheckRace(%s/%s, cloned at %v) = %v, want race %v", tt.owner, tt.name, tt.clonedAt, err, tt.race)
		}
	}
	if err := CheckRace("alice", "repo", created, Repository{Owner: "alice", Name: "repo"}); err != nil {
		t.Errorf("creation time unknown: %v", err)
	}
}

func TestCasesDescribed(t *testing.T) {
	for _, c := range []Case{CaseNew, CaseSame, CaseMoved, CaseReplaced, CaseForcePush, CaseReturned} {
		if c.Describe() == "unknown" {
			t.Errorf("case %s has no description", c)
		}
	}
}

func TestExplainRefusal(t *testing.T) {
	cb := &Codebase{ID: 1, ExternalID: "7", Owner: "o", Name: "app"}
	here := &Repository{ExternalID: "7", Owner: "O", Name: "App"}
	moved := &Repository{ExternalID: "7", Owner: "p", Name: "app"}
	private := &Repository{ExternalID: "7", Owner: "o", Name: "app", Private: true}
	other := &Repository{ExternalID: "9", Owner: "o", Name: "app"}
	for _, tc := range []struct {
		name            string
		byName          *Codebase
		byID, byNameAPI *Repository
		provesGone      bool
		want            Refusal
		wantRepo        *Repository
	}{
		{"codebase, id unknown to a site administrator", cb, nil, nil, true, RefusedGone, nil},
		{"codebase, id unknown to a site administrator, name holds another", cb, nil, other, true, RefusedGone, nil},
		// Deleted, made private, or transferred to an account the token
		// cannot see (the owner's installation, a member's token): the
		// API's 404 proves nothing.
		{"codebase, id unknown to a token that sees only some accounts", cb, nil, nil, false, RefusedInaccessible, nil},
		{"codebase, id unknown to such a token, name holds another", cb, nil, other, false, RefusedInaccessible, nil},
		{"codebase, renamed", cb, moved, nil, false, RefusedMoved, moved},
		{"codebase, private", cb, private, nil, true, RefusedPrivate, private},
		{"codebase, public and here", cb, here, nil, false, RefusedDenied, here},
		{"no codebase, unknown", nil, nil, nil, false, RefusedNotFound, nil},
		{"no codebase, unknown to a site administrator", nil, nil, nil, true, RefusedNotFound, nil},
		{"no codebase, private", nil, nil, private, false, RefusedPrivate, private},
		{"no codebase, moved", nil, nil, moved, false, RefusedMoved, moved},
		{"no codebase, public", nil, nil, here, false, RefusedDenied, here},
	} {
		got, repo := ExplainRefusal("o", "app", tc.byName, tc.byID, tc.byNameAPI, tc.provesGone)
		if got != tc.want || repo != tc.wantRepo {
			t.Errorf("%s: %s %+v, want %s %+v", tc.name, got, repo, tc.want, tc.wantRepo)
		}
	}
}
