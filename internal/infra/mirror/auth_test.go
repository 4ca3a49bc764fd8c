package mirror

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/errclass"
)

// tokens is a Credentials that gives out a list of tokens in turn, the
// next one once the current is refused.
type tokens struct {
	mu      sync.Mutex
	list    []string
	refused []string
}

func (c *tokens) GitToken(context.Context, string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.list[0], nil
}

func (c *tokens) GitTokenRefused(_, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused = append(c.refused, token)
	if len(c.list) > 1 && c.list[0] == token {
		c.list = c.list[1:]
	}
}

// guarded serves h only to requests carrying valid as an installation
// token (Basic x-access-token), 401 to others, as GitHub does; it counts
// both.
type guarded struct {
	valid          atomic.Value // string
	h              http.Handler
	served, denied atomic.Int64
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != "x-access-token" || pass != g.valid.Load().(string) {
		g.denied.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Bad credentials", http.StatusUnauthorized)
		return
	}
	g.served.Add(1)
	g.h.ServeHTTP(w, r)
}

// Every request of a sync carries the token in its Authorization header;
// a token the remote refuses is reported and the sync goes on once with
// the next one; without credentials the remote refuses the sync.
func TestSyncAuthenticates(t *testing.T) {
	c := gittest.DeepTree(1)
	g := &guarded{h: &gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit}}
	g.valid.Store("ghs_second")
	srv := httptest.NewServer(g)
	defer srv.Close()
	url := srv.URL + "/acme/vault.git"

	anon, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Sync(context.Background(), url); errclass.Classify(err).Reason != errclass.ReasonPermissionDenied {
		t.Fatalf("anonymous sync: %v, want permission denied", err)
	}

	creds := &tokens{list: []string{"ghs_first", "ghs_second"}}
	m, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetCredentials(creds)
	denied := g.denied.Load()
	r, err := m.Sync(context.Background(), url)
	if err != nil || r.Head != c.Commit.String() {
		t.Fatalf("sync: %+v, %v", r, err)
	}
	if len(creds.refused) != 1 || creds.refused[0] != "ghs_first" || g.denied.Load()-denied != 1 || g.served.Load() < 2 {
		t.Fatalf("refused %v, %d denied, %d served; want the first token refused once, then served",
			creds.refused, g.denied.Load()-denied, g.served.Load())
	}
	if refs, err := ListRefsWith(context.Background(), url, creds); err != nil || len(refs) == 0 {
		t.Errorf("ListRefsWith: %d refs, %v", len(refs), err)
	}
}

// A remote that redirects elsewhere gets nowhere with the token: the other
// origin receives no request at all, whether the probe or go-git's own
// request is redirected.
func TestTokenNeverFollowsARedirect(t *testing.T) {
	c := gittest.DeepTree(1)
	var reached atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		(&gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit}).ServeHTTP(w, r)
	}))
	defer other.Close()
	cross := httptest.NewServer(redirectTo(other.URL))
	defer cross.Close()
	var probes atomic.Int64
	serve := &gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit}
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && probes.Add(1) > 1 {
			redirectTo(other.URL).ServeHTTP(w, r)
			return
		}
		serve.ServeHTTP(w, r)
	}))
	defer late.Close()
	for name, url := range map[string]string{"the probe's": cross.URL + "/acme/vault.git", "the fetch's": late.URL + "/acme/vault.git"} {
		t.Run(name, func(t *testing.T) {
			m, err := New(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			m.SetCredentials(&tokens{list: []string{"ghs_secret"}})
			_, err = m.Sync(context.Background(), url)
			if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent {
				t.Fatalf("Sync: %v, want Permanent", err)
			}
			if n := reached.Load(); n != 0 {
				t.Fatalf("the other origin got %d requests", n)
			}
		})
	}
}
