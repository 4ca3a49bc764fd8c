package forge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// cloneMem clones url into memory and returns the repository.
func cloneMem(url string, auth transport.AuthMethod) (*git.Repository, error) {
	return git.Clone(memory.NewStorage(), nil, &git.CloneOptions{URL: url, Auth: auth})
}

func headOf(t *testing.T, r *git.Repository) string {
	t.Helper()
	h, err := r.Head()
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	return h.Hash().String()
}

func tokenAuth() *githttp.BasicAuth {
	return &githttp.BasicAuth{Username: "x-access-token", Password: testToken}
}

func TestGoGitClone(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")
	mustCommit(t, f, "alice", "r", "main", map[string]string{"a.txt": "one\n"}, "one")
	sha := mustCommit(t, f, "alice", "r", "main", map[string]string{"dir/b.txt": "two\n"}, "two")

	// On disk, through the ".git" URL.
	dir := t.TempDir()
	repo, err := git.PlainClone(dir, false, &git.CloneOptions{URL: f.CloneURL("alice", "r")})
	if err != nil {
		t.Fatalf("PlainClone: %v", err)
	}
	if got := headOf(t, repo); got != sha {
		t.Errorf("HEAD = %s, want %s", got, sha)
	}
	b, err := os.ReadFile(filepath.Join(dir, "dir", "b.txt"))
	if err != nil || string(b) != "two\n" {
		t.Errorf("dir/b.txt = %q, %v", b, err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil || c.Message != "two" || c.Author.Email != commitEmail || c.NumParents() != 1 {
		t.Errorf("commit = %+v, %v", c, err)
	}

	// In memory, through the URL without ".git" and with other case.
	repo, err = cloneMem(f.URL()+"/ALICE/R", nil)
	if err != nil {
		t.Fatalf("clone without .git: %v", err)
	}
	if got := headOf(t, repo); got != sha {
		t.Errorf("HEAD = %s, want %s", got, sha)
	}
	if n := f.GitRequests(); n < 4 {
		t.Errorf("git requests = %d, want at least 4 (2 per clone)", n)
	}
}

func TestGoGitCloneAfterRenameAndTransfer(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	_, sha := seeded(t, f, "alice", "old")
	if err := f.Rename("alice", "old", "mid"); err != nil {
		t.Fatal(err)
	}
	if err := f.Transfer("alice", "mid", "bob"); err != nil {
		t.Fatal(err)
	}
	f.ResetCounts()
	for _, url := range []string{f.CloneURL("alice", "old"), f.URL() + "/alice/mid", f.CloneURL("bob", "mid")} {
		repo, err := cloneMem(url, nil)
		if err != nil {
			t.Fatalf("clone %s: %v", url, err)
		}
		if got := headOf(t, repo); got != sha {
			t.Errorf("%s: HEAD = %s, want %s", url, got, sha)
		}
	}
	// The first clone went through a git 301 to the new path.
	reqs := f.Requests()
	if len(reqs) < 2 || reqs[0].Status != 301 || reqs[0].Path != "/alice/old.git/info/refs" || reqs[1].Path != "/bob/mid.git/info/refs" {
		t.Errorf("requests = %+v", reqs)
	}
	resp, _ := rawGet(t, f.URL()+"/alice/mid/info/refs?service=git-upload-pack", nil)
	if want := f.URL() + "/bob/mid/info/refs?service=git-upload-pack"; resp.StatusCode != 301 || resp.Header.Get("Location") != want {
		t.Errorf("redirect %d to %q, want 301 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

// fetchSHA fetches sha with depth 1 into a new empty repository.
func fetchSHA(t *testing.T, url, sha string) (*git.Repository, error) {
	t.Helper()
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	err = remote.Fetch(&git.FetchOptions{
		RefSpecs: []config.RefSpec{config.RefSpec(sha + ":refs/heads/x")},
		Depth:    1,
	})
	return repo, err
}

func TestGoGitFetchBySHA(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")
	older := mustCommit(t, f, "alice", "r", "main", map[string]string{"a": "1"}, "one")
	tip := mustCommit(t, f, "alice", "r", "main", map[string]string{"b": "2"}, "two")
	url := f.CloneURL("alice", "r")

	// The tip and a reachable non-tip commit can be fetched by id.
	for _, sha := range []string{tip, older} {
		repo, err := fetchSHA(t, url, sha)
		if err != nil {
			t.Fatalf("fetch %s: %v", sha, err)
		}
		ref, err := repo.Reference("refs/heads/x", true)
		if err != nil || ref.Hash().String() != sha {
			t.Fatalf("refs/heads/x = %v, %v; want %s", ref, err, sha)
		}
		c, err := repo.CommitObject(ref.Hash())
		if err != nil {
			t.Fatal(err)
		}
		// Depth 1: the parent was not transferred.
		if c.NumParents() == 1 {
			if _, err := repo.CommitObject(c.ParentHashes[0]); err == nil {
				t.Errorf("depth-1 fetch of %s also brought its parent", sha)
			}
		}
	}

	// After a force push the old commits are unreachable: "not our ref".
	if _, err := f.ForcePush("alice", "r", "main", map[string]string{"c": "3"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	unknown := strings.Repeat("ab", 20)
	for _, sha := range []string{tip, older, unknown} {
		_, err := fetchSHA(t, url, sha)
		if err == nil || !strings.Contains(err.Error(), "not our ref") {
			t.Errorf("fetch of %s after force push: %v, want an error with \"not our ref\"", sha, err)
		}
	}
}

func TestGitCLI(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	_, sha := seeded(t, f, "alice", "r")
	feature := mustCommit(t, f, "alice", "r", "feature", map[string]string{"f": "f"}, "feature")
	work := t.TempDir()

	out := mustGit(t, work, "ls-remote", f.CloneURL("alice", "r"))
	for _, want := range []string{sha + "\tHEAD", sha + "\trefs/heads/main", feature + "\trefs/heads/feature"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls-remote missing %q:\n%s", want, out)
		}
	}
	// Protocol v0 and v2 both work.
	mustGit(t, work, "-c", "protocol.version=0", "clone", "--quiet", f.CloneURL("alice", "r"), "v0")
	mustGit(t, work, "-c", "protocol.version=2", "clone", "--quiet", "--depth=1", f.URL()+"/alice/r", "v2")
	for _, d := range []string{"v0", "v2"} {
		if got := mustGit(t, filepath.Join(work, d), "rev-parse", "HEAD"); got != sha {
			t.Errorf("%s clone HEAD = %s, want %s", d, got, sha)
		}
	}

	// Clone through an old name.
	if err := f.Rename("alice", "r", "renamed"); err != nil {
		t.Fatal(err)
	}
	mustGit(t, work, "clone", "--quiet", f.CloneURL("alice", "r"), "old")
	if got := mustGit(t, filepath.Join(work, "old"), "rev-parse", "HEAD"); got != sha {
		t.Errorf("clone via old name HEAD = %s", got)
	}

	// Protocol v2 cannot fetch pruned commits either.
	if _, err := f.ForcePush("alice", "renamed", "feature", map[string]string{"g": "g"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	mustGit(t, work, "init", "--quiet", "empty")
	out, err := gitCmd(t, filepath.Join(work, "empty"), "-c", "protocol.version=2", "fetch", f.CloneURL("alice", "renamed"), feature)
	if err == nil || !strings.Contains(out, "not our ref") {
		t.Errorf("v2 fetch of pruned commit: %v\n%s", err, out)
	}

	// Pushing over HTTP is refused.
	v0 := filepath.Join(work, "v0")
	mustGit(t, v0, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--allow-empty", "-q", "-m", "local")
	if out, err := gitCmd(t, v0, "push", f.CloneURL("alice", "renamed"), "HEAD:main"); err == nil {
		t.Errorf("push succeeded:\n%s", out)
	}
	if got := bareGit(t, f, "alice", "renamed", "rev-parse", "main"); got != sha {
		t.Errorf("main moved to %s after refused push", got)
	}
}

func TestGitPrivate(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	_, sha := seeded(t, f, "alice", "secret")
	if err := f.SetPrivate("alice", "secret", true); err != nil {
		t.Fatal(err)
	}
	url := f.CloneURL("alice", "secret")

	_, err := cloneMem(url, nil)
	if !errors.Is(err, transport.ErrAuthenticationRequired) {
		t.Errorf("anonymous clone of private repo: %v, want %v", err, transport.ErrAuthenticationRequired)
	}
	_, err = cloneMem(url, &githttp.BasicAuth{Username: "x", Password: "wrong"})
	if !errors.Is(err, transport.ErrAuthenticationRequired) && !errors.Is(err, transport.ErrAuthorizationFailed) {
		t.Errorf("clone with wrong token: %v", err)
	}
	repo, err := cloneMem(url, tokenAuth())
	if err != nil {
		t.Fatalf("clone with token: %v", err)
	}
	if got := headOf(t, repo); got != sha {
		t.Errorf("HEAD = %s", got)
	}
	// With valid credentials an unknown repository is a plain 404.
	_, err = cloneMem(f.CloneURL("alice", "nothing"), tokenAuth())
	if !errors.Is(err, transport.ErrRepositoryNotFound) {
		t.Errorf("authenticated clone of unknown repo: %v, want %v", err, transport.ErrRepositoryNotFound)
	}
	// Anonymous requests for unknown repositories are challenged, like
	// private ones, so they reveal nothing.
	resp, _ := rawGet(t, f.URL()+"/alice/nothing.git/info/refs?service=git-upload-pack", nil)
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("anonymous unknown repo: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// The git CLI does not prompt (GIT_TERMINAL_PROMPT=0) and fails.
	if out, err := gitCmd(t, t.TempDir(), "ls-remote", url); err == nil {
		t.Errorf("anonymous ls-remote of private repo succeeded: %s", out)
	}
	// A redirect of a private repository is not revealed either.
	if err := f.Rename("alice", "secret", "hidden"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := rawGet(t, url+"/info/refs?service=git-upload-pack", nil); resp.StatusCode != 401 {
		t.Errorf("anonymous old name of private repo: %d", resp.StatusCode)
	}
	if _, err := cloneMem(url, tokenAuth()); err != nil {
		t.Errorf("authenticated clone via old name: %v", err)
	}
}

func TestGitRoutes(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	if err := f.Rename("alice", "r", "r2"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/alice/r2.git/info/refs?service=git-upload-pack", 200},
		{"/alice/r2/info/refs?service=git-upload-pack", 200},
		{"/alice/r2.git/info/refs?service=git-receive-pack", 403},
		{"/alice/r2.git/info/refs", 404}, // dumb HTTP
		{"/alice/r2.git/HEAD", 404},
		{"/alice/r2.git/objects/info/packs", 404},
		{"/alice/r2.git/config", 404},
		{"/alice/r2.git", 404},
		{"/alice", 404},
		{"/", 404},
		{"/alice/r.git/info/refs?service=git-receive-pack", 301},
	} {
		resp, body := rawGet(t, f.URL()+tc.path, nil)
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d, want %d (%s)", tc.path, resp.StatusCode, tc.status, body)
		}
	}
	resp, err := http.Post(f.URL()+"/alice/r2.git/git-receive-pack", "application/x-git-receive-pack-request", strings.NewReader("0000"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("POST git-receive-pack: %d", resp.StatusCode)
	}
	resp, _ = rawGet(t, f.URL()+"/alice/r2.git/info/refs?service=git-upload-pack", nil)
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-advertisement" {
		t.Errorf("info/refs content type %q", ct)
	}
}

// pktLine encodes one pkt-line.
func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func TestGitChunkedRequestBody(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	_, sha := seeded(t, f, "alice", "r")
	body := pktLine("want "+sha+" ofs-delta\n") + "0000" + pktLine("done\n")
	// An io.Reader of unknown length makes net/http send a chunked body,
	// as git does for large requests.
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, body)
		pw.Close()
	}()
	req, err := http.NewRequest("POST", f.CloneURL("alice", "r")+"/git-upload-pack", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(got, []byte("PACK")) {
		t.Errorf("chunked upload-pack: %d, %d bytes, no pack: %q", resp.StatusCode, len(got), got[:min(len(got), 200)])
	}
}

func TestGitDeletedRepo(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	if err := f.Delete("alice", "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := cloneMem(f.CloneURL("alice", "r"), tokenAuth()); !errors.Is(err, transport.ErrRepositoryNotFound) {
		t.Errorf("clone of deleted repo: %v", err)
	}
}
