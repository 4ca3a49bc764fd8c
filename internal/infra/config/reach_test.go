package config

import (
	"slices"
	"testing"

	"gitfleet/internal/infra/vcs"
)

// Git fetches may reach the configured Git host and what
// GITFLEET_ALLOWED_HOSTS adds; local targets lie under GITFLEET_LOCAL_ROOT,
// none when it is unset.
func TestAllowedHostsAndLocalRoot(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string
		root string
		bad  bool
	}{
		{"github.com by default", nil, []string{"github.com"}, "", false},
		{"GHES", map[string]string{vcs.EnvAPIURL: "https://ghe.corp/api/v3/"}, []string{"ghe.corp"}, "", false},
		{"more hosts", map[string]string{EnvAllowedHosts: "gitlab.com, 10.0.0.0/8", EnvLocalRoot: "/srv/repos/"},
			[]string{"github.com", "gitlab.com", "10.0.0.0/8"}, "/srv/repos", false},
		{"a port", map[string]string{EnvAllowedHosts: "gitlab.com:443"}, nil, "", true},
		{"a relative root", map[string]string{EnvLocalRoot: "repos"}, nil, "", true},
		{"any public host", map[string]string{EnvAllowedHosts: "*"}, []string{"github.com", "*"}, "", false},
		// The proxy, not the worker, would resolve the names: refused.
		{"any public host through a proxy", map[string]string{EnvAllowedHosts: "*", "HTTPS_PROXY": "http://proxy.corp:3128"}, nil, "", true},
		{"listed hosts through a proxy", map[string]string{EnvAllowedHosts: "gitlab.com", "HTTPS_PROXY": "http://proxy.corp:3128"},
			[]string{"github.com", "gitlab.com"}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(func(k string) string {
				if k == EnvMirrorDir {
					return dir
				}
				return tt.env[k]
			})
			if tt.bad {
				if err == nil {
					t.Fatal("loads")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.AllowedHosts.Listed(); !slices.Equal(got, tt.want) {
				t.Errorf("allowed hosts %v, want %v", got, tt.want)
			}
			if c.LocalRoot != tt.root {
				t.Errorf("local root %q, want %q", c.LocalRoot, tt.root)
			}
		})
	}
}
