package forge

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-github/v66/github"
)

func fullNames(rs []*github.Repository) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.GetFullName())
	}
	slices.Sort(out)
	return out
}

// Two users in one organization, a private repository restricted to one of
// them: each sees what GitHub would show, in every endpoint and over git.
func TestVisibilityMatrix(t *testing.T) {
	f := newForge(t)
	ctx := context.Background()
	alice, err := f.AddUser("alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := f.AddUser("bob")
	if err := f.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if err := f.AddMember("acme", u); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][2]string{{"acme", "api"}, {"acme", "secret"}, {"acme", "site"}, {"alice", "dots"}, {"bob", "notes"}} {
		mustCreate(t, f, r[0], r[1])
	}
	for _, r := range [][2]string{{"acme", "api"}, {"acme", "secret"}, {"bob", "notes"}} {
		if err := f.SetPrivate(r[0], r[1], true); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SetRepoAccess("acme", "secret", "alice"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user      User
		userRepos []string
		orgRepos  []string
	}{
		{alice, []string{"acme/api", "acme/secret", "acme/site", "alice/dots"}, []string{"acme/api", "acme/secret", "acme/site"}},
		{bob, []string{"acme/api", "acme/site", "bob/notes"}, []string{"acme/api", "acme/site"}},
	} {
		gh := ghClient(t, f, tc.user.Token)
		me, _, err := gh.Users.Get(ctx, "")
		if err != nil || me.GetLogin() != tc.user.Login || me.GetID() != tc.user.ID {
			t.Fatalf("GET /user as %s = %v, %v", tc.user.Login, me, err)
		}
		rs, _, err := gh.Repositories.ListByAuthenticatedUser(ctx, nil)
		if err != nil || fmt.Sprint(fullNames(rs)) != fmt.Sprint(tc.userRepos) {
			t.Errorf("%s: /user/repos = %v, %v; want %v", tc.user.Login, fullNames(rs), err, tc.userRepos)
		}
		rs, _, err = gh.Repositories.ListByOrg(ctx, "acme", nil)
		if err != nil || fmt.Sprint(fullNames(rs)) != fmt.Sprint(tc.orgRepos) {
			t.Errorf("%s: /orgs/acme/repos = %v, %v; want %v", tc.user.Login, fullNames(rs), err, tc.orgRepos)
		}
		orgs, _, err := gh.Organizations.List(ctx, "", nil)
		if err != nil || len(orgs) != 1 || orgs[0].GetLogin() != "acme" {
			t.Errorf("%s: /user/orgs = %v, %v", tc.user.Login, orgs, err)
		}
	}
	// Hidden from bob everywhere: the API's single repository and git.
	if _, resp, err := ghClient(t, f, bob.Token).Repositories.Get(ctx, "acme", "secret"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob sees acme/secret: %v", err)
	}
	// A revoked membership takes the organization's private repositories away.
	if err := f.RemoveMember("acme", "bob"); err != nil {
		t.Fatal(err)
	}
	rs, _, _ := ghClient(t, f, bob.Token).Repositories.ListByAuthenticatedUser(ctx, nil)
	if fmt.Sprint(fullNames(rs)) != "[bob/notes]" {
		t.Errorf("bob after leaving acme: %v", fullNames(rs))
	}
	if _, resp, err := ghClient(t, f, "").Users.Get(ctx, ""); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET /user: %v", err)
	}
	if _, resp, err := ghClient(t, f, "ghp_wrong").Users.Get(ctx, ""); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token GET /user: %v", err)
	}
	if _, resp, err := ghClient(t, f, alice.Token).Organizations.Get(ctx, "nope"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown org: %v", err)
	}
}

// 250 repositories come in three pages of 100 with GitHub's Link header;
// an unchanged page answers 304 and costs no quota; a change shows.
func TestPaginationAndConditionalRequests(t *testing.T) {
	f := newForge(t, func(o *Options) { o.RateLimit = 1000 })
	ctx := context.Background()
	u, _ := f.AddUser("carol")
	if err := f.CreateOrg("big"); err != nil {
		t.Fatal(err)
	}
	f.AddMember("big", "carol")
	for i := range 250 {
		mustCreate(t, f, "big", fmt.Sprintf("r%03d", i))
	}
	gh := ghClient(t, f, u.Token)
	opt := &github.RepositoryListByAuthenticatedUserOptions{ListOptions: github.ListOptions{PerPage: 100}}
	var all []*github.Repository
	var etags []string
	pages := 0
	for {
		rs, resp, err := gh.Repositories.ListByAuthenticatedUser(ctx, opt)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		all = append(all, rs...)
		etags = append(etags, resp.Header.Get("ETag"))
		if pages == 1 && resp.LastPage != 3 {
			t.Fatalf("first page says the last is %d, want 3", resp.LastPage)
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if pages != 3 || len(all) != 250 || all[0].GetFullName() != "big/r000" || all[249].GetFullName() != "big/r249" {
		t.Fatalf("%d pages, %d repositories", pages, len(all))
	}
	before := f.RateRemaining(u.Token)
	req, _ := gh.NewRequest("GET", "user/repos?per_page=100", nil)
	req.Header.Set("If-None-Match", etags[0])
	resp, err := gh.BareDo(ctx, req)
	if resp == nil || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional request: %v, %v; want 304", resp, err)
	}
	if after := f.RateRemaining(u.Token); after != before {
		t.Fatalf("a 304 cost quota: %d → %d", before, after)
	}
	if err := f.SetArchived("big", "r000", true); err != nil {
		t.Fatal(err)
	}
	req, _ = gh.NewRequest("GET", "user/repos?per_page=100", nil)
	req.Header.Set("If-None-Match", etags[0])
	if resp, err := gh.BareDo(ctx, req); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == etags[0] {
		t.Fatalf("after a change: %v, %v", resp, err)
	}
	if f.RateRemaining(u.Token) != before-1 || f.RateRemaining("") != 1000 {
		t.Fatalf("quota: %d for the token (want %d), %d anonymous", f.RateRemaining(u.Token), before-1, f.RateRemaining(""))
	}
}
