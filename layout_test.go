package gitfleet

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const devstack = "gitfleet/internal/devstack/"

// deps lists the packages the given ones link, with build tags.
func deps(t *testing.T, tags string, pkgs ...string) []string {
	t.Helper()
	args := append([]string{"list", "-deps", "-tags", tags}, pkgs...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// The production binaries link none of the development stack (forge,
// PostgreSQL cluster, Temporal CLI launcher, generators, test helpers);
// the devstack-tagged starter does, which shows the check can fail.
func TestProductionBinariesLinkNoDevStack(t *testing.T) {
	for _, p := range deps(t, "", "./worker", "./starter") {
		if strings.HasPrefix(p, devstack) {
			t.Errorf("a production binary links %s", p)
		}
	}
	found := false
	for _, p := range deps(t, "devstack", "./starter") {
		found = found || p == devstack+"forge"
	}
	if !found {
		t.Error("the devstack-tagged starter does not link the forge: is `starter dev` still built with -tags devstack?")
	}
}

// The same, on the built binaries' symbol tables.
func TestProductionBinarySymbols(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []struct{ pkg, tags string }{{"./worker", ""}, {"./starter", ""}, {"./starter", "devstack"}} {
		bin := filepath.Join(dir, filepath.Base(b.pkg)+b.tags)
		if out, err := exec.Command("go", "build", "-tags", b.tags, "-o", bin, b.pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
		out, err := exec.Command("go", "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", bin, err)
		}
		linked := strings.Contains(string(out), devstack)
		if want := b.tags == "devstack"; linked != want {
			t.Errorf("%s (tags %q): devstack symbols linked = %t, want %t", b.pkg, b.tags, linked, want)
		}
	}
}
