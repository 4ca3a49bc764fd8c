package ocistore

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A registry or a peer that answers with a Bearer challenge whose token
// service (realm) is on another site does not get the runner's
// credentials sent there — not the keychain's password, not its refresh
// token, not the peer token: the token service is asked anonymously (a
// public image still pulls) or, for an OAuth exchange that would carry a
// refresh token, not at all. A realm on the registry's own host, or
// another host of its domain (as Docker Hub's and GitLab's are), gets them
// as before; a peer, named by its address, has no other host. (Before, go-containerregistry gave them to any public realm
// host the challenge named: the realm server logged "Basic
// runner:s3cret" and the peer token.)
func TestCredentialsNeverGoToAnotherHostsRealm(t *testing.T) {
	const peerToken = "peer-token-0123456789abcdef"
	var mu sync.Mutex
	var seen []string // every Authorization header and form body the token services got
	token := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Host+" "+r.Header.Get("Authorization")+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"token":"registry-token","access_token":"registry-token"}`)
	}
	realm := httptest.NewServer(http.HandlerFunc(token))
	defer realm.Close()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var realmURL string // the challenge's realm
	regSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/token":
			token(w, r)
		case r.Header.Get("Authorization") != "Bearer registry-token":
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realmURL+`",service="registry.test"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			reg.ServeHTTP(w, r)
		}
	}))
	defer regSrv.Close()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := name.ParseReference(strings.TrimPrefix(regSrv.URL, "http://")+"/acme/app:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	realmURL = regSrv.URL + "/token"
	if err := remote.Write(direct, img, remote.WithAuth(authn.Anonymous)); err != nil {
		t.Fatal(err)
	}

	// registry.test is the registry (and a peer: its address), auth.test
	// a token service elsewhere.
	addrs := map[string]string{"registry.test:80": regSrv.Listener.Addr().String(), "auth.test:80": realm.Listener.Addr().String(),
		"auth.registry.test:80": realm.Listener.Addr().String()}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := addrs[addr]; ok {
			return (&net.Dialer{}).DialContext(ctx, network, a)
		}
		return nil, errors.New("no such host in the test: " + addr)
	}
	keychain := func(entry string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths": {"registry.test": {`+entry+`}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("DOCKER_CONFIG", dir)
	}
	password := `"auth": "` + base64.StdEncoding.EncodeToString([]byte("runner:s3cret")) + `"`
	basicCreds := "Basic " + base64.StdEncoding.EncodeToString([]byte("runner:s3cret"))
	peerCreds := "Basic " + base64.StdEncoding.EncodeToString([]byte(peerUser+":"+peerToken))
	for _, tc := range []struct {
		name    string
		realm   string
		entry   string
		src     Source
		pulled  bool
		want    string   // what the token service must have received
		secrets []string // what it must not
	}{
		{"keychain, realm on the registry's host", "http://registry.test/token", password,
			Source{Name: "registry", Insecure: true}, true, basicCreds, nil},
		{"keychain, realm on another host of the registry's domain", "http://auth.registry.test/token", password,
			Source{Name: "registry", Insecure: true}, true, basicCreds, nil},
		{"keychain, realm on another host", "http://auth.test/token", password,
			Source{Name: "registry", Insecure: true}, true, "", []string{"s3cret", basicCreds}},
		{"keychain refresh token, realm on another host", "http://auth.test/token", `"identitytoken": "refresh-s3cret"`,
			Source{Name: "registry", Insecure: true}, false, "", []string{"refresh-s3cret"}},
		{"peer token, realm on another host", "http://auth.test/token", password,
			Source{Name: "peer:r1", Registry: "registry.test", Insecure: true, Token: peerToken}, true, "", []string{peerToken, peerCreds}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			realmURL = tc.realm
			keychain(tc.entry)
			mu.Lock()
			seen = nil
			mu.Unlock()
			s := newStore(t, 0)
			s.client = tr
			_, err := s.Pull(context.Background(), "app", "registry.test/acme/app:v1", []Source{tc.src}, PullOptions{})
			if (err == nil) != tc.pulled {
				t.Errorf("pull: %v, want pulled %t", err, tc.pulled)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, got := range seen {
				for _, secret := range tc.secrets {
					if strings.Contains(got, secret) {
						t.Errorf("the token service got %q", got)
					}
				}
			}
			if tc.want != "" && (len(seen) == 0 || !strings.Contains(seen[0], tc.want)) {
				t.Errorf("the token service on the registry's site got %q, want %q", seen, tc.want)
			}
		})
	}
}

// Which hosts are a registry's site: its own host and port, or a host of
// its registrable domain (by the public suffix list) when it is named by a
// domain.
func TestCredentialsSite(t *testing.T) {
	for _, tc := range []struct {
		registry, url string
		own           bool
	}{
		{"index.docker.io", "https://auth.docker.io/token", true},
		{"registry.gitlab.com", "https://gitlab.com/jwt/auth", true},
		{"ghcr.io", "https://ghcr.io/token", true},
		{"registry.corp.example:5050", "https://gitlab.corp.example/jwt/auth", true},
		{"registry.corp.example:5050", "https://registry.corp.example/token", true}, // another port of its host
		{"ghcr.io", "https://evil.example/token", false},
		{"index.docker.io", "https://docker.io.evil.example/token", false},
		{"a.github.io", "https://b.github.io/token", false}, // github.io is a public suffix
		{"10.0.0.5:5000", "http://10.0.0.5:5000/token", true},
		{"10.0.0.5:5000", "http://10.0.0.6:5000/token", false},
		{"10.0.0.5:5000", "http://10.0.0.5:5001/token", false},
		{"localhost:5000", "http://auth.localhost:5000/token", false},
		{"127.0.0.1:5000", "http://localhost:5000/token", false},
	} {
		reg, err := name.NewRegistry(tc.registry)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("GET", tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := KeepCredentials(reg, nil).(*credentialGuard)
		if got := g.own(req); got != tc.own {
			t.Errorf("registry %s, request %s: own %t, want %t", tc.registry, tc.url, got, tc.own)
		}
	}
}
