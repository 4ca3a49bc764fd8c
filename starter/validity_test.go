package main

import (
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"

	"gitfleet/activities"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/provideremu"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/validate"
)

// The providers' emulator and the worker's validity activities (off, as a
// worker without GITFLEET_VALIDATE; a test turns them on).
var (
	providers    = provideremu.Start()
	validityActs = &activities.Validity{}
)

func setUpValidity(st *store.Store, mirrors *mirror.Mirrors, scanner *scan.Scanner, log *zap.Logger) *activities.Validity {
	validityActs.Store, validityActs.Mirrors, validityActs.Scanner, validityActs.Log = st, mirrors, scanner, log
	validityActs.Checker = validityChecker("")
	return validityActs
}

func validityChecker(on string) *validate.Checker {
	s, err := validate.FromEnv(func(k string) string {
		switch {
		case strings.HasPrefix(k, validate.EnvEndpointPrefix):
			return providers.URL()
		case k == validate.EnvValidate:
			return on
		}
		return ""
	})
	if err != nil {
		panic(err)
	}
	s.PerMinute = 6000
	c, err := validate.New(s)
	if err != nil {
		panic(err)
	}
	return c
}

// findings validate checks a repository's secrets now (off: says so and
// sends nothing); the listing shows each secret's validity and its age
// and filters on it; the summary counts valid secrets first; a key
// revoked at its provider is seen revoked.
func TestFindingsValidate(t *testing.T) {
	o, _ := newRepo(t)
	live, other := gittest.FakePAT("Va1"), gittest.FakePAT("Va2")
	if _, err := fg.Commit(o, "app", "main", map[string]string{"a.env": "T=" + live + "\n", "b.env": "T=" + other + "\n"}, "keys"); err != nil {
		t.Fatal(err)
	}
	providers.Valid(live, "octocat")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := starter(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		for _, s := range []string{live, other} {
			if strings.Contains(out+errOut, s) {
				t.Fatalf("%v prints a secret:\n%s%s", args, out, errOut)
			}
		}
		return out
	}
	run("collect", o+"/app")
	before := providers.Requests()
	if out := run("findings", "validate", o+"/app"); !strings.Contains(out, "validity checks are off") {
		t.Fatalf("off:\n%s", out)
	}
	if n := providers.Requests() - before; n != 0 {
		t.Fatalf("%d requests while off", n)
	}

	validityActs.Checker = validityChecker("on")
	t.Cleanup(func() { validityActs.Checker = validityChecker("") })
	if out := run("findings", "validate", o+"/app"); !strings.Contains(out, "2 secrets checked: 1 valid, 1 invalid (0 revoked now), 0 unknown") ||
		!strings.Contains(out, "account octocat; scopes repo, read:org") {
		t.Fatalf("validate:\n%s", out)
	}
	out := run("findings", "--repo", "*/"+o+"/app", "--valid")
	if !strings.Contains(out, "VALIDITY") || !strings.Contains(out, "a.env:1") || strings.Contains(out, "b.env:1") ||
		!regexp.MustCompile(`valid \d+[smh] ago`).MatchString(out) {
		t.Fatalf("--valid:\n%s", out)
	}
	if out := run("findings", o+"/app"); !regexp.MustCompile(`a\.env:1 .* valid \d+[smh] ago`).MatchString(out) ||
		!regexp.MustCompile(`b\.env:1 .* invalid \d+[smh] ago`).MatchString(out) {
		t.Fatalf("one repository's list:\n%s", out)
	}
	if out := run("findings", "--repo", "*/"+o+"/app", "--validity", "invalid"); !strings.Contains(out, "b.env:1") || strings.Contains(out, "a.env:1") {
		t.Fatalf("--validity invalid:\n%s", out)
	}
	sum := run("findings", "--repo", "*/"+o+"/app", "--summary")
	if i, j := strings.Index(sum, "by validity"), strings.Index(sum, "by state"); i < 0 || j < i ||
		!strings.Contains(sum, "  valid ") || !strings.Contains(sum, "  not checked ") {
		t.Fatalf("summary:\n%s", sum)
	}

	providers.Revoke(live)
	ha := hashOf(live)
	if out := run("findings", "validate", o+"/app", ha[:12]); !strings.Contains(out, "1 secret checked: 0 valid, 1 invalid (1 revoked now)") ||
		!strings.Contains(out, "(revoked)") || !strings.Contains(out, "HTTP 401 at 127.0.0.1:") {
		t.Fatalf("after revocation:\n%s", out)
	}
	if out := run("findings", "--repo", "*/"+o+"/app", "--validity", "revoked"); !strings.Contains(out, "a.env:1") || !strings.Contains(out, "revoked") {
		t.Fatalf("--validity revoked:\n%s", out)
	}
	if out := run("findings", "show", o+"/app", ha[:12]); !strings.Contains(out, "invalid") || !strings.Contains(out, "(revoked)") ||
		!strings.Contains(out, "resolved automatically") {
		t.Fatalf("show:\n%s", out)
	}
	if _, errOut, code := starter(t, "findings", "--validity", "alive"); code != exitUsage || !strings.Contains(errOut, "--validity") {
		t.Errorf("--validity alive: exit %d\n%s", code, errOut)
	}
}
