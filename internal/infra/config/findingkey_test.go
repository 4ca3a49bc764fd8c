package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFindingKey(t *testing.T) {
	for _, c := range []struct {
		in      string
		version int
		secret  string
		err     string
	}{
		{in: "a-key-of-at-least-16-bytes", version: 1, secret: "a-key-of-at-least-16-bytes"},
		{in: "  a-key-of-at-least-16-bytes\n", version: 1, secret: "a-key-of-at-least-16-bytes"},
		{in: "v3:a-key-of-at-least-16-bytes", version: 3, secret: "a-key-of-at-least-16-bytes"},
		{in: "base64:MDEyMzQ1Njc4OWFiY2RlZg==", version: 1, secret: "0123456789abcdef"},
		{in: "v12:base64:MDEyMzQ1Njc4OWFiY2RlZg==\n", version: 12, secret: "0123456789abcdef"},
		// A key of its own that happens to hold a colon.
		{in: "key:with-a-colon-and-long", version: 1, secret: "key:with-a-colon-and-long"},
		{in: "short", err: "at least 16 bytes"},
		{in: "v2:short", err: "at least 16 bytes"},
		{in: "v0:a-key-of-at-least-16-bytes", err: "version"},
		{in: "vault:a-key-set-before-versions", version: 1, secret: "vault:a-key-set-before-versions"},
		{in: "base64:not base64 at all!!", err: "not base64"},
		{in: "base64:c2hvcnQ=", err: "at least 16 bytes"},
	} {
		k, err := ParseFindingKey(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			if err != nil && strings.Contains(err.Error(), c.in) {
				t.Errorf("%q: the error repeats the key: %v", c.in, err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.in, err)
		case k.Version != c.version || string(k.Secret) != c.secret:
			t.Errorf("%q: version %d secret %q, want %d %q", c.in, k.Version, k.Secret, c.version, c.secret)
		}
	}
}

func TestFindingKeyFormatRoundTrip(t *testing.T) {
	k := NewFindingKey(4)
	back, err := ParseFindingKey(k.Format())
	if err != nil || back.Version != 4 || string(back.Secret) != string(k.Secret) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	if a, b := NewFindingKey(1), NewFindingKey(1); string(a.Secret) == string(b.Secret) {
		t.Error("two new keys are equal")
	}
	if s := k.String(); strings.Contains(s, k.Format()[3:]) || s != "finding key v4" {
		t.Errorf("String() = %q", s)
	}
}

// A worker's configuration without a finding key has none to give, with
// an error that names the settings; with one, every load of it gives the
// same key (a restarted worker hashes as before).
func TestFindingKeySettings(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	load := func(env map[string]string) (Config, error) {
		return Load(func(k string) string { return env[k] })
	}
	cfg, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.FindingKey(); !errors.Is(err, ErrNoFindingKey) ||
		!strings.Contains(err.Error(), EnvHashKeyFile) || !strings.Contains(err.Error(), EnvHashKey) {
		t.Errorf("no key: %v", err)
	}

	file := filepath.Join(t.TempDir(), "finding.key")
	want := NewFindingKey(2)
	if err := os.WriteFile(file, []byte(want.Format()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		cfg, err := load(map[string]string{EnvHashKeyFile: file})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cfg.FindingKey()
		if err != nil || got.Version != 2 || string(got.Secret) != string(want.Secret) {
			t.Errorf("load %d: %v %v", i, got, err)
		}
	}

	cfg, err = load(map[string]string{EnvHashKey: "v7:an-environment-key-0123"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cfg.FindingKey(); err != nil || got.Version != 7 || string(got.Secret) != "an-environment-key-0123" {
		t.Errorf("from the environment: %v %v", got, err)
	}

	if _, err := load(map[string]string{EnvHashKey: "v7:an-environment-key-0123", EnvHashKeyFile: file}); err == nil {
		t.Error("both settings accepted")
	}
	if _, err := load(map[string]string{EnvHashKey: "short"}); err == nil || !strings.Contains(err.Error(), EnvHashKey) {
		t.Errorf("a short key: %v", err)
	}
	cfg, err = load(map[string]string{EnvHashKeyFile: filepath.Join(t.TempDir(), "missing")})
	if err != nil {
		t.Fatal(err) // the file is the worker's to read, not every command's
	}
	if _, err := cfg.FindingKey(); err == nil || !strings.Contains(err.Error(), EnvHashKeyFile) {
		t.Errorf("a missing file: %v", err)
	}
}
