package forge

import (
	"strconv"
	"testing"
)

func TestRequestCounting(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	if err := f.Rename("alice", "r", "s"); err != nil {
		t.Fatal(err)
	}
	f.ResetCounts()
	if f.APIRequests() != 0 || f.GitRequests() != 0 || len(f.Requests()) != 0 {
		t.Fatal("ResetCounts did not reset")
	}

	gh := ghClient(t, f, "")
	if _, _, err := gh.Repositories.Get(ctx(t), "alice", "s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Repositories.Get(ctx(t), "alice", "r"); err != nil { // 301 + 200
		t.Fatal(err)
	}
	_, _, _ = gh.Repositories.Get(ctx(t), "alice", "nope")             // 404
	if _, err := cloneMem(f.CloneURL("alice", "r"), nil); err != nil { // 301 + info/refs + upload-pack
		t.Fatal(err)
	}
	if got := f.APIRequests(); got != 4 {
		t.Errorf("API requests = %d, want 4", got)
	}
	if got := f.GitRequests(); got != 3 {
		t.Errorf("git requests = %d, want 3", got)
	}
	want := []Request{
		{API, "GET", "/api/v3/repos/alice/s", "", 200},
		{API, "GET", "/api/v3/repos/alice/r", "", 301},
		{API, "GET", "/api/v3/repositories/1000", "", 200},
		{API, "GET", "/api/v3/repos/alice/nope", "", 404},
		{Git, "GET", "/alice/r.git/info/refs", "service=git-upload-pack", 301},
		{Git, "GET", "/alice/s.git/info/refs", "service=git-upload-pack", 200},
		{Git, "POST", "/alice/s.git/git-upload-pack", "", 200},
	}
	got := f.Requests()
	if len(got) != len(want) {
		t.Fatalf("log has %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("log[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if API.String() != "api" || Git.String() != "git" || Any.String() != "any" {
		t.Error("Kind.String")
	}

	f.ResetCounts()
	if f.APIRequests() != 0 || f.GitRequests() != 0 || len(f.Requests()) != 0 {
		t.Error("ResetCounts did not reset")
	}
}

func TestRequestLogBounded(t *testing.T) {
	t.Parallel()
	f := newForge(t, func(o *Options) { o.RequestLogSize = 5 })
	for i := 0; i < 12; i++ {
		rawGet(t, f.APIURL()+"x/"+strconv.Itoa(i), nil)
	}
	got := f.Requests()
	if len(got) != 5 {
		t.Fatalf("log has %d entries, want 5", len(got))
	}
	for i, r := range got {
		if want := "/api/v3/x/" + strconv.Itoa(7+i); r.Path != want {
			t.Errorf("log[%d] = %s, want %s (the most recent, oldest first)", i, r.Path, want)
		}
	}
	if f.APIRequests() != 12 {
		t.Errorf("counter = %d, want 12 (not bounded)", f.APIRequests())
	}
	f.ResetCounts()
	rawGet(t, f.APIURL()+"after", nil)
	if got := f.Requests(); len(got) != 1 || got[0].Path != "/api/v3/after" {
		t.Errorf("after reset: %+v", got)
	}
}
