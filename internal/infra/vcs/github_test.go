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

// SeesOwner: a token sees every repository of its own user, of the
// organizations its user is a member of, and of everybody when it is a
// site administrator's; no token sees no private repository.
func TestGitHubSeesOwner(t *testing.T) {
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
	if _, err := fg.AddUser("bob"); err != nil {
		t.Fatal(err)
	}
	if err := fg.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	if err := fg.CreateOrg("umbrella"); err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember("acme", "alice"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who, token string
		owner      string
		want       bool
	}{
		{"alice", alice.Token, "alice", true},
		{"alice", alice.Token, "ALICE", true},
		{"alice", alice.Token, "acme", true},
		{"alice", alice.Token, "umbrella", false},
		{"alice", alice.Token, "bob", false},
		{"the site administrator", admin, "bob", true},
		{"the site administrator", admin, "umbrella", true},
		{"no token", "", "acme", false},
	} {
		gh, err := vcs.NewGitHub(vcs.Host{Name: fg.Host(), GitURL: fg.URL() + "/", APIURL: fg.APIURL(), Token: tc.token}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gh.SeesOwner(context.Background(), tc.owner)
		if err != nil || got != tc.want {
			t.Errorf("%s sees %s: %v, %v; want %v", tc.who, tc.owner, got, err, tc.want)
		}
	}
	// A token the host rejects proves nothing and says so.
	gh, err := vcs.NewGitHub(vcs.Host{Name: fg.Host(), GitURL: fg.URL() + "/", APIURL: fg.APIURL(), Token: "ghp_expired"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := gh.SeesOwner(context.Background(), "acme"); err == nil || ok {
		t.Errorf("a rejected token: %v, %v; want an error", ok, err)
	}
}
