package ghcache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/infra/ghcache"
	"gitfleet/internal/infra/store"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.RunDatabase(m, &env)) }

func newUser(t *testing.T) store.User {
	t.Helper()
	name := fmt.Sprintf("u%d", time.Now().UnixNano())
	u, err := env.Store.PutUser(context.Background(), store.NewUser{Name: name, APIURL: "https://api.test/", Login: name,
		GitHubID: time.Now().UnixNano(), TokenSealed: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// fakeRefresh stands in for the refresh workflow: it counts calls, may
// block until released, and writes a view of n repositories.
type fakeRefresh struct {
	calls   atomic.Int32
	release chan struct{}
	fail    error
	repos   int

	mu      sync.Mutex
	fetched time.Time // when the last refresh that fetched wrote the view
}

// refresh keeps the Refresher's contract: a caller that looked before
// another refresh wrote the view (a reader that reached the cache as the
// shared refresh ended) fetches nothing; calls counts the fetches.
func (f *fakeRefresh) refresh(ctx context.Context, u store.User, seen time.Time) error {
	f.mu.Lock()
	done := f.fetched
	f.mu.Unlock()
	if done.After(seen) {
		return nil
	}
	f.calls.Add(1)
	if f.release != nil {
		<-f.release
	}
	if f.fail != nil {
		return f.fail
	}
	v := ghaccount.View{Lists: []string{ghaccount.ListOrgs, ghaccount.ListRepos}}
	for i := range f.repos {
		v.Repos = append(v.Repos, ghaccount.Repo{ID: int64(i + 1), Owner: u.Login, Name: fmt.Sprintf("r%03d", i),
			Source: ghaccount.Personal, Visibility: "public"})
	}
	now := time.Now().Truncate(time.Microsecond) // as the database keeps it, which is what callers see
	if err := env.Store.ReplaceGitHubView(ctx, u.ID, u.APIURL, v, now); err != nil {
		return err
	}
	f.mu.Lock()
	f.fetched = now
	f.mu.Unlock()
	return nil
}

// A hundred readers of a cold user in one process make one refresh; a
// reader that gives up cancels nobody else's.
func TestConcurrentColdReadersShareOneRefresh(t *testing.T) {
	u := newUser(t)
	f := &fakeRefresh{release: make(chan struct{}), repos: 3}
	c := &ghcache.Cache{Store: env.Store, Refresh: f.refresh}
	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.Repos(impatient, u.Name, ghaccount.Filter{}, false)
		gaveUp <- err
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Repos(context.Background(), u.Name, ghaccount.Filter{}, false)
			if err == nil && len(l.Repos) != 3 {
				err = fmt.Errorf("%d repositories, want 3", len(l.Repos))
			}
			errs <- err
		}()
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the impatient reader: %v, want context.Canceled", err)
	}
	close(f.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	// Cache first, no TTL: a later read is a hit.
	if _, err := c.Repos(context.Background(), u.Name, ghaccount.Filter{}, false); err != nil || f.calls.Load() != 1 {
		t.Fatalf("hit: %v, %d refreshes", err, f.calls.Load())
	}
}

// A user with no repository is a hit once fetched; a failed refresh leaves
// the cache serving, and says so.
func TestEmptyUserAndOutage(t *testing.T) {
	u := newUser(t)
	f := &fakeRefresh{}
	c := &ghcache.Cache{Store: env.Store, Refresh: f.refresh}
	for range 2 {
		l, err := c.Repos(context.Background(), u.Name, ghaccount.Filter{}, false)
		if err != nil || len(l.Repos) != 0 || l.RefreshedAt.IsZero() {
			t.Fatalf("empty user: %+v, %v", l, err)
		}
	}
	if f.calls.Load() != 1 {
		t.Fatalf("%d refreshes of an empty user, want 1", f.calls.Load())
	}
	f.fail = errors.New("GitHub is down")
	l, err := c.Repos(context.Background(), u.Name, ghaccount.Filter{}, true)
	if err != nil || l.RefreshErr == nil || l.Refreshed {
		t.Fatalf("refresh during an outage: %+v, %v; want the cache and the refresh's error", l, err)
	}
	if _, err := c.Repos(context.Background(), "nobody-"+u.Name, ghaccount.Filter{}, false); !errors.Is(err, ghcache.ErrUnknownUser) {
		t.Fatalf("unknown user: %v", err)
	}
	// A miss during an outage has nothing to serve: the error.
	cold := newUser(t)
	if _, err := c.Repos(context.Background(), cold.Name, ghaccount.Filter{}, false); err == nil {
		t.Fatal("a cold miss during an outage answered")
	}
}
