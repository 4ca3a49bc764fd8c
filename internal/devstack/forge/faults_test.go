package forge

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

func TestFaultPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	for _, tc := range []struct {
		name    string
		resetIn time.Duration
		token   string
		msg     string
	}{
		{"anonymous, default reset", 0, "", "API rate limit exceeded for 127.0.0.1."},
		{"authenticated, 90s", 90 * time.Second, testToken, "API rate limit exceeded for user ID 1."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove := f.AddFault(Fault{Kind: API, RateLimit: true, ResetIn: tc.resetIn})
			defer remove()
			want := tc.resetIn
			if want == 0 {
				want = time.Minute
			}
			_, _, err := ghClient(t, f, tc.token).Repositories.Get(ctx(t), "alice", "r")
			var rle *github.RateLimitError
			if !errors.As(err, &rle) {
				t.Fatalf("err = %v (%T), want *github.RateLimitError", err, err)
			}
			if rle.Response.StatusCode != 403 || rle.Rate.Remaining != 0 || rle.Rate.Limit != 5000 {
				t.Errorf("status %d rate %+v", rle.Response.StatusCode, rle.Rate)
			}
			if d := time.Until(rle.Rate.Reset.Time); d < want-2*time.Second || d > want+2*time.Second {
				t.Errorf("reset in %v, want about %v", d, want)
			}
			if !strings.HasPrefix(rle.Message, tc.msg) {
				t.Errorf("message %q, want prefix %q", rle.Message, tc.msg)
			}
		})
	}
}

func TestFaultSecondaryRateLimit(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	for _, tc := range []struct {
		retryAfter time.Duration
		want       time.Duration
	}{
		{30 * time.Second, 30 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second}, // whole seconds, rounded up
	} {
		remove := f.AddFault(Fault{Kind: API, RetryAfter: tc.retryAfter})
		_, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r")
		remove()
		var are *github.AbuseRateLimitError
		if !errors.As(err, &are) {
			t.Fatalf("err = %v (%T), want *github.AbuseRateLimitError", err, err)
		}
		if are.RetryAfter == nil || *are.RetryAfter != tc.want {
			t.Errorf("RetryAfter = %v, want %v", are.RetryAfter, tc.want)
		}
		if are.Response.StatusCode != 403 || !strings.Contains(are.Message, "You have exceeded a secondary rate limit") {
			t.Errorf("status %d message %q", are.Response.StatusCode, are.Message)
		}
	}
}

func TestFaultStatus(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	for _, status := range []int{500, 502, 503, 404, 422} {
		remove := f.AddFault(Fault{Kind: API, Status: status})
		_, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r")
		remove()
		er := wantStatus(t, http.StatusText(status), err, status)
		if er.Message != http.StatusText(status) {
			t.Errorf("%d: message %q", status, er.Message)
		}
	}
	// Removed: back to normal.
	if _, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r"); err != nil {
		t.Errorf("after removing faults: %v", err)
	}
}

func TestFaultTimesAndRemove(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	gh := ghClient(t, f, "")
	f.AddFault(Fault{Kind: API, Status: 500, Times: 2})
	var got []int
	for i := 0; i < 4; i++ {
		_, resp, _ := gh.Repositories.Get(ctx(t), "alice", "r")
		got = append(got, resp.StatusCode)
	}
	if want := []int{500, 500, 200, 200}; !equalInts(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if n := faultCount(f); n != 0 {
		t.Errorf("%d faults left after they were used up", n)
	}

	remove := f.AddFault(Fault{Kind: API, Status: 502})
	_, resp, _ := gh.Repositories.Get(ctx(t), "alice", "r")
	remove()
	remove() // idempotent
	_, resp2, _ := gh.Repositories.Get(ctx(t), "alice", "r")
	if resp.StatusCode != 502 || resp2.StatusCode != 200 {
		t.Errorf("statuses %d then %d, want 502 then 200", resp.StatusCode, resp2.StatusCode)
	}

	f.AddFault(Fault{Status: 500})
	f.AddFault(Fault{Status: 502})
	f.ClearFaults()
	if _, _, err := gh.Repositories.Get(ctx(t), "alice", "r"); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFaultMatching(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	seeded(t, f, "bob", "s")
	api := func(path string) string { return f.APIURL() + path }
	for _, tc := range []struct {
		name  string
		fault Fault
		url   string
		hit   bool
	}{
		{"kind any hits api", Fault{Status: 500}, api("repos/alice/r"), true},
		{"kind any hits git", Fault{Status: 500}, f.URL() + "/alice/r.git/info/refs?service=git-upload-pack", true},
		{"kind api skips git", Fault{Kind: API, Status: 500}, f.URL() + "/alice/r.git/info/refs?service=git-upload-pack", false},
		{"kind git skips api", Fault{Kind: Git, Status: 500}, api("repos/alice/r"), false},
		{"kind git hits git", Fault{Kind: Git, Status: 500}, f.URL() + "/alice/r.git/info/refs?service=git-upload-pack", true},
		{"path prefix hit", Fault{Path: "/api/v3/repos/alice/", Status: 500}, api("repos/alice/r"), true},
		{"path prefix miss", Fault{Path: "/api/v3/repos/alice/", Status: 500}, api("repos/bob/s"), false},
		{"regexp hit", Fault{PathRE: regexp.MustCompile(`^/api/v3/repos/[^/]+/s$`), Status: 500}, api("repos/bob/s"), true},
		{"regexp miss", Fault{PathRE: regexp.MustCompile(`^/api/v3/repos/[^/]+/s$`), Status: 500}, api("repos/alice/r"), false},
		{"regexp wins over path", Fault{Path: "/nothing", PathRE: regexp.MustCompile(`/r$`), Status: 500}, api("repos/alice/r"), true},
		{"method miss", Fault{Method: "POST", Status: 500}, api("repos/alice/r"), false},
		{"method hit", Fault{Method: "get", Status: 500}, api("repos/alice/r"), true},
	} {
		remove := f.AddFault(tc.fault)
		resp, _ := rawGet(t, tc.url, nil)
		remove()
		if hit := resp.StatusCode == 500; hit != tc.hit {
			t.Errorf("%s: status %d, want hit=%v", tc.name, resp.StatusCode, tc.hit)
		}
	}
}

func TestFaultGitClone(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	_, sha := seeded(t, f, "alice", "r")
	remove := f.AddFault(Fault{Kind: Git, Method: "POST", Status: 502, Times: 1})
	defer remove()
	if _, err := cloneMem(f.CloneURL("alice", "r"), nil); err == nil {
		t.Error("clone succeeded despite a 502 on git-upload-pack")
	}
	repo, err := cloneMem(f.CloneURL("alice", "r"), nil)
	if err != nil {
		t.Fatalf("second clone: %v", err)
	}
	if headOf(t, repo) != sha {
		t.Error("wrong HEAD")
	}
	// Git faults do not touch the API.
	f.AddFault(Fault{Kind: Git, Status: 500})
	if _, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r"); err != nil {
		t.Errorf("API hit by git fault: %v", err)
	}
}

func TestFaultLatency(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	f.AddFault(Fault{Kind: API, Latency: 150 * time.Millisecond, Times: 1})
	f.AddFault(Fault{Kind: API, Latency: 100 * time.Millisecond, Times: 1})
	start := time.Now()
	_, resp, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("latency-only faults changed the answer: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("request took %v, want at least the summed latency 250ms", d)
	}
	if n := faultCount(f); n != 0 {
		t.Errorf("%d latency faults outlived Times", n)
	}
}

func TestFaultBeforeHook(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, _ := seeded(t, f, "alice", "r")
	var mu sync.Mutex
	var seen []string
	// Rename the repository between a clone and the API lookup.
	f.AddFault(Fault{Kind: API, Times: 1, Before: func(req *http.Request) {
		mu.Lock()
		seen = append(seen, req.URL.Path)
		mu.Unlock()
		if err := f.Rename("alice", "r", "moved"); err != nil {
			t.Errorf("rename in hook: %v", err)
		}
	}})
	if _, err := cloneMem(f.CloneURL("alice", "r"), nil); err != nil {
		t.Fatalf("clone: %v", err)
	}
	repo, _, err := ghClient(t, f, "").Repositories.Get(ctx(t), "alice", "r")
	if err != nil {
		t.Fatal(err)
	}
	if repo.GetName() != "moved" || repo.GetID() != r.ID {
		t.Errorf("got %s (%d), want the renamed repo", repo.GetFullName(), repo.GetID())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "/api/v3/repos/alice/r" {
		t.Errorf("hook saw %v", seen)
	}
}

func TestFaultCounted(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	f.AddFault(Fault{Status: 500})
	f.ResetCounts()
	rawGet(t, f.APIURL()+"repos/alice/r", nil)
	rawGet(t, f.URL()+"/alice/r.git/info/refs?service=git-upload-pack", nil)
	if f.APIRequests() != 1 || f.GitRequests() != 1 {
		t.Errorf("counts api=%d git=%d, want 1 and 1", f.APIRequests(), f.GitRequests())
	}
	reqs := f.Requests()
	if len(reqs) != 2 || reqs[0].Status != 500 || reqs[1].Status != 500 || reqs[0].Kind != API || reqs[1].Kind != Git {
		t.Errorf("log %+v", reqs)
	}
}

func faultCount(f *Forge) int {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	return len(f.faults.list)
}
