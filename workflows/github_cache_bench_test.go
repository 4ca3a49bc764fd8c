package workflows_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/workflows"
)

// BenchmarkGitHubCache measures the GitHub cache against the forge, for one
// user with 1,000 repositories (10 pages of 100): cache hits from the
// internal API (goal p99 < 5 ms), a cold refresh, a refresh of the
// unchanged account (goal: no quota, all 304) and 100 concurrent cold
// callers (goal: 10 upstream requests for the repository list).
func BenchmarkGitHubCache(b *testing.B) {
	ctx := context.Background()
	stamp := time.Now().UnixNano() % 1_000_000_000
	newUser := func(tag string) ghUser { return addGitHubUser(b, fmt.Sprintf("bench%d-%s", stamp, tag)) }
	u := newUser("a")
	org := fmt.Sprintf("bench%d-org", stamp)
	if err := fg.CreateOrg(org); err != nil {
		b.Fatal(err)
	}
	if err := fg.AddMember(org, u.gh.Login); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if _, err := fg.CreateRepo(org, fmt.Sprintf("r%04d", i)); err != nil {
			b.Fatal(err)
		}
	}
	c := ghCache()

	start := time.Now()
	res, err := workflows.RunGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID)
	if err != nil || res.Repos != 1000 {
		b.Fatalf("cold refresh: %+v, %v", res, err)
	}
	cold := time.Since(start)

	var lat []time.Duration
	for range 1000 {
		t0 := time.Now()
		l, err := c.Repos(ctx, u.Name, ghaccount.Filter{}, false)
		if err != nil || len(l.Repos) != 1000 || l.Refreshed {
			b.Fatalf("hit: %d repositories, refreshed %t, %v", len(l.Repos), l.Refreshed, err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)

	quota := fg.RateRemaining(u.gh.Token)
	start = time.Now()
	res, err = workflows.RunGitHubCacheRefresh(ctx, env.Client, u.Name, u.ID)
	if err != nil {
		b.Fatal(err)
	}
	unchanged := time.Since(start)
	spent := quota - fg.RateRemaining(u.gh.Token)

	// A second member of the organization, read cold by 100 callers at once.
	v := newUser("b")
	if err := fg.AddMember(org, v.gh.Login); err != nil {
		b.Fatal(err)
	}
	mark := len(fg.Requests())
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l, err := c.Repos(ctx, v.Name, ghaccount.Filter{}, false); err != nil || len(l.Repos) != 1000 {
				b.Errorf("cold caller: %d repositories, %v", len(l.Repos), err)
			}
		}()
	}
	wg.Wait()
	listReqs, orgReqs := apiCalls(mark, "user/repos"), apiCalls(mark, "user/orgs")

	fmt.Printf("github cache, 1,000 repositories in 10 pages:\n")
	fmt.Printf("  cache hit (internal API, 1,000 reads): p50 %s, p99 %s (goal p99 < 5ms)\n",
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	fmt.Printf("  cold refresh (workflow, 11 pages): %s\n", cold.Round(time.Millisecond))
	fmt.Printf("  unchanged refresh: %s, %d of %d pages 304, quota spent %d (goal 0)\n",
		unchanged.Round(time.Millisecond), res.NotModified, res.Pages, spent)
	fmt.Printf("  100 concurrent cold callers: %d /user/repos + %d /user/orgs requests (goal 10 + 1)\n", listReqs, orgReqs)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "µs-hit-p99")
	b.ReportMetric(float64(spent), "quota-unchanged-refresh")
	b.ReportMetric(float64(listReqs+orgReqs), "requests-100-cold-callers")
}
