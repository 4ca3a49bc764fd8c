package config

import (
	"slices"
	"testing"
)

// Vars names exactly the variables Load asks for: Load runs with a getenv
// that records its questions (every read in Load is unconditional when the
// environment is empty), so a new variable that is not added to Vars, or a
// name Vars keeps after Load stopped reading it, fails here.
func TestVarsMatchLoad(t *testing.T) {
	asked := map[string]bool{}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // Load falls back to the user cache directory
	if _, err := Load(func(k string) string { asked[k] = true; return "" }); err != nil {
		t.Fatal(err)
	}
	vars := Vars()
	for _, v := range vars {
		if !asked[v] {
			t.Errorf("Vars lists %s, which Load does not read", v)
		}
	}
	for k := range asked {
		if !slices.Contains(vars, k) {
			t.Errorf("Load reads %s, which Vars does not list", k)
		}
	}
	seen := map[string]bool{}
	for _, v := range vars {
		if seen[v] {
			t.Errorf("Vars lists %s twice", v)
		}
		seen[v] = true
	}
}
