//go:build linux

// The parent-death signal is Linux's.

package temporalcli

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerDiesWithParent starts a dev server from a child process (this
// test binary, see TestMain) that exits without calling Stop, and checks that
// the server is killed.
func TestServerDiesWithParent(t *testing.T) {
	path := cliPath(t)
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("dev server %d still running after its parent died", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
