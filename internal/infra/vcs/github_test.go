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
