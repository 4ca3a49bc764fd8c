package forge

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

// wantStatus asserts err is a go-github *ErrorResponse with this status.
func wantStatus(t *testing.T, what string, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("%s: err = %v (%T), want *github.ErrorResponse %d", what, err, err, status)
	}
	if er.Response.StatusCode != status {
		t.Fatalf("%s: status %d, want %d (%v)", what, er.Response.StatusCode, status, err)
	}
	return er
}

func TestAPIGetRepo(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, _ := seeded(t, f, "Alice", "Project")
	gh := ghClient(t, f, "")

	for _, name := range [][2]string{{"Alice", "Project"}, {"alice", "project"}, {"ALICE", "PROJECT"}} {
		repo, resp, err := gh.Repositories.Get(ctx(t), name[0], name[1])
		if err != nil {
			t.Fatalf("Get(%v): %v", name, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d", resp.StatusCode)
		}
		checks := map[string][2]any{
			"id":             {repo.GetID(), r.ID},
			"name":           {repo.GetName(), "Project"},
			"full_name":      {repo.GetFullName(), "Alice/Project"},
			"owner.login":    {repo.GetOwner().GetLogin(), "Alice"},
			"owner.type":     {repo.GetOwner().GetType(), "User"},
			"owner.id":       {repo.GetOwner().GetID(), int64(firstOwnerID)},
			"private":        {repo.GetPrivate(), false},
			"visibility":     {repo.GetVisibility(), "public"},
			"default_branch": {repo.GetDefaultBranch(), "main"},
			"clone_url":      {repo.GetCloneURL(), f.CloneURL("Alice", "Project")},
			"html_url":       {repo.GetHTMLURL(), f.URL() + "/Alice/Project"},
			"url":            {repo.GetURL(), f.APIURL() + "repos/Alice/Project"},
			"node_id":        {repo.GetNodeID(), base64.StdEncoding.EncodeToString([]byte("010:Repository" + strconv.FormatInt(r.ID, 10)))},
			"fork":           {repo.GetFork(), false},
			"archived":       {repo.GetArchived(), false},
		}
		for field, c := range checks {
			if c[0] != c[1] {
				t.Errorf("%v: %s = %v, want %v", name, field, c[0], c[1])
			}
		}
		for field, ts := range map[string]github.Timestamp{"created_at": repo.GetCreatedAt(), "updated_at": repo.GetUpdatedAt(), "pushed_at": repo.GetPushedAt()} {
			if time.Since(ts.Time) > time.Minute || time.Since(ts.Time) < -time.Minute {
				t.Errorf("%s = %v, want about now", field, ts)
			}
		}
		if repo.GetSize() <= 0 {
			t.Errorf("size = %d", repo.GetSize())
		}
		if repo.Permissions != nil {
			t.Errorf("anonymous request got permissions %v", repo.Permissions)
		}
	}

	// By id.
	repo, _, err := gh.Repositories.GetByID(ctx(t), r.ID)
	if err != nil || repo.GetFullName() != "Alice/Project" {
		t.Errorf("GetByID = %v, %v", repo.GetFullName(), err)
	}
	_, _, err = gh.Repositories.GetByID(ctx(t), 999999)
	wantStatus(t, "GetByID unknown", err, 404)
}

func TestAPINotFound(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	gh := ghClient(t, f, "")
	_, _, err := gh.Repositories.Get(ctx(t), "nobody", "nothing")
	er := wantStatus(t, "unknown repo", err, 404)
	if er.Message != "Not Found" || !strings.HasPrefix(er.DocumentationURL, "https://docs.github.com/") {
		t.Errorf("error body = %+v", er)
	}
	// Unknown endpoints and invalid names are plain 404s too.
	for _, p := range []string{"nope", "repos/a", "repos/a/b/c/d/e", "repositories/abc", "repos/a%2fb/c"} {
		resp, body := rawGet(t, f.APIURL()+p, nil)
		var eb errorBody
		if resp.StatusCode != 404 || json.Unmarshal([]byte(body), &eb) != nil || eb.Message != "Not Found" {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		if resp.Header.Get("X-RateLimit-Limit") == "" {
			t.Errorf("GET %s: no rate-limit headers", p)
		}
	}
}

func TestAPIRenameFollowsRedirect(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, _ := seeded(t, f, "alice", "old")
	if err := f.Rename("alice", "old", "new"); err != nil {
		t.Fatal(err)
	}
	gh := ghClient(t, f, "")
	f.ResetCounts()
	repo, _, err := gh.Repositories.Get(ctx(t), "alice", "old")
	if err != nil {
		t.Fatal(err)
	}
	if repo.GetID() != r.ID || repo.GetName() != "new" || repo.GetFullName() != "alice/new" {
		t.Errorf("after rename got %d %s", repo.GetID(), repo.GetFullName())
	}
	if n := f.APIRequests(); n != 2 {
		t.Errorf("API requests = %d, want 2 (301 + 200)", n)
	}
	reqs := f.Requests()
	want := []Request{
		{Kind: API, Method: "GET", Path: "/api/v3/repos/alice/old", Status: 301},
		{Kind: API, Method: "GET", Path: "/api/v3/repositories/" + strconv.FormatInt(r.ID, 10), Status: 200},
	}
	if len(reqs) != 2 || reqs[0] != want[0] || reqs[1] != want[1] {
		t.Errorf("requests = %+v, want %+v", reqs, want)
	}

	// The raw redirect looks like GitHub's.
	resp, body := rawGet(t, f.APIURL()+"repos/ALICE/OLD?x=1", nil)
	loc := f.APIURL() + "repositories/" + strconv.FormatInt(r.ID, 10) + "?x=1"
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != loc {
		t.Errorf("redirect: %d Location %q, want 301 %q", resp.StatusCode, resp.Header.Get("Location"), loc)
	}
	var eb errorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Message != "Moved Permanently" || eb.URL != loc || eb.DocumentationURL == "" {
		t.Errorf("redirect body %s (%v)", body, err)
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "" {
		t.Error("redirect has no rate-limit headers")
	}
}

func TestAPIRedirectChainAndTransfer(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, _ := seeded(t, f, "alice", "a")
	gh := ghClient(t, f, "")
	steps := []struct {
		do   func() error
		olds []string // names that must now lead to want
		want string
	}{
		{func() error { return f.Rename("alice", "a", "b") }, []string{"alice/a"}, "alice/b"},
		{func() error { return f.Rename("alice", "b", "c") }, []string{"alice/a", "alice/b"}, "alice/c"},
		{func() error { return f.Transfer("alice", "c", "org-1") }, []string{"alice/a", "alice/b", "alice/c"}, "org-1/c"},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		for _, old := range s.olds {
			o, n, _ := strings.Cut(old, "/")
			repo, _, err := gh.Repositories.Get(ctx(t), o, n)
			if err != nil || repo.GetFullName() != s.want || repo.GetID() != r.ID || repo.GetOwner().GetLogin() != strings.Split(s.want, "/")[0] {
				t.Errorf("after -> %s: Get(%s) = %s (id %d), %v", s.want, old, repo.GetFullName(), repo.GetID(), err)
			}
		}
	}
}

func TestAPIDeleteAndRecreate(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, _ := seeded(t, f, "alice", "x")
	if err := f.Rename("alice", "x", "y"); err != nil {
		t.Fatal(err)
	}
	gh := ghClient(t, f, "")
	if err := f.Delete("alice", "y"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"x", "y"} {
		_, _, err := gh.Repositories.Get(ctx(t), "alice", name)
		er := wantStatus(t, "after delete "+name, err, 404)
		if er.Message != "Not Found" {
			t.Errorf("message %q", er.Message)
		}
	}
	_, _, err := gh.Repositories.GetByID(ctx(t), r.ID)
	wantStatus(t, "deleted id", err, 404)

	nr := mustCreate(t, f, "alice", "y")
	repo, _, err := gh.Repositories.Get(ctx(t), "alice", "y")
	if err != nil {
		t.Fatal(err)
	}
	if repo.GetID() == r.ID || repo.GetID() != nr.ID {
		t.Errorf("re-created repo id %d, old %d, want new %d", repo.GetID(), r.ID, nr.ID)
	}

	// Creating at a name that redirects takes the name over.
	mustCreate(t, f, "bob", "one")
	if err := f.Rename("bob", "one", "two"); err != nil {
		t.Fatal(err)
	}
	fresh := mustCreate(t, f, "bob", "one")
	repo, _, err = gh.Repositories.Get(ctx(t), "bob", "one")
	if err != nil || repo.GetID() != fresh.ID || repo.GetName() != "one" {
		t.Errorf("Get(bob/one) = %d %s %v, want the new repo %d", repo.GetID(), repo.GetName(), err, fresh.ID)
	}
}

func TestAPIPrivate(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, _ := seeded(t, f, "alice", "secret")
	if err := f.SetPrivate("alice", "secret", true); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename("alice", "secret", "hidden"); err != nil {
		t.Fatal(err)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:"+testToken))
	for _, tc := range []struct {
		name   string
		header string // Authorization
		path   string
		status int
	}{
		{"anonymous", "", "repos/alice/hidden", 404},
		{"anonymous old name does not leak a redirect", "", "repos/alice/secret", 404},
		{"anonymous by id", "", "repositories/" + strconv.FormatInt(r.ID, 10), 404},
		{"bearer", "Bearer " + testToken, "repos/alice/hidden", 200},
		{"token scheme", "token " + testToken, "repos/alice/hidden", 200},
		{"basic", basic, "repos/alice/hidden", 200},
		{"bearer old name", "Bearer " + testToken, "repos/alice/secret", 301},
		{"bearer by id", "Bearer " + testToken, "repositories/" + strconv.FormatInt(r.ID, 10), 200},
		{"wrong token", "Bearer nope", "repos/alice/hidden", 401},
		{"wrong token on public path", "token nope", "repos/x/y", 401},
		{"garbage basic", "Basic !!!", "repos/alice/hidden", 401},
		{"unknown scheme", "Digest x", "repos/alice/hidden", 401},
	} {
		hdr := map[string]string{}
		if tc.header != "" {
			hdr["Authorization"] = tc.header
		}
		resp, body := rawGet(t, f.APIURL()+tc.path, hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.status, body)
		}
		if tc.status == 401 && !strings.Contains(body, `"Bad credentials"`) {
			t.Errorf("%s: body %s", tc.name, body)
		}
	}

	// And through go-github.
	_, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "hidden")
	wantStatus(t, "anonymous go-github", err, 404)
	repo, _, err := ghClient(t, f, testToken).Repositories.Get(ctx(t), "alice", "secret")
	if err != nil {
		t.Fatal(err)
	}
	if !repo.GetPrivate() || repo.GetVisibility() != "private" || repo.GetName() != "hidden" || !repo.GetPermissions()["pull"] {
		t.Errorf("private repo = private:%v visibility:%q name:%q perms:%v", repo.GetPrivate(), repo.GetVisibility(), repo.GetName(), repo.GetPermissions())
	}
	_, _, err = ghClient(t, f, "wrong").Repositories.Get(ctx(t), "alice", "hidden")
	if er := wantStatus(t, "wrong token go-github", err, 401); er.Message != "Bad credentials" {
		t.Errorf("message %q", er.Message)
	}

	// Back to public: visible to everyone.
	if err := f.SetPrivate("alice", "hidden", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "hidden"); err != nil {
		t.Errorf("public again: %v", err)
	}
}

func TestAPINoTokenConfigured(t *testing.T) {
	t.Parallel()
	f := newForge(t, func(o *Options) { o.Token = "" })
	seeded(t, f, "alice", "r")
	if err := f.SetPrivate("alice", "r", true); err != nil {
		t.Fatal(err)
	}
	// Credentials are ignored: nothing is 401, and private stays hidden.
	_, _, err := ghClient(t, f, "whatever").Repositories.Get(ctx(t), "alice", "r")
	wantStatus(t, "private without configured token", err, 404)
}

func TestAPIRateLimitHeaders(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	gh := ghClient(t, f, "")
	var last int
	for i := 0; i < 3; i++ {
		_, resp, err := gh.Repositories.Get(ctx(t), "alice", "r")
		if err != nil {
			t.Fatal(err)
		}
		rate := resp.Rate
		if rate.Limit != 5000 {
			t.Errorf("limit %d", rate.Limit)
		}
		if rate.Remaining != 5000-(i+1) {
			t.Errorf("request %d: remaining %d, want %d", i, rate.Remaining, 5000-(i+1))
		}
		if d := time.Until(rate.Reset.Time); d < 59*time.Minute || d > 61*time.Minute {
			t.Errorf("reset in %v, want about an hour", d)
		}
		if i > 0 && rate.Remaining != last-1 {
			t.Errorf("remaining did not decrease: %d after %d", rate.Remaining, last)
		}
		last = rate.Remaining
		if resp.Header.Get("X-RateLimit-Resource") != "core" || resp.Header.Get("X-RateLimit-Used") != strconv.Itoa(i+1) {
			t.Errorf("headers %v", resp.Header)
		}
	}
	// GET /rate_limit reports the state and does not count.
	for i := 0; i < 2; i++ {
		rl, _, err := gh.RateLimit.Get(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if rl.GetCore().Remaining != 4997 || rl.GetCore().Limit != 5000 {
			t.Errorf("rate_limit core = %+v", rl.GetCore())
		}
	}
}

func TestAPIRateLimitExhausted(t *testing.T) {
	t.Parallel()
	f := newForge(t, func(o *Options) { o.RateLimit = 3 })
	seeded(t, f, "alice", "r")
	for i := 0; i < 3; i++ {
		if _, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// A fresh client, so go-github's own bookkeeping does not short-cut.
	_, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r")
	var rle *github.RateLimitError
	if !errors.As(err, &rle) {
		t.Fatalf("4th request: %v (%T), want *github.RateLimitError", err, err)
	}
	if rle.Rate.Remaining != 0 || rle.Rate.Limit != 3 || !strings.HasPrefix(rle.Message, "API rate limit exceeded for ") {
		t.Errorf("rate limit error = %+v %q", rle.Rate, rle.Message)
	}
	// GET /rate_limit still answers, and reports the exhaustion.
	rl, _, err := ghClient(t, f, "").RateLimit.Get(ctx(t))
	if err != nil || rl.GetCore().Remaining != 0 || rl.GetCore().Limit != 3 {
		t.Errorf("rate_limit when exhausted: %+v, %v", rl.GetCore(), err)
	}
	f.ResetRateLimit()
	_, resp, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r")
	if err != nil || resp.Rate.Remaining != 2 {
		t.Errorf("after ResetRateLimit: %v, remaining %d", err, resp.Rate.Remaining)
	}
}

func TestAPIRootAndHandlerMounted(t *testing.T) {
	t.Parallel()
	f, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	if f.URL() != "" || f.APIURL() != "" || f.CloneURL("a", "b") != "" {
		t.Errorf("unstarted forge has URLs %q %q", f.URL(), f.APIURL())
	}
	seeded(t, f, "alice", "r")
	gh, err := github.NewClient(nil).WithEnterpriseURLs(srv.URL+"/api/v3/", srv.URL+"/api/v3/")
	if err != nil {
		t.Fatal(err)
	}
	repo, _, err := gh.Repositories.Get(ctx(t), "alice", "r")
	if err != nil {
		t.Fatal(err)
	}
	if repo.GetCloneURL() != srv.URL+"/alice/r.git" {
		t.Errorf("clone_url %q, want one built from the request host %q", repo.GetCloneURL(), srv.URL)
	}
	resp, body := rawGet(t, srv.URL+"/api/v3/", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "rate_limit_url") {
		t.Errorf("API root: %d %s", resp.StatusCode, body)
	}
}

func TestNewRequiresDir(t *testing.T) {
	t.Parallel()
	if _, err := Start(Options{}); err == nil {
		t.Error("Start without Dir succeeded")
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	f, err := Start(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seeded(t, f, "alice", "r")
	url := f.APIURL() + "repos/alice/r"
	if resp, _ := rawGet(t, url, nil); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := noRedirect.Get(url); err == nil {
		t.Error("server still answering after Close")
	}
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v3/repos/alice/r", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("handler after Close: %d", rec.Code)
	}
}
