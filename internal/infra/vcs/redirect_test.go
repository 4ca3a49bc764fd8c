package vcs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"gitfleet/internal/infra/errclass"
)

// recorder records the Authorization headers it receives.
type recorder struct {
	mu    sync.Mutex
	auths []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.auths = append(r.auths, req.Header.Get("Authorization"))
	r.mu.Unlock()
	w.Write([]byte(`{"login": "someone", "id": 7}`))
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.auths...)
}

// An API that redirects a request carrying a user's token to another host,
// or from https to plain http, gets the redirect refused: Permanent, and
// nothing reaches the other origin. (go-github adds the token inside its
// transport, where Go's own stripping of credentials on redirects does not
// apply.) A redirect within the API's origin — GitHub's 301 for a renamed
// repository — is followed, with the token.
func TestTokensDoNotFollowRedirects(t *testing.T) {
	elsewhere := &recorder{}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	// Plain http on 127.0.0.1, the TLS server's host.
	plain := httptest.NewServer(elsewhere)
	defer plain.Close()
	redirect := func(to string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusFound)
		})
	}
	cross := httptest.NewServer(redirect(other.URL))
	defer cross.Close()
	downgrade := httptest.NewTLSServer(redirect(plain.URL))
	defer downgrade.Close()

	for name, tt := range map[string]struct {
		api    string
		client *http.Client
	}{
		"another host":  {cross.URL, nil},
		"https to http": {downgrade.URL, downgrade.Client()},
	} {
		t.Run(name, func(t *testing.T) {
			h := Host{Name: "h.test", APIURL: tt.api + "/api/v3/", GitURL: tt.api + "/", Token: "tok-host"}
			gh, err := NewGitHub(h, tt.client)
			if err != nil {
				t.Fatal(err)
			}
			_, err = gh.ProvesGone(context.Background())
			if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent {
				t.Errorf("the host's token: %v (%+v), want Permanent", err, c)
			}
			a, err := NewAccount(h, "tok-user", AccountOptions{HTTPClient: tt.client})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = a.Whoami(context.Background())
			if c := errclass.Classify(err); c == nil || c.Class != errclass.Permanent {
				t.Errorf("a user's token: %v (%+v), want Permanent", err, c)
			}
			if got := elsewhere.seen(); len(got) != 0 {
				t.Errorf("the other origin got %d requests (Authorization %q)", len(got), got)
			}
		})
	}

	// Within the origin: followed, with the token.
	api := &recorder{}
	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v3/user" {
			http.Redirect(w, r, "/api/v3/user/moved", http.StatusMovedPermanently)
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer same.Close()
	h := Host{Name: "h.test", APIURL: same.URL + "/api/v3/", GitURL: same.URL + "/"}
	a, err := NewAccount(h, "tok-user", AccountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if login, _, err := a.Whoami(context.Background()); err != nil || login != "someone" {
		t.Fatalf("a redirect within the API: %q, %v", login, err)
	}
	if got := api.seen(); len(got) != 1 || got[0] != "Bearer tok-user" {
		t.Errorf("Authorization after the redirect: %q", got)
	}
}

// A request the client makes for another origin (a URL the API handed
// out) goes without the token.
func TestTokenOnlyToTheAPI(t *testing.T) {
	elsewhere := &recorder{}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	api := httptest.NewServer(&recorder{})
	defer api.Close()
	c, err := newClient(Host{Name: "h.test", APIURL: api.URL + "/api/v3/"}, "tok-host", nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.NewRequest(http.MethodGet, other.URL+"/somewhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.BareDo(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := elsewhere.seen(); len(got) != 1 || got[0] != "" {
		t.Errorf("Authorization sent to another origin: %q", got)
	}
}
