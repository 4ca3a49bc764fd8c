package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The dev stack's children log to files under the data directory, one
// each, appended to across restarts, not to the terminal.
func TestDevChildrenLogToFiles(t *testing.T) {
	dir := t.TempDir()
	for range 2 { // a restart appends to the same file
		f, path, err := childLog(dir, "runner dev-1")
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, "logs", "runner-dev-1.log"); path != want {
			t.Fatalf("log at %s, want %s", path, want)
		}
		if _, err := f.WriteString("a line\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "runner-dev-1.log")); err != nil || string(b) != "a line\na line\n" {
		t.Fatalf("log holds %q, %v", b, err)
	}
	if _, path, _ := childLog(dir, "the worker"); filepath.Base(path) != "worker.log" {
		t.Fatalf("the worker logs to %s", path)
	}
}

// A second `make run` on the kept data directory says that the demo
// continues from the saved state, and why its first collection is not
// a new repository; a fresh one says nothing.
func TestDemoSaysItContinuesFromTheSavedState(t *testing.T) {
	dir := t.TempDir()
	if note := demoContinues(dir); note != "" {
		t.Fatalf("a fresh data directory: %q", note)
	}
	if err := markDemoRan(dir); err != nil {
		t.Fatal(err)
	}
	note := demoContinues(dir)
	for _, want := range []string{"continues from the state", dir, "case D", "remove " + dir} {
		if !strings.Contains(note, want) {
			t.Errorf("the note lacks %q: %s", want, note)
		}
	}
}

// make says what it builds, and that the first build is slow, before the
// build that takes minutes on a fresh machine.
func TestMakeRunSaysWhatItBuilds(t *testing.T) {
	out, err := exec.Command("make", "-n", "-C", "..", "build", "build-dev").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n: %v\n%s", err, out)
	}
	s := string(out)
	build := strings.Index(s, "go build -o bin/")
	note := strings.Index(s, "the first build compiles every dependency")
	if build < 0 || note < 0 || note > build {
		t.Fatalf("make build does not say what it builds and that the first build is slow, before it:\n%s", s)
	}
}
