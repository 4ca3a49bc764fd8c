package ocistore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A registry pulled from with the runner's keychain credentials never has
// them sent anywhere but to itself over its own scheme: a blob redirected
// from https to plain http on its own host is asked for over https again
// (go-containerregistry's transport upgrades every request to the
// registry's host to the registry's scheme; the pull fails on the loop),
// and one redirected to another host — a registry's blob storage — is
// fetched without them (the transport attaches credentials only to the
// registry's host and port).
func TestPullKeepsCredentialsOnTheRegistry(t *testing.T) {
	reg := registry.New()
	var redirectTo atomic.Value // the host blobs are redirected to
	var mu sync.Mutex
	var clear []string // Authorization headers the plain side received
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		clear = append(clear, r.Header.Get("Authorization"))
		mu.Unlock()
		reg.ServeHTTP(w, r)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/" && r.Header.Get("Authorization") == "":
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			w.WriteHeader(http.StatusUnauthorized)
		case strings.Contains(r.URL.Path, "/blobs/"):
			http.Redirect(w, r, "http://"+redirectTo.Load().(string)+r.URL.Path, http.StatusTemporaryRedirect)
		default:
			reg.ServeHTTP(w, r)
		}
	}))
	defer secure.Close()

	// An image in the registry, pushed over the plain side.
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	push, err := name.ParseReference(strings.TrimPrefix(plain.URL, "http://")+"/acme/app:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(push, img); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clear = nil
	mu.Unlock()

	// example.com (a name the test certificate holds) is the registry:
	// port 443 the TLS side, port 80 the plain side.
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("runner:s3cret"))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths": {"example.com": {"auth": "`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	addrs := map[string]string{"example.com:443": secure.Listener.Addr().String(), "example.com:80": plain.Listener.Addr().String(),
		"blobs.example.net:80": plain.Listener.Addr().String()}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addrs[addr])
	}
	for _, tt := range []struct {
		to     string
		pulled bool
	}{{"example.com", false}, {"blobs.example.net", true}} {
		redirectTo.Store(tt.to)
		s := newStore(t, 0)
		s.client = tr
		_, err = s.Pull(context.Background(), "app", "example.com/acme/app:v1", []Source{{Name: "registry"}}, PullOptions{})
		t.Logf("blobs redirected to http://%s: %v", tt.to, err)
		if (err == nil) != tt.pulled {
			t.Errorf("blobs redirected to http://%s: %v, want pulled %t", tt.to, err, tt.pulled)
		}
		mu.Lock()
		for _, a := range clear {
			if a != "" {
				t.Errorf("blobs redirected to http://%s: credentials sent over plain http: %q", tt.to, a)
			}
		}
		clear = nil
		mu.Unlock()
	}
}
