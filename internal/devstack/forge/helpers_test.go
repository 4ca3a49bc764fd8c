package forge

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

const testToken = "ghp_forgeTestToken0123456789"

// newForge starts a forge on a temporary directory; it is closed when the
// test ends.
func newForge(t *testing.T, mod ...func(*Options)) *Forge {
	t.Helper()
	opts := Options{Dir: t.TempDir(), Token: testToken, Logf: t.Logf}
	for _, m := range mod {
		m(&opts)
	}
	f, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

func mustCreate(t *testing.T, f *Forge, owner, name string) Repo {
	t.Helper()
	r, err := f.CreateRepo(owner, name)
	if err != nil {
		t.Fatalf("CreateRepo(%s/%s): %v", owner, name, err)
	}
	return r
}

func mustCommit(t *testing.T, f *Forge, owner, name, branch string, files map[string]string, msg string) string {
	t.Helper()
	sha, err := f.Commit(owner, name, branch, files, msg)
	if err != nil {
		t.Fatalf("Commit(%s/%s %s): %v", owner, name, branch, err)
	}
	if len(sha) != 40 {
		t.Fatalf("Commit returned %q, want a 40-hex commit id", sha)
	}
	return sha
}

// seeded creates owner/name with one commit on main and returns its id.
func seeded(t *testing.T, f *Forge, owner, name string) (Repo, string) {
	t.Helper()
	r := mustCreate(t, f, owner, name)
	sha := mustCommit(t, f, owner, name, "main", map[string]string{"README.md": "# " + name + "\n"}, "initial")
	return r, sha
}

// ghClient is a go-github client for the forge; token "" means anonymous.
func ghClient(t *testing.T, f *Forge, token string) *github.Client {
	t.Helper()
	c, err := github.NewClient(nil).WithEnterpriseURLs(f.APIURL(), f.APIURL())
	if err != nil {
		t.Fatalf("WithEnterpriseURLs: %v", err)
	}
	if token != "" {
		c = c.WithAuthToken(token)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// noRedirect is an HTTP client that returns redirects instead of following.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// rawGet does a GET without following redirects and returns the response
// with its body read.
func rawGet(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp, buf.String()
}

// gitCmd runs the git CLI isolated from the user's configuration, with
// prompts disabled.
func gitCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitCmd(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// bareGit runs git plumbing on a forge repository's bare directory.
func bareGit(t *testing.T, f *Forge, owner, name string, args ...string) string {
	t.Helper()
	dir, err := f.GitDir(owner, name)
	if err != nil {
		t.Fatalf("GitDir: %v", err)
	}
	return mustGit(t, dir, append([]string{"--git-dir", dir}, args...)...)
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
