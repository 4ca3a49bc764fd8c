package vcs

import (
	"errors"
	"strings"
	"testing"

	"gitfleet/internal/domain/repoid"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestHostsFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Host
		wantErr string
	}{
		{name: "github.com by default", env: nil,
			want: Host{Name: "github.com", GitURL: "https://github.com/", APIURL: "https://api.github.com/"}},
		{name: "token kept", env: map[string]string{EnvToken: "t0k"},
			want: Host{Name: "github.com", GitURL: "https://github.com/", APIURL: "https://api.github.com/", Token: "t0k"}},
		{name: "enterprise", env: map[string]string{EnvAPIURL: "https://GHE.example.com/api/v3"},
			want: Host{Name: "ghe.example.com", GitURL: "https://GHE.example.com/", APIURL: "https://GHE.example.com/api/v3/"}},
		{name: "forge with alias", env: map[string]string{EnvAPIURL: "http://127.0.0.1:7480/api/v3/", EnvHost: "demo.forge"},
			want: Host{Name: "demo.forge", GitURL: "http://127.0.0.1:7480/", APIURL: "http://127.0.0.1:7480/api/v3/"}},
		{name: "not a URL", env: map[string]string{EnvAPIURL: "nope"}, wantErr: "not a URL"},
		{name: "credentials in git URL", env: map[string]string{EnvAPIURL: "https://ghe/api/v3/", EnvGitURL: "https://u:p@ghe/"}, wantErr: "without credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs, err := HostsFromEnv(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := hs.Lookup(hs.Default())
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("host = %+v, want %+v", got, tt.want)
			}
			if strings.Contains(got.String(), "t0k") {
				t.Error("Host.String prints the token")
			}
		})
	}
}

func TestParseChecksHost(t *testing.T) {
	hs, err := NewHosts(Host{Name: "ghe.example.com", GitURL: "https://ghe.example.com", APIURL: "https://ghe.example.com/api/v3"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := hs.Parse("acme/app")
	if err != nil || id != (repoid.ID{Host: "ghe.example.com", Owner: "acme", Name: "app"}) {
		t.Fatalf("Parse(acme/app) = %v, %v", id, err)
	}
	_, err = hs.Parse("gitlab.com/acme/app")
	if !errors.Is(err, repoid.ErrInvalid) || !strings.Contains(err.Error(), "unknown host") || !strings.Contains(err.Error(), "ghe.example.com") {
		t.Fatalf("unknown host error = %v", err)
	}
}

func TestCloneURLRoundTrip(t *testing.T) {
	hs, _ := NewHosts(Host{Name: "ghe.example.com", GitURL: "https://ghe.example.com/", APIURL: "https://ghe.example.com/api/v3/"})
	h, _ := hs.Lookup("GHE.example.com")
	u := h.CloneURL("acme", "app.v2")
	if u != "https://ghe.example.com/acme/app.v2.git" {
		t.Fatalf("CloneURL = %s", u)
	}
	id, err := h.RepositoryAt(u)
	if err != nil || id.FullName() != "acme/app.v2" {
		t.Fatalf("RepositoryAt(%s) = %v, %v", u, id, err)
	}
	if _, err := h.RepositoryAt("https://evil.example.com/acme/app.git"); err == nil {
		t.Fatal("RepositoryAt accepted another host's URL")
	}
	if _, err := h.RepositoryAt("https://ghe.example.com/acme/../x.git"); err == nil {
		t.Fatal("RepositoryAt accepted a path trick")
	}
}
