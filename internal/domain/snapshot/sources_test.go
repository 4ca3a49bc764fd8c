package snapshot

import (
	"errors"
	"strings"
	"testing"
)

func TestSources(t *testing.T) {
	for _, tc := range []struct {
		name, build, list string
		registry, repo    string
		want              bool
	}{
		{"nothing configured", "", "", "registry.example", "app", false},
		{"the build registry", "registry.example:5000/snapshots", "", "registry.example:5000", "sandbox/base", true},
		{"the build registry's host on another port", "registry.example:5000/snapshots", "", "registry.example:5001", "app", false},
		{"the build registry's host without its port", "registry.example:5000", "", "registry.example", "app", false},
		{"another registry", "registry.example:5000", "", "evil.example", "app", false},
		{"a registry whose name extends the build registry's", "registry.example", "", "registry.example.evil", "app", false},
		{"a listed host, any port", "", "mirror.example", "mirror.example:8443", "app", true},
		{"a listed host, no port", "", "mirror.example", "mirror.example", "app", true},
		{"a listed host and port", "", "mirror.example:443", "mirror.example:444", "app", false},
		{"upper case", "", "Mirror.Example", "mirror.example", "app", true},
		{"under a listed path", "", "ghcr.io/acme", "ghcr.io", "acme/tools", true},
		{"the listed path itself", "", "ghcr.io/acme", "ghcr.io", "acme", true},
		{"beside a listed path", "", "ghcr.io/acme", "ghcr.io", "acme-evil/tools", false},
		{"outside a listed path", "", "ghcr.io/acme", "ghcr.io", "other/tools", false},
		{"docker.io is Docker Hub's registry", "", "docker.io/library", "index.docker.io", "library/ubuntu", true},
		{"IPv6 with a port", "", "[::1]:5000", "[::1]:5000", "app", true},
		{"several entries", "registry.example", " a.example , b.example:5000 ", "b.example:5000", "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSources(tc.build, tc.list)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Allows(tc.registry, tc.repo); got != tc.want {
				t.Fatalf("Allows(%q, %q) = %v with %q + %q (%s), want %v", tc.registry, tc.repo, got, tc.build, tc.list, s, tc.want)
			}
			err = s.Check("image", tc.registry, tc.repo)
			if (err == nil) != tc.want || (err != nil && !errors.Is(err, ErrSourceNotAllowed)) {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

func TestParseSourcesRefuses(t *testing.T) {
	for _, list := range []string{"https://registry.example", "registry.example:port", "*", "user@host", "host/pa th", "host:"} {
		if _, err := ParseSources("", list); err == nil || !strings.Contains(err.Error(), SettingSources) {
			t.Errorf("ParseSources(%q): %v, want an error naming %s", list, err, SettingSources)
		}
	}
}
