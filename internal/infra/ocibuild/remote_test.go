package ocibuild

import (
	"context"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// A push and a --base pull with the worker's keychain do not send the
// registry's credentials to a token service (Bearer realm) on another
// host: it is asked anonymously. (Before, the realm on localhost got
// "Basic worker:s3cret" for a registry on 127.0.0.1.)
func TestKeychainCredentialsStayOnTheRegistry(t *testing.T) {
	var mu sync.Mutex
	var got []string
	realm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"token":"registry-token"}`)
	}))
	defer realm.Close()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer registry-token" {
			// localhost is another host than 127.0.0.1.
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+strings.Replace(realm.URL, "127.0.0.1", "localhost", 1)+`/token",service="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("worker:s3cret"))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths": {"`+host+`": {"auth": "`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)

	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Push(ctx, host+"/acme/app:v1", img); err != nil {
		t.Fatalf("push: %v", err)
	}
	base, err := Base(ctx, host+"/acme/app:v1")
	if err != nil {
		t.Fatalf("base: %v", err)
	}
	if _, err := base.RawManifest(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("the token service was never asked: the test shows nothing")
	}
	for _, a := range got {
		if a != "" {
			t.Errorf("the token service on another host got %q", a)
		}
	}
}
