package gittest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run runs git on the repository at dir (GIT_DIR=dir, also the working
// directory) and returns its standard output. The environment is the
// caller's without GIT_* variables, so an outer repository cannot leak in,
// with a fixed identity for commits and the C locale.
func Run(dir string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	env := make([]string, 0, len(os.Environ())+8)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "GIT_DIR="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "LC_ALL=C",
		"GIT_AUTHOR_NAME=gittest", "GIT_AUTHOR_EMAIL=gittest@example.com",
		"GIT_COMMITTER_NAME=gittest", "GIT_COMMITTER_EMAIL=gittest@example.com")
	cmd.Dir = dir
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Git is Run that fails the test on error.
func Git(t testing.TB, dir string, stdin io.Reader, args ...string) string {
	t.Helper()
	out, err := Run(dir, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
