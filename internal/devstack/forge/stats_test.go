package forge

import (
	"bytes"
	"compress/gzip"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
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

// Fetches tells clones (no "have") from incremental fetches, per
// repository, for go-git and the git CLI in both protocols; a client that
// is up to date, or only lists refs, is not counted.
func TestFetchCounting(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	seeded(t, f, "alice", "other")
	work := t.TempDir()
	url := f.CloneURL("alice", "r")

	mustGit(t, work, "-c", "protocol.version=0", "clone", "--quiet", "--mirror", url, "v0")
	mustGit(t, work, "-c", "protocol.version=2", "clone", "--quiet", "--mirror", url, "v2")
	repo, err := git.PlainClone(filepath.Join(work, "gogit"), true, &git.CloneOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	mustGit(t, work, "ls-remote", url)
	if err := repo.Fetch(&git.FetchOptions{}); err != git.NoErrAlreadyUpToDate {
		t.Fatalf("go-git fetch of an unchanged repository: %v", err)
	}
	mustGit(t, filepath.Join(work, "v2"), "-c", "protocol.version=2", "fetch", "--quiet")
	if got, want := f.Fetches()["alice/r"], (Fetches{Full: 3}); got != want {
		t.Fatalf("after three clones: %+v, want %+v", got, want)
	}

	mustCommit(t, f, "alice", "r", "main", map[string]string{"new.txt": "new\n"}, "new")
	mustGit(t, filepath.Join(work, "v0"), "-c", "protocol.version=0", "fetch", "--quiet")
	mustGit(t, filepath.Join(work, "v2"), "-c", "protocol.version=2", "fetch", "--quiet")
	if err := repo.Fetch(&git.FetchOptions{RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Fetches()["alice/r"], (Fetches{Full: 3, Incremental: 3}); got != want {
		t.Fatalf("after three fetches of a new commit: %+v, want %+v", got, want)
	}
	// A commit fetched alone, depth 1, into an empty repository (how a
	// worker verifies a commit) is not a clone.
	mustGit(t, work, "init", "--quiet", "--bare", "verify")
	mustGit(t, filepath.Join(work, "verify"), "-c", "protocol.version=2", "fetch", "--quiet", "--depth=1", url, "main")
	if got, want := f.Fetches()["alice/r"], (Fetches{Full: 3, Incremental: 3, Shallow: 1}); got != want {
		t.Fatalf("after a shallow fetch: %+v, want %+v", got, want)
	}
	if n := len(f.Fetches()); n != 1 {
		t.Fatalf("fetches of %d repositories counted, want 1: %v", n, f.Fetches())
	}
	f.ResetCounts()
	if len(f.Fetches()) != 0 {
		t.Fatal("ResetCounts kept the fetches")
	}
}

func TestFetchKindGzip(t *testing.T) {
	var raw, zipped bytes.Buffer
	raw.WriteString(pktLine("want 0123456789012345678901234567890123456789\n") + "0000" +
		pktLine("have 0123456789012345678901234567890123456789\n") + pktLine("done\n"))
	zw := gzip.NewWriter(&zipped)
	zw.Write(raw.Bytes()) //nolint:errcheck // a bytes.Buffer
	zw.Close()            //nolint:errcheck // a bytes.Buffer
	for _, tc := range []struct {
		name, encoding string
		body           []byte
		want           fetchLines
	}{
		{"plain", "", raw.Bytes(), fetchLines{wants: true, haves: true}},
		{"gzip", "gzip", zipped.Bytes(), fetchLines{wants: true, haves: true}},
		{"gzip unsaid", "", zipped.Bytes(), fetchLines{}},
		{"clone", "", []byte(pktLine("want 0123456789012345678901234567890123456789\n") + "0000" + pktLine("done\n")), fetchLines{wants: true}},
		{"shallow", "", []byte(pktLine("want 0123456789012345678901234567890123456789\n") + pktLine("deepen 1") + "0000" + pktLine("done\n")),
			fetchLines{wants: true, deepens: true}},
		{"ls-refs", "", []byte(pktLine("command=ls-refs\n") + "0001" + pktLine("peel\n") + "0000"), fetchLines{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fetchKind(tc.body, tc.encoding); got != tc.want {
				t.Fatalf("fetchKind = %+v, want %+v", got, tc.want)
			}
		})
	}
}
