package gitleakssamples

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The release whose generator these tests run: its counts are known, and
// pinning it keeps the test independent of the version gitfleet loads.
const testVersion = "v8.30.1"

// Loading extracts the samples once, with the counts gitleaks' generator
// validates (6,396 true, 374 false on v8.30.1), for the rules and paths
// their constructors give, and the second Load reads the cache: the same
// samples, where a new extraction draws different ones.
func TestLoad(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	first, err := Load(ctx, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	var trueN, falseN int
	rules := map[string]bool{}
	for _, s := range first {
		rules[s.Rule] = true
		if s.True {
			trueN++
		} else {
			falseN++
		}
	}
	if trueN != 6396 || falseN != 374 {
		t.Errorf("%d true and %d false samples, want 6396 and 374", trueN, falseN)
	}
	// 222 rules less the two Dropbox token rules, whose constructors
	// validate nothing ("validate TODO").
	if len(rules) != 220 {
		t.Errorf("samples of %d rules, want 220", len(rules))
	}

	for _, tc := range []struct {
		rule   string
		isTrue bool
		want   func(Sample) bool
		what   string
	}{
		{"github-pat", true, func(s Sample) bool { return strings.Contains(s.Text, "ghp_") && s.Path == "" }, `a blob holding "ghp_", without path`},
		{"generic-api-key", false, func(s Sample) bool { return s.Text != "" }, "a false sample"},
		{"pkcs12-file", true, func(s Sample) bool { return strings.HasSuffix(s.Path, ".p12") || strings.HasSuffix(s.Path, ".pfx") }, "a .p12 or .pfx path (ValidateWithPaths)"},
		{"kubernetes-secret-yaml", false, func(s Sample) bool { return s.Path != "" && s.Text != "" }, "a false sample with path (ValidateWithPaths)"},
	} {
		found := false
		for _, s := range first {
			found = found || (s.Rule == tc.rule && s.True == tc.isTrue && tc.want(s))
		}
		if !found {
			t.Errorf("%s (true=%v): no sample with %s", tc.rule, tc.isTrue, tc.what)
		}
	}

	path, err := CachePath(testVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no cached extraction: %v", err)
	}
	again, err := Load(ctx, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, again) {
		t.Error("a second Load returned other samples than the cached ones")
	}
	fresh, err := Extract(ctx, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(first, fresh) {
		t.Error("two extractions drew the same samples: the generator is seeded, and the cache is no longer needed")
	}
}
