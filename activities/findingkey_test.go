package activities_test

import (
	"testing"

	"gitfleet/activities"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/infra/config"
)

// testFindingKey is the key the tests' scanners hash with.
var testFindingKey = testenv.FindingKey

// A worker restarted with the same key file hashes the same secrets the
// same, under the same policy (the same scopes); a new version of the
// key, even the same bytes, is a namespace of its own.
func TestScannerFromTheFindingKey(t *testing.T) {
	content := []byte("token = ghp_0123456789abcdefghijABCDEFGHIJ0123456z\n")
	scanner := func(k config.FindingKey) (policy, hash string) {
		t.Helper()
		s, err := activities.NewScanner("", k)
		if err != nil {
			t.Fatal(err)
		}
		if s.KeyVersion() != k.Version {
			t.Errorf("key version %d, want %d", s.KeyVersion(), k.Version)
		}
		r := s.Scan("config.toml", content, "")
		if len(r.Findings) == 0 {
			t.Fatal("no finding")
		}
		return s.Policy(), r.Findings[0].SecretHash
	}
	read := func(text string) config.FindingKey {
		k, err := config.ParseFindingKey(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	file := testFindingKey.Format()
	p1, h1 := scanner(read(file))
	p2, h2 := scanner(read(file)) // a restart
	if p1 != p2 || h1 != h2 {
		t.Error("the same key hashes differently after a restart")
	}
	v2 := read(file)
	v2.Version = 2
	p3, h3 := scanner(v2)
	if p3 == p1 || h3 == h1 {
		t.Error("key version 2 shares version 1's namespace")
	}
	if _, err := activities.NewScanner("", config.FindingKey{Version: 1, Secret: []byte("short")}); err == nil {
		t.Error("a short key accepted")
	}
}
