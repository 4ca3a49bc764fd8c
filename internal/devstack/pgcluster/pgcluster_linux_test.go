//go:build linux

// The parent-death signal is Linux's.

package pgcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerStopsWhenParentDies starts a cluster in a child process (this
// test binary, see TestMain) that exits without calling Stop, and checks that
// the postmaster shuts down on its own.
func TestServerStopsWhenParentDies(t *testing.T) {
	needPostgres(t)
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	pidStr, sockDir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	pid, err := strconv.Atoi(pidStr)
	if err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	// Nobody called Stop, so nobody removed the socket directory.
	defer os.RemoveAll(sockDir)
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGQUIT)
			t.Fatalf("postmaster %d still running 10s after its parent died", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err == nil {
		t.Error("postmaster.pid still present: the server did not shut down cleanly")
	}
}
