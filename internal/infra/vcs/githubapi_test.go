package vcs

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/errclass"
)

func TestTokenSafe(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://api.github.com/", true},
		{"https://ghe.example.com/api/v3/", true},
		{"http://127.0.0.1:7480/api/v3/", true},
		{"http://[::1]:7480/api/v3/", true},
		{"http://localhost:7480/api/v3/", true},
		{"http://forge.localhost/api/v3/", true},
		{"http://ghe.example.com/api/v3/", false},
		{"http://10.0.0.5/api/v3/", false},
	} {
		err := tokenSafe(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("tokenSafe(%s) = %v, want ok=%t", tc.url, err, tc.ok)
		}
	}
	h := Host{Name: "ghe.example.com", APIURL: "http://ghe.example.com/api/v3/", GitURL: "http://ghe.example.com/"}
	if _, err := NewAccount(h, "t0ken", AccountOptions{}); err == nil || !strings.Contains(err.Error(), EnvAllowPlainHTTPToken) {
		t.Errorf("a token over plain http to another machine: %v, want a refusal naming %s", err, EnvAllowPlainHTTPToken)
	}
	h.AllowPlainHTTPToken = true
	if _, err := NewAccount(h, "t0ken", AccountOptions{}); err != nil {
		t.Errorf("explicitly allowed: %v", err)
	}
}

// Requests say who sends them and ask for the stable media type, never a
// retired preview; list pages carry the stored validators.
func TestRequestHeadersAndConditionalPages(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		switch {
		case r.URL.Path == "/api/v3/repos/o/r":
			w.Write([]byte(`{"id": 1, "name": "r", "owner": {"login": "o", "id": 2}}`))
		case r.Header.Get("If-None-Match") == `"v1"`:
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("ETag", `"v1"`)
			w.Write([]byte(`[{"id": 3, "name": "x", "owner": {"login": "acme", "id": 4, "type": "Organization"}, "private": true}]`))
		}
	}))
	defer srv.Close()
	h := Host{Name: "h.test", APIURL: srv.URL + "/api/v3/", GitURL: srv.URL + "/", Token: "tok-a"}
	gh, err := NewGitHub(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gh.Repository(context.Background(), "o", "r"); err != nil {
		t.Fatal(err)
	}
	a, err := NewAccount(h, "tok-b", AccountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pages, unchanged, err := a.FetchList(context.Background(), "/user/repos", "user/repos", ListOptions{})
	if err != nil || len(pages) != 1 || unchanged != 0 {
		t.Fatalf("first fetch: %d pages, %d unchanged, %v", len(pages), unchanged, err)
	}
	stored := map[string]ghaccount.Page{pages[0].URL: pages[0]}
	again, unchanged, err := a.FetchList(context.Background(), "/user/repos", "user/repos", ListOptions{Stored: stored})
	if err != nil || unchanged != 1 || string(again[0].Body) != string(pages[0].Body) {
		t.Fatalf("second fetch: %v unchanged=%d err=%v", again, unchanged, err)
	}
	repos, err := ParseRepos(again[0])
	if err != nil || len(repos) != 1 || repos[0].Source != ghaccount.Organization || repos[0].Visibility != "private" {
		t.Fatalf("parsed %+v, %v", repos, err)
	}
	for _, hd := range seen {
		if ua := hd.Get("User-Agent"); !strings.HasPrefix(ua, "gitfleet/") {
			t.Errorf("User-Agent %q", ua)
		}
		if acc := hd.Get("Accept"); acc != "application/vnd.github+json" {
			t.Errorf("Accept %q, want the stable media type", acc)
		}
	}
}

// A rate-limited token sends nothing until the limit lifts, then goes on.
func TestRateLimitHoldsTheToken(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	reset := time.Now().Add(time.Hour)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if n == 1 {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"message": "API rate limit exceeded"}`))
			return
		}
		w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	h := Host{Name: "h.test", APIURL: srv.URL + "/api/v3/", GitURL: srv.URL + "/"}
	a, err := NewAccount(h, "tok-limited", AccountOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = a.FetchList(context.Background(), "/user/repos", "user/repos", ListOptions{})
	c := errclass.Classify(err)
	if c.Class != errclass.Retryable || c.Reason != errclass.ReasonRateLimited || c.RetryAfter < 59*time.Minute {
		t.Fatalf("rate limited: %+v (%v)", c, err)
	}
	_, _, err = a.FetchList(context.Background(), "/user/repos", "user/repos", ListOptions{})
	if c := errclass.Classify(err); c.Reason != errclass.ReasonRateLimited || requests != 1 {
		t.Fatalf("while limited: %v after %d requests, want no request sent", err, requests)
	}
	now = reset.Add(time.Second)
	if _, _, err := a.FetchList(context.Background(), "/user/repos", "user/repos", ListOptions{}); err != nil || requests != 2 {
		t.Fatalf("after the reset: %v after %d requests", err, requests)
	}
}

// A list takes the pages a refresh saved since it began without asking
// again, tells of each page it fetches, and ends with an error when a
// server links page after page without end.
func TestFetchListResumesAndEnds(t *testing.T) {
	var requests atomic.Int32
	endless := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page == 0 {
			page = 1
		}
		if page < 3 || endless {
			w.Header().Set("Link", fmt.Sprintf(`<%s/api/v3/user/repos?per_page=100&page=%d>; rel="next"`, "http://"+r.Host, page+1))
		}
		fmt.Fprintf(w, `[{"id": %d, "name": "r%d", "owner": {"login": "me", "id": 1, "type": "User"}}]`, page, page)
	}))
	defer srv.Close()
	a, err := NewAccount(Host{Name: "h.test", APIURL: srv.URL + "/api/v3/", GitURL: srv.URL + "/"}, "tok-resume", AccountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var told []string
	first, _, err := a.FetchList(ctx, "/user/repos", "user/repos", ListOptions{Fetched: func(p ghaccount.Page) error {
		told = append(told, p.URL)
		return nil
	}})
	if err != nil || len(first) != 3 || len(told) != 3 || requests.Load() != 3 {
		t.Fatalf("first: %d pages, told %v, %d requests, %v", len(first), told, requests.Load(), err)
	}
	// The attempt before this one saved the first two pages since it began.
	began := first[0].FetchedAt
	stored := map[string]ghaccount.Page{first[0].URL: first[0], first[1].URL: first[1]}
	for _, tc := range []struct {
		name     string
		since    time.Time
		requests int32
	}{
		{"resumed", began, 1},                              // only the third page
		{"saved before it began", began.Add(time.Hour), 3}, // all again, conditionally
	} {
		requests.Store(0)
		pages, _, err := a.FetchList(ctx, "/user/repos", "user/repos", ListOptions{Stored: stored, FreshSince: tc.since})
		if err != nil || len(pages) != 3 || requests.Load() != tc.requests {
			t.Errorf("%s: %d pages, %d requests, %v; want 3 pages in %d requests", tc.name, len(pages), requests.Load(), err, tc.requests)
		}
	}

	defer func(n int) { maxListPages = n }(maxListPages)
	maxListPages, endless = 10, true
	requests.Store(0)
	if _, _, err := a.FetchList(ctx, "/user/repos", "user/repos", ListOptions{}); err == nil || requests.Load() != 10 {
		t.Fatalf("endless pages: %v after %d requests; want an error after 10", err, requests.Load())
	}
}
