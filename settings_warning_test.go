package gitfleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The binaries warn at start about a GITFLEET_* variable no setting
// declares, naming the closest one (config.Unknown, whose own test covers
// the cases), and carry on: --help still succeeds.
func TestBinariesWarnAboutUnknownSettings(t *testing.T) {
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./worker", "./starter").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "warning: GITFLEET_SCAN_BATCHES is not a gitfleet setting (did you mean GITFLEET_SCAN_BATCH?)"
	for _, name := range []string{"worker", "starter"} {
		cmd := exec.Command(filepath.Join(bin, name), "--help")
		cmd.Env = []string{"GITFLEET_SCAN_BATCHES=100", "GITFLEET_SCAN_BATCH=100"}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GITFLEET_") { // the test's own environment may set any
				cmd.Env = append(cmd.Env, kv)
			}
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("%s --help: %v\n%s", name, err, stderr.String())
		}
		if got := stderr.String(); !strings.Contains(got, want) || strings.Count(got, "warning:") != 1 {
			t.Errorf("%s's warnings: %q, want %q alone", name, got, want)
		}
	}
}
