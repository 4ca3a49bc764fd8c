package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/vcs"
)

// The secret settings read from the files their *_FILE settings name, as
// compose's secrets hand them over: the value, without its trailing
// newline, an empty file being an unset secret; both forms at once, an
// unreadable file, an empty password are errors that do not show the
// secret.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := secrets.NewKey()
	env := map[string]string{
		EnvMirrorDir:            dir,
		FileVar(EnvTokenKey):    file("token-key", key+"\n"),
		FileVar(vcs.EnvToken):   file("github-token", "ghp_file-sentinel\n"),
		EnvDatabaseURL:          "postgres://gitfleet_worker@gitfleet-db:5432/gitfleet?sslmode=disable",
		EnvDatabasePasswordFile: file("db-password", "pw-sentinel\n"),
	}
	load := func(over map[string]string) (Config, error) {
		return Load(func(k string) string {
			if v, ok := over[k]; ok {
				return v
			}
			return env[k]
		})
	}
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.TokenBox == nil {
		t.Error("the token key from its file does not open a box")
	}
	if h, _ := c.Hosts.Lookup(c.Hosts.Default()); h.Token != "ghp_file-sentinel" {
		t.Errorf("GITHUB_TOKEN from its file: %q", h.Token)
	}
	if c.DatabaseURL != "postgres://gitfleet_worker:pw-sentinel@gitfleet-db:5432/gitfleet?sslmode=disable" {
		t.Errorf("DATABASE_URL with the password file: %q", c.DatabaseURL)
	}
	c, err = load(map[string]string{FileVar(vcs.EnvToken): file("no-token", "\n")})
	if h, _ := c.Hosts.Lookup(c.Hosts.Default()); err != nil || h.Token != "" {
		t.Errorf("an empty GITHUB_TOKEN_FILE: %q, %v; want no token", h.Token, err)
	}
	url := "postgres://u:url-sentinel@db/gitfleet"
	c, err = load(map[string]string{EnvDatabasePasswordFile: "", FileVar(EnvDatabaseURL): file("db-url", url+"\n"), EnvDatabaseURL: ""})
	if err != nil || c.DatabaseURL != url {
		t.Errorf("DATABASE_URL_FILE: %q, %v", c.DatabaseURL, err)
	}
	for name, over := range map[string]map[string]string{
		"both the key and its file":      {EnvTokenKey: key},
		"a missing file":                 {FileVar(vcs.EnvToken): filepath.Join(dir, "missing")},
		"an empty password file":         {EnvDatabasePasswordFile: file("empty", "\n")},
		"a password in the URL and file": {EnvDatabaseURL: "postgres://u:url-sentinel@db/gitfleet"},
		"a password file, no user":       {EnvDatabaseURL: "postgres://db/gitfleet"},
	} {
		_, err := load(over)
		if err == nil {
			t.Errorf("%s: loads", name)
			continue
		}
		for _, secret := range []string{key, "ghp_file-sentinel", "pw-sentinel", "url-sentinel"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows a secret: %v", name, err)
			}
		}
		t.Logf("%s: %v", name, err)
	}
}
