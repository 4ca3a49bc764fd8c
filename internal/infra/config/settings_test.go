package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// Each declared default is Load's: setting a variable to the default the
// table declares changes nothing Load returns, for every setting Load reads
// that has one (a default the code took from elsewhere would differ).
func TestDeclaredDefaultsAreLoads(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base, err := Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range Settings() {
		if s.Via != "" || s.Default == "" {
			continue
		}
		n++
		got, err := Load(func(k string) string {
			if k == s.Name {
				return s.Default
			}
			return ""
		})
		if err != nil {
			t.Errorf("%s=%s (its declared default): %v", s.Name, s.Default, err)
			continue
		}
		// The SDK's profile keeps what the environment said; the address
		// and namespace used are TemporalAddress and Namespace.
		got.Temporal.Address, got.Temporal.Namespace = base.Temporal.Address, base.Temporal.Namespace
		if !reflect.DeepEqual(got, base) {
			t.Errorf("%s=%s (its declared default) is not what Load uses when it is unset", s.Name, s.Default)
		}
	}
	if n < 30 {
		t.Errorf("only %d settings with a default checked", n)
	}
}

// The table is complete where help and docs need it: each setting has a
// kind and one line of help, no name is declared twice, a default comes
// with no note that contradicts it, and secrets are marked.
func TestSettingsAreDeclaredWhole(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range append(Settings(), ToolVars...) {
		if seen[s.Name] {
			t.Errorf("%s is declared twice", s.Name)
		}
		seen[s.Name] = true
		if s.Help == "" || strings.Contains(s.Help, "\n") {
			t.Errorf("%s: want one line of help, got %q", s.Name, s.Help)
		}
	}
	for _, s := range Settings() {
		if s.Kind == "" || s.Readers == 0 {
			t.Errorf("%s: kind %q, readers %v", s.Name, s.Kind, s.Readers)
		}
		if s.FileForm && !s.Secret {
			t.Errorf("%s has a file form but is not marked secret", s.Name)
		}
	}
	for _, name := range []string{EnvHashKey, EnvTokenKey, EnvPeerToken, EnvWebhookSecret, EnvNotifyURL, EnvDatabaseURL, "GITHUB_TOKEN", "TEMPORAL_API_KEY"} {
		if s, ok := Lookup(name); !ok || !s.Secret {
			t.Errorf("%s is not declared a secret", name)
		}
	}
	if s, ok := Lookup("GITFLEET_VALIDATE_GITHUB"); !ok || !s.family {
		t.Errorf("GITFLEET_VALIDATE_GITHUB: %+v, %t; want the provider family", s, ok)
	}
}

// gitfleetName is a GITFLEET_* name, or a prefix written GITFLEET_X_* or
// GITFLEET_X_<...> (or a constant ending in _ that code appends to).
var gitfleetName = regexp.MustCompile(`GITFLEET_[A-Z0-9_]*`)

// No code reads a GITFLEET_* variable the table does not declare: every
// GITFLEET_ name in gitfleet's Go source outside tests (constants, reads,
// help and error texts alike), in the docs, the Makefile and deploy/'s
// scripts, and every one a test reads from the environment is declared,
// or is a prefix of declared ones (GITFLEET_VALIDATE_ + provider,
// GITFLEET_RETAIN_*).
func TestEveryGitfleetVariableIsDeclared(t *testing.T) {
	root := moduleRoot(t)
	testRead := regexp.MustCompile(`(?:Getenv|LookupEnv|Setenv)\("(GITFLEET_[A-Z0-9_]+)"`)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		var names []string
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range testRead.FindAllStringSubmatch(string(b), -1) {
				names = append(names, m[1])
			}
		} else {
			names = gitfleetName.FindAllString(string(b), -1)
		}
		for _, n := range names {
			if !knownName(n) {
				t.Errorf("%s: %s is not declared in internal/infra/config/settings.go", rel, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files under %s", files, root)
	}
	// The docs, the Makefile and the deployment's scripts name only
	// declared variables too (a warning's example excepted).
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	scripts, _ := filepath.Glob(filepath.Join(root, "deploy", "*", "*.sh"))
	warned := regexp.MustCompile("warning: `?GITFLEET_[A-Z0-9_]+")
	for _, path := range append(append(docs, scripts...), filepath.Join(root, "README.md"), filepath.Join(root, "Makefile")) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, n := range gitfleetName.FindAllString(warned.ReplaceAllString(string(b), ""), -1) {
			if !knownName(n) {
				t.Errorf("%s: %s is not declared in internal/infra/config/settings.go", rel, n)
			}
		}
	}
}

// knownName: declared, or a prefix (ending in _) of a declared name.
func knownName(n string) bool {
	if _, ok := Lookup(n); ok {
		return true
	}
	if !strings.HasSuffix(n, "_") {
		return false
	}
	for _, s := range append(Settings(), ToolVars...) {
		if strings.HasPrefix(s.Name, n) {
			return true
		}
	}
	return false
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}

// The markers around docs/settings.md's generated tables.
const (
	docBegin = "<!-- settings: written from internal/infra/config/settings.go; GITFLEET_DOCS_UPDATE=1 go test ./internal/infra/config -run TestSettingsDoc rewrites them -->"
	docEnd   = "<!-- end of settings -->"
)

// docs/settings.md's tables are the settings table's (WriteDocTable): a
// setting added, changed or dropped in code fails here until the doc
// follows. GITFLEET_DOCS_UPDATE=1 rewrites them instead; the prose around
// them stays as written.
func TestSettingsDoc(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "docs", "settings.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: the markers %q and %q are gone", path, docBegin, docEnd)
	}
	var want strings.Builder
	WriteDocTable(&want)
	body := "\n" + want.String()
	if doc[i+len(docBegin):j] == body {
		return
	}
	if os.Getenv("GITFLEET_DOCS_UPDATE") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i+len(docBegin)]+body+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s's settings", path)
		return
	}
	t.Errorf("docs/settings.md's tables are not the settings table's (GITFLEET_DOCS_UPDATE=1 go test ./internal/infra/config -run TestSettingsDoc rewrites them); now:\n%s", body)
}
