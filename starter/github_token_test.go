package main

import (
	"fmt"
	"strings"
	"testing"
)

// usersRow is the users list line of a user.
func usersRow(t *testing.T, name string) string {
	t.Helper()
	out, errOut, code := starter(t, "users", "list")
	if code != 0 {
		t.Fatalf("users list: exit %d\n%s%s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return line
		}
	}
	t.Fatalf("users list has no %s:\n%s", name, out)
	return ""
}

// A token GitHub refuses (401: revoked) shows in users list from the
// refresh that got the 401 until users add replaces it; the refresh says
// so and what to do, and the cache shows what it held.
func TestUsersListShowsARefusedToken(t *testing.T) {
	login := fmt.Sprintf("revoked%d", seq.Add(1))
	fu, err := fg.AddUser(login)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fg.CreateRepo(login, "one"); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := starterIn(t, fu.Token+"\n", "users", "add", login); code != 0 {
		t.Fatalf("users add: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := starter(t, "github", "repos", "--user", login); code != 0 || !strings.Contains(out, login+"/one") {
		t.Fatalf("github repos: exit %d\n%s%s", code, out, errOut)
	}
	if row := usersRow(t, login); !strings.HasSuffix(strings.TrimSpace(row), "  ok") {
		t.Fatalf("users list before the revocation: %q, want TOKEN ok", row)
	}

	fresh, err := fg.RotateToken(login) // the stored token is revoked
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fg.CreateRepo(login, "two"); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"the refresh that gets the 401", "a later refresh"} {
		out, errOut, code := starter(t, "github", "repos", "--user", login, "--refresh")
		if code != exitFailed || !strings.Contains(out, "1 repository") || !strings.Contains(out, login+"/one") ||
			!strings.Contains(errOut, "GitHub refused user "+login+"'s token (401: revoked or expired)") ||
			!strings.Contains(errOut, "run `starter users add "+login+"` with a new token") {
			t.Fatalf("github repos --refresh, %s: exit %d\n%s%s", what, code, out, errOut)
		}
	}
	row := usersRow(t, login)
	if !strings.Contains(row, " refused 20") || !strings.Contains(row, "UTC: run starter users add "+login+" with a new token") {
		t.Fatalf("users list after the 401: %q, want TOKEN refused, when, and what to do", row)
	}

	if out, errOut, code := starterIn(t, fresh.Token+"\n", "users", "add", login); code != 0 {
		t.Fatalf("users add with a new token: exit %d\n%s%s", code, out, errOut)
	}
	if row := usersRow(t, login); !strings.HasSuffix(strings.TrimSpace(row), "  ok") {
		t.Fatalf("users list after users add: %q, want TOKEN ok", row)
	}
	if out, errOut, code := starter(t, "github", "repos", "--user", login, "--refresh"); code != 0 || !strings.Contains(out, "2 repositories") {
		t.Fatalf("github repos --refresh with the new token: exit %d\n%s%s", code, out, errOut)
	}
}

// collect --org lists from the user's cache and says how old it is; a
// repository created upstream since is collected with --refresh (issue
// 35: 30 of 31 collected).
func TestCollectOrgRefresh(t *testing.T) {
	n := seq.Add(1)
	login, org := fmt.Sprintf("orgfresh%d", n), fmt.Sprintf("orgf%d", n)
	fu, err := fg.AddUser(login)
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(org, login); err != nil {
		t.Fatal(err)
	}
	repo := func(name string) {
		t.Helper()
		if _, err := fg.CreateRepo(org, name); err != nil {
			t.Fatal(err)
		}
		if _, err := fg.Commit(org, name, "main", map[string]string{"README.md": name + "\n"}, "init"); err != nil {
			t.Fatal(err)
		}
	}
	repo("api")
	repo("site")
	if out, errOut, code := starterIn(t, fu.Token+"\n", "users", "add", login); code != 0 {
		t.Fatalf("users add: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := starter(t, "collect", "--refresh", org+"/api"); code != exitUsage || !strings.Contains(errOut, "--refresh goes with --org") {
		t.Errorf("collect --refresh without --org: exit %d\n%s", code, errOut)
	}

	collect := func(what string, args ...string) string {
		t.Helper()
		out, errOut, code := starter(t, append([]string{"collect", "--org", org, "--user", login}, args...)...)
		if code != 0 {
			t.Fatalf("collect --org %s: exit %d\n%s%s", what, code, out, errOut)
		}
		return out
	}
	out := collect("(cold: fetched)")
	if !strings.Contains(out, "Done: 2 collections of "+org+": 2 collected") || strings.Contains(out, "listed from the cache") {
		t.Fatalf("collect --org on a cold cache:\n%s", out)
	}
	repo("new") // created upstream after the cache was filled
	out = collect("(from the cache)")
	if !strings.Contains(out, "Done: 2 collections of "+org+": 2 collected") ||
		!strings.Contains(out, "2 repositories in "+login+"'s GitHub cache (listed from the cache, cached ") ||
		!strings.Contains(out, "; --refresh to fetch it anew)") {
		t.Fatalf("collect --org from the cache: want 2 collected and how old the listing is\n%s", out)
	}
	out = collect("--refresh", "--refresh")
	if !strings.Contains(out, "3 repositories in "+login+"'s GitHub cache (cached just now)") ||
		!strings.Contains(out, "Done: 3 collections of "+org+": 3 collected") {
		t.Fatalf("collect --org --refresh: want the new repository collected\n%s", out)
	}
}
