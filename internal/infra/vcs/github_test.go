package vcs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/infra/vcs"
)

// go-github against the test forge: a renamed repository is found under
// its old name with its id, new name and creation time.
func TestGitHubRepository(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	before := time.Now().Truncate(time.Second)
	created, err := fg.CreateRepo("alice", "old")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if err := fg.Rename("alice", "old", "new"); err != nil {
		t.Fatal(err)
	}
	gh, err := vcs.NewGitHub(vcs.Host{Name: fg.Host(), GitURL: fg.URL() + "/", APIURL: fg.APIURL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := gh.Repository(context.Background(), "alice", "old")
	if err != nil {
		t.Fatal(err)
	}
	if r.ExternalID != strconv.FormatInt(created.ID, 10) || r.Owner != "alice" || r.Name != "new" || r.DefaultBranch == "" {
		t.Errorf("repository %+v, want id %d at alice/new", r, created.ID)
	}
	if r.CreatedAt.Before(before) || r.CreatedAt.After(after) {
		t.Errorf("created at %v, want between %v and %v", r.CreatedAt, before, after)
	}
	if _, err := gh.Repository(context.Background(), "alice", "missing"); err == nil {
		t.Error("a missing repository was found")
	}
}

// ProvesGone: only a site administrator's token sees every repository of
// the host wherever it went, so that its 404 proves a deletion; the
// owner's or a member's token does not (a repository transferred out of
// their sight answers 404 too), nor does no token.
func TestGitHubProvesGone(t *testing.T) {
	const admin = "ghp_forgeAdminToken0123456789abcdefghijk"
	fg, err := forge.Start(forge.Options{Dir: t.TempDir(), Token: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	alice, err := fg.AddUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember("acme", "alice"); err != nil {
		t.Fatal(err)
	}
	vault, err := fg.CreateRepo("acme", "vault")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.SetPrivate("acme", "vault", true); err != nil {
		t.Fatal(err)
	}
	// What a 404 means: alice, a member, sees acme/vault until it is
	// transferred to an account she is no member of; then it is 404 to
	// her, found by the site administrator.
	if err := fg.CreateOrg("umbrella"); err != nil {
		t.Fatal(err)
	}
	if err := fg.Transfer("acme", "vault", "umbrella"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who, token string
		want       bool
		sees       bool // the transferred repository by id
	}{
		{"alice, a member of the old owner", alice.Token, false, false},
		{"the site administrator", admin, true, true},
		{"no token", "", false, false},
	} {
		gh, err := vcs.NewGitHub(vcs.Host{Name: fg.Host(), GitURL: fg.URL() + "/", APIURL: fg.APIURL(), Token: tc.token}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gh.ProvesGone(context.Background())
		if err != nil || got != tc.want {
			t.Errorf("%s proves a deletion: %v, %v; want %v", tc.who, got, err, tc.want)
		}
		if _, err := gh.RepositoryByID(context.Background(), strconv.FormatInt(vault.ID, 10)); (err == nil) != tc.sees {
			t.Errorf("%s finds the transferred repository by id: %v, want %v", tc.who, err == nil, tc.sees)
		}
	}
	// A token the host rejects proves nothing and says so: 401.
	gh, err := vcs.NewGitHub(vcs.Host{Name: fg.Host(), GitURL: fg.URL() + "/", APIURL: fg.APIURL(), Token: "ghp_expired"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := gh.ProvesGone(context.Background()); err == nil || ok || !vcs.Unauthorized(err) {
		t.Errorf("a rejected token: %v, %v; want a 401", ok, err)
	}
}
