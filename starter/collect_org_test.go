package main

import (
	"fmt"
	"strings"
	"testing"

	"gitfleet/internal/devstack/forge"
)

// collect --org waits for the collections it started, says how many have
// ended as they end, and counts how they ended; one that failed is named
// and makes the command fail. --no-wait says they were started and how to
// follow them.
func TestCollectOrgWaitsForTheCollections(t *testing.T) {
	n := seq.Add(1)
	login, org := fmt.Sprintf("orgadmin%d", n), fmt.Sprintf("orgc%d", n)
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
	for _, r := range []string{"api", "site", "blocked"} {
		if _, err := fg.CreateRepo(org, r); err != nil {
			t.Fatal(err)
		}
		if _, err := fg.Commit(org, r, "main", map[string]string{"README.md": r + "\n"}, "init"); err != nil {
			t.Fatal(err)
		}
	}
	// Git refuses one repository while the API shows it: that collection fails.
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + org + "/blocked", Status: 403})()
	if out, errOut, code := starterIn(t, fu.Token+"\n", "users", "add", login); code != 0 {
		t.Fatalf("users add: exit %d\n%s%s", code, out, errOut)
	}

	// An organization GitHub does not know (here the user's own login).
	if out, errOut, code := starter(t, "github", "repos", "--user", login, "--org", login); code != exitUsage ||
		!strings.Contains(errOut, "no organization "+login) {
		t.Fatalf("github repos --org <a user>: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code := starter(t, "collect", "--org", org, "--user", login, "--no-wait")
	if code != 0 || !strings.Contains(out, "Started") || !strings.Contains(out, `WorkflowId STARTS_WITH "collect:`+fg.Host()+"/"+org+`/"`) {
		t.Fatalf("collect --org --no-wait: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = starter(t, "collect", "--org", org, "--user", login)
	for _, want := range []string{"waiting for the collections", "FAILED    " + fg.Host() + "/" + org + "/blocked",
		"Done: 3 collections of " + org + ": 2 collected, 1 failed, 0 parked, 0 cancelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code != exitFailed || !strings.Contains(errOut, "1 repository of "+org+" did not collect") || t.Failed() {
		t.Fatalf("collect --org: exit %d\n%s%s", code, out, errOut)
	}
}
