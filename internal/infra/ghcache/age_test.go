package ghcache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/ghcache"
)

// A refresh that fails serves the cache as old as it is: filled a few
// minutes ago, it says so, not "never fetched".
func TestFailedRefreshShowsTheRealAge(t *testing.T) {
	u := newUser(t)
	f := &fakeRefresh{repos: 2}
	filled := time.Now()
	c := &ghcache.Cache{Store: env.Store, Refresh: f.refresh, Now: func() time.Time { return filled.Add(7 * time.Minute) }}
	if _, err := c.Repos(context.Background(), u.Name, ghaccount.Filter{}, false); err != nil {
		t.Fatal(err)
	}
	f.fail = errors.New("GitHub is down")
	l, err := c.Repos(context.Background(), u.Name, ghaccount.Filter{}, true)
	if err != nil || l.RefreshErr == nil || len(l.Repos) != 2 {
		t.Fatalf("refresh during an outage: %+v, %v", l, err)
	}
	if age := l.Age(filled.Add(7 * time.Minute)); !strings.HasPrefix(age, "cached 6m") && !strings.HasPrefix(age, "cached 7m") {
		t.Fatalf("the cache filled 7 minutes ago is %q", age)
	}
}
