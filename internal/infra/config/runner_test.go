package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunnerSettings(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	file := filepath.Join(t.TempDir(), "peer-token")
	if err := os.WriteFile(file, []byte("token-from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		allowed []string // registry/repository pairs allowed
		refused []string
		token   string
		err     string
	}{
		{name: "nothing set", refused: []string{"registry.example/app"}},
		{name: "the build registry only", env: map[string]string{EnvRegistry: "registry.example:5000/gitfleet"},
			allowed: []string{"registry.example:5000/base"}, refused: []string{"evil.example/app", "registry.example:6000/app"}},
		{name: "and the listed ones", env: map[string]string{EnvRegistry: "registry.example:5000/gitfleet", EnvSnapshotSources: "ghcr.io/acme, mirror.example"},
			allowed: []string{"registry.example:5000/base", "ghcr.io/acme/tools", "mirror.example:8443/x"}, refused: []string{"ghcr.io/other/tools"}},
		{name: "a bad entry", env: map[string]string{EnvSnapshotSources: "https://x"}, err: EnvSnapshotSources},
		{name: "a token", env: map[string]string{EnvPeerToken: "a-token-of-24-characters"}, token: "a-token-of-24-characters"},
		{name: "a token file", env: map[string]string{FileVar(EnvPeerToken): file}, token: "token-from-a-file-0123456789"},
		{name: "both", env: map[string]string{EnvPeerToken: "a-token-of-24-characters", FileVar(EnvPeerToken): file}, err: "both set"},
		{name: "a short token", env: map[string]string{EnvPeerToken: "short-secret"}, err: "at least 16"},
		{name: "a missing file", env: map[string]string{FileVar(EnvPeerToken): file + ".missing"}, err: "GITFLEET_PEER_TOKEN_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if v := tc.env[EnvPeerToken]; v != "" && strings.Contains(err.Error(), v) {
					t.Fatalf("the error shows the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range tc.allowed {
				reg, repo, _ := strings.Cut(ref, "/")
				if !c.SnapshotSources.Allows(reg, repo) {
					t.Errorf("%s refused (sources %s)", ref, c.SnapshotSources)
				}
			}
			for _, ref := range tc.refused {
				reg, repo, _ := strings.Cut(ref, "/")
				if c.SnapshotSources.Allows(reg, repo) {
					t.Errorf("%s allowed (sources %s)", ref, c.SnapshotSources)
				}
			}
			if c.PeerToken != tc.token {
				t.Errorf("peer token %q, want %q", c.PeerToken, tc.token)
			}
		})
	}
}
