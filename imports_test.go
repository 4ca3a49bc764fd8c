package gitfleet

import (
	"os/exec"
	"strings"
	"testing"
)

// packages lists packages with their direct imports (deps=false) or every
// package they depend on (deps=true), from go list, test files excluded.
func packages(t *testing.T, deps bool, patterns ...string) map[string][]string {
	t.Helper()
	field := ".Imports"
	if deps {
		field = ".Deps"
	}
	args := append([]string{"list", "-f", "{{.ImportPath}}{{range " + field + "}} {{.}}{{end}}"}, patterns...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs[f[0]] = f[1:]
	}
	return pkgs
}

// The layering that internal/'s folders promise (docs/architecture.md, "Code
// layout"): domain rules stand alone, infrastructure runs no workflow code,
// and nothing in the product reaches into the development stack.
func TestImports(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deps      bool
		patterns  []string
		forbidden func(pkg, imp string) bool
	}{
		{"domain packages use neither Temporal, SQL nor other layers", true, []string{"./internal/domain/..."},
			func(_, imp string) bool {
				return strings.HasPrefix(imp, "go.temporal.io/") || strings.HasPrefix(imp, "github.com/jackc/") ||
					imp == "database/sql" || (strings.HasPrefix(imp, "gitfleet/") && !strings.HasPrefix(imp, "gitfleet/internal/domain/"))
			}},
		{"infrastructure runs no workflow code and no dev stack", false, []string{"./internal/infra/..."},
			func(_, imp string) bool {
				return imp == "go.temporal.io/sdk/workflow" || imp == "gitfleet/workflows" || imp == "gitfleet/activities" ||
					strings.HasPrefix(imp, "gitfleet/internal/devstack/")
			}},
		{"the product links no dev stack", true, []string{"./workflows", "./activities", "./worker", "./starter", "./internal/domain/...", "./internal/infra/..."},
			func(_, imp string) bool { return strings.HasPrefix(imp, "gitfleet/internal/devstack/") }},
		{"workflows read no configuration and reach no infrastructure but the error classes", false, []string{"./workflows"},
			func(_, imp string) bool {
				return strings.HasPrefix(imp, "gitfleet/internal/infra/") && imp != "gitfleet/internal/infra/errclass"
			}},
		{"workflows depend on no activity implementation", true, []string{"./workflows"},
			func(_, imp string) bool {
				return imp == "gitfleet/activities" || imp == "gitfleet/internal/infra/store"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkgs := packages(t, tc.deps, tc.patterns...)
			if len(pkgs) == 0 {
				t.Fatal("go list found no packages")
			}
			for pkg, imps := range pkgs {
				for _, imp := range imps {
					if tc.forbidden(pkg, imp) {
						t.Errorf("%s imports %s", pkg, imp)
					}
				}
			}
		})
	}
}
