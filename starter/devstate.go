package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// What `starter dev` keeps about itself under its data directory (see
// dev.go, built with the devstack tag): the children's logs and whether
// the demo ran on this state before.

// childLog opens the log file of a child of the dev stack (the worker, a
// runner) under dataDir/logs, appending: its lines stay off the terminal,
// which tells the demo's story, and survive a restart of the child.
func childLog(dataDir, what string) (*os.File, string, error) {
	dir := filepath.Join(dataDir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	name := strings.NewReplacer(" ", "-", "/", "-").Replace(strings.TrimPrefix(what, "the ")) + ".log"
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", err
	}
	return f, path, nil
}

// demoMarker is the file the demo leaves once it has run on a data
// directory.
const demoMarker = "demo.done"

// demoContinues says, when the demo already ran on dataDir's state, that
// this run continues from it — and so why its first collection is not a
// new repository — or "" on a fresh directory.
func demoContinues(dataDir string) string {
	if _, err := os.Stat(filepath.Join(dataDir, demoMarker)); err != nil {
		return ""
	}
	return fmt.Sprintf("The demo continues from the state an earlier run saved in %s: gitfleet already knows its\n"+
		"    repositories, so demo/hello resolves as case D (renamed back from demo/hello-world), not A (new).\n"+
		"    Stop, remove %s and run again for a fresh start.", dataDir, dataDir)
}

// markDemoRan records that the demo ran on dataDir's state.
func markDemoRan(dataDir string) error {
	return os.WriteFile(filepath.Join(dataDir, demoMarker), []byte("the demo ran on this state\n"), 0o644)
}
