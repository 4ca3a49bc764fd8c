package forge

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The link `starter dev` prints (URL()+"/demo/tools") opens in a browser,
// whether it addresses the forge as 127.0.0.1:PORT or forge.localhost:PORT.
func TestWebPages(t *testing.T) {
	f := newForge(t)
	seeded(t, f, "demo", "tools")
	seeded(t, f, "demo", "hello")
	mustCreate(t, f, "acme", "secret")
	if err := f.SetPrivate("acme", "secret", true); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename("demo", "hello", "hello-world"); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(f.Host(), ":")
	for _, host := range []string{"", "forge.localhost:" + port} {
		code, body := get(t, f.URL()+"/demo/tools", host)
		if code != http.StatusOK || !strings.Contains(body, "<h1>demo/tools</h1>") || !strings.Contains(body, "/demo/tools.git") {
			t.Errorf("GET /demo/tools (Host %q): %d\n%s", host, code, body)
		}
	}
	// The old name redirects (the client follows it).
	if code, body := get(t, f.URL()+"/demo/hello", ""); code != http.StatusOK || !strings.Contains(body, "<h1>demo/hello-world</h1>") {
		t.Errorf("GET /demo/hello (renamed): %d\n%s", code, body)
	}
	for _, path := range []string{"/acme/secret", "/demo/nothing", "/demo/tools/tree/main", "/demo/tools.git", "/"} {
		if code, _ := get(t, f.URL()+path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
}
