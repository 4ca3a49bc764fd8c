package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/store"
)

func newUser(t *testing.T, name string, ghID int64) store.User {
	t.Helper()
	u, err := env.Store.PutUser(context.Background(), store.NewUser{Name: name, APIURL: "https://api.test/", Login: name,
		GitHubID: ghID, TokenSealed: []byte("sealed-" + name)})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func names(rs []ghaccount.Repo) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.FullName())
	}
	return out
}

// A refresh replaces the whole view in one transaction: what the new view
// lacks is gone, organizations are shared rows, repositories are per user.
func TestReplaceGitHubView(t *testing.T) {
	ctx := context.Background()
	stamp := time.Now().UnixNano()
	alice := newUser(t, fmt.Sprintf("alice-%d", stamp), stamp)
	bob := newUser(t, fmt.Sprintf("bob-%d", stamp), stamp+1)
	acme := ghaccount.Org{ID: stamp, Login: "acme", Description: "Acme Inc."}
	orgRepo := func(id int64, name string) ghaccount.Repo {
		return ghaccount.Repo{ID: id, Owner: "acme", OwnerID: acme.ID, Name: name, Source: ghaccount.Organization, Visibility: "private"}
	}
	aliceView := ghaccount.View{
		Orgs:  []ghaccount.Org{acme},
		Repos: []ghaccount.Repo{orgRepo(1, "api"), orgRepo(2, "secret"), {ID: 3, Owner: alice.Name, Name: "dots", Source: ghaccount.Personal, Visibility: "public"}},
		Lists: []string{ghaccount.ListOrgs, ghaccount.ListRepos},
		Pages: []ghaccount.Page{{URL: "user/repos?per_page=100", ETag: `"e1"`, Body: []byte("[]")}},
	}
	if err := env.Store.ReplaceGitHubView(ctx, alice.ID, alice.APIURL, aliceView, t0); err != nil {
		t.Fatal(err)
	}
	bobView := ghaccount.View{Orgs: []ghaccount.Org{{ID: acme.ID, Login: "acme"}}, Repos: []ghaccount.Repo{orgRepo(1, "api")},
		Lists: []string{ghaccount.ListOrgs, ghaccount.ListRepos}}
	if err := env.Store.ReplaceGitHubView(ctx, bob.ID, bob.APIURL, bobView, t0); err != nil {
		t.Fatal(err)
	}
	got, err := env.Store.CachedRepos(ctx, alice.ID, ghaccount.Filter{}, "", 0)
	if err != nil || fmt.Sprint(names(got)) != fmt.Sprintf("[acme/api acme/secret %s/dots]", alice.Name) {
		t.Fatalf("alice's repositories = %v, %v", names(got), err)
	}
	if got[0].Source != ghaccount.Organization || got[0].OwnerID != acme.ID || got[0].Visibility != "private" {
		t.Fatalf("alice's acme/api = %+v", got[0])
	}
	// Isolation: bob sees only what his own view holds.
	if got, _ := env.Store.CachedRepos(ctx, bob.ID, ghaccount.Filter{}, "", 0); fmt.Sprint(names(got)) != "[acme/api]" {
		t.Fatalf("bob's repositories = %v", names(got))
	}
	// One global organization row, its description kept from the view that had one.
	orgs, err := env.Store.CachedOrgs(ctx, bob.ID)
	if err != nil || len(orgs) != 1 || orgs[0].Description != "Acme Inc." {
		t.Fatalf("bob's organizations = %+v, %v", orgs, err)
	}
	var rows int
	if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM github_organizations WHERE github_org_id = $1`, acme.ID).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d organization rows for acme, want 1 (%v)", rows, err)
	}
	// Paging by full name.
	page, err := env.Store.CachedRepos(ctx, alice.ID, ghaccount.Filter{Org: "ACME"}, "acme/api", 1)
	if err != nil || fmt.Sprint(names(page)) != "[acme/secret]" {
		t.Fatalf("page after acme/api = %v, %v", names(page), err)
	}

	// A later refresh without acme/secret and without the membership.
	later := t0.Add(time.Hour)
	aliceView.Orgs, aliceView.Repos = nil, aliceView.Repos[2:]
	if err := env.Store.ReplaceGitHubView(ctx, alice.ID, alice.APIURL, aliceView, later); err != nil {
		t.Fatal(err)
	}
	if got, _ := env.Store.CachedRepos(ctx, alice.ID, ghaccount.Filter{}, "", 0); len(got) != 1 {
		t.Fatalf("after the refresh alice has %v", names(got))
	}
	if orgs, _ := env.Store.CachedOrgs(ctx, alice.ID); len(orgs) != 0 {
		t.Fatalf("alice is still a member of %+v", orgs)
	}
	lists, err := env.Store.GitHubLists(ctx, alice.ID)
	if err != nil || !lists[ghaccount.ListRepos].Equal(later) {
		t.Fatalf("lists = %v, %v", lists, err)
	}
	pages, err := env.Store.GitHubPages(ctx, alice.ID)
	if err != nil || pages["user/repos?per_page=100"].ETag != `"e1"` {
		t.Fatalf("pages = %+v, %v", pages, err)
	}

	// A list asked for and never fetched is a miss (zero time).
	if err := env.Store.AskList(ctx, alice.ID, ghaccount.OrgList("Other")); err != nil {
		t.Fatal(err)
	}
	if lists, _ := env.Store.GitHubLists(ctx, alice.ID); !lists["org:other"].IsZero() || len(lists) != 3 {
		t.Fatalf("lists after asking for org:other = %v", lists)
	}

	// The same name with another GitHub account: the old account's view goes.
	if _, err := env.Store.PutUser(ctx, store.NewUser{Name: alice.Name, APIURL: alice.APIURL, Login: "mallory", GitHubID: stamp + 99,
		TokenSealed: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := env.Store.CachedRepos(ctx, alice.ID, ghaccount.Filter{}, "", 0); len(got) != 0 {
		t.Fatalf("another account under alice's name inherits %v", names(got))
	}
	if ok, err := env.Store.RemoveUser(ctx, bob.Name); !ok || err != nil {
		t.Fatalf("remove bob: %t, %v", ok, err)
	}
	if got, _ := env.Store.CachedRepos(ctx, bob.ID, ghaccount.Filter{}, "", 0); len(got) != 0 {
		t.Fatalf("a removed user's view stays: %v", names(got))
	}
}
