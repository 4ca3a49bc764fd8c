package workflows_test

import (
	"context"
	"strings"
	"testing"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/store"
)

// A token GitHub refuses (401: revoked) is marked on the user at the
// first refresh that gets the 401; the cache keeps serving what it held,
// with a message saying when and what to do; later refreshes fail with the
// same message without a request to GitHub; replacing the token (PutUser,
// as `starter users add` does) clears the mark and the refresh works.
func TestGitHubCacheRefusedToken(t *testing.T) {
	ctx := context.Background()
	o := owner(t)
	bob := addGitHubUser(t, o+"-bob")
	createRepo(t, bob.gh.Login, "dots")
	c := ghCache()
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, false); err != nil || names(l.Repos) != bob.gh.Login+"/dots" {
		t.Fatalf("first read: %q, %v", names(l.Repos), err)
	}
	// Revoked upstream: the stored token gets 401 from now on.
	fresh, err := fg.RotateToken(bob.gh.Login)
	if err != nil {
		t.Fatal(err)
	}
	createRepo(t, bob.gh.Login, "later")

	want := "GitHub refused user " + bob.Name + "'s token (401: revoked or expired) at "
	hint := "run `starter users add " + bob.Name + "` with a new token"
	refused := func(what string) {
		t.Helper()
		l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, true)
		if err != nil || l.RefreshErr == nil || !strings.Contains(l.RefreshErr.Error(), want) || !strings.Contains(l.RefreshErr.Error(), hint) {
			t.Fatalf("%s: %v / %v; want the cache as it was and %q ... %q", what, err, l.RefreshErr, want, hint)
		}
		if names(l.Repos) != bob.gh.Login+"/dots" {
			t.Fatalf("%s: the cache serves %q, want what it held", what, names(l.Repos))
		}
	}
	mark := len(fg.Requests())
	refused("the refresh that gets the 401")
	if n := unauthorized(mark); n == 0 {
		t.Fatal("the first refresh after the revocation made no request that got 401")
	}
	u, err := env.Store.UserByName(ctx, bob.Name)
	if err != nil || u.TokenRefusedAt == nil || u.TokenRefusedReason == "" {
		t.Fatalf("the user after the 401: %+v, %v; want the token marked refused", u, err)
	}
	first := *u.TokenRefusedAt

	// Tried no more: no request, the same message, the first time kept.
	mark = len(fg.Requests())
	refused("a later refresh")
	if n := apiCalls(mark, "user/orgs") + apiCalls(mark, "user/repos") + unauthorized(mark); n != 0 {
		t.Fatalf("a later refresh made %d requests with the refused token, want none", n)
	}
	if u, err := env.Store.UserByName(ctx, bob.Name); err != nil || u.TokenRefusedAt == nil || !u.TokenRefusedAt.Equal(first) {
		t.Fatalf("the user after a later refresh: %+v, %v; want the first refusal's time %s", u, err, first)
	}

	// A new token clears it.
	u2, err := env.Store.PutUser(ctx, store.NewUser{Name: bob.Name, APIURL: fg.APIURL(), Login: fresh.Login,
		GitHubID: fresh.ID, TokenSealed: tokenBox.Seal([]byte(fresh.Token), store.TokenContext(bob.Name))})
	if err != nil || u2.TokenRefusedAt != nil || u2.TokenRefusedReason != "" {
		t.Fatalf("users add with a new token: %+v, %v; want the refusal cleared", u2, err)
	}
	if l, err := c.Repos(ctx, bob.Name, ghaccount.Filter{}, true); err != nil || l.RefreshErr != nil ||
		names(l.Repos) != bob.gh.Login+"/dots "+bob.gh.Login+"/later" {
		t.Fatalf("refresh with the new token: %q, %v / %v", names(l.Repos), err, l.RefreshErr)
	}
}

// unauthorized counts the forge's API answers 401 since a point of the
// request log.
func unauthorized(since int) int {
	n := 0
	for _, r := range fg.Requests()[since:] {
		if r.Kind == forge.API && r.Status == 401 {
			n++
		}
	}
	return n
}
