package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// A scan that takes a while says how far it got: the counts its attempt's
// heartbeats carry, polled from the pending activity, on standard error
// (standard output keeps the result alone). Before, nothing was printed
// until the scan ended. The scan is held, not timed: the test takes every
// scan slot, so the walk goes through the history and the blobs wait; the
// progress line is the event that lets them go.
func TestScanPrintsProgressWhileItRuns(t *testing.T) {
	const commits = 300
	dir, _ := gitRepo(t)
	var stream bytes.Buffer // fast-import: one file per commit, each on the last
	for i := 1; i <= commits; i++ {
		data := fmt.Sprintf("line %d\n", i)
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter t <t@example.com> %d +0000\ndata 2\nc\n", 1700000000+i)
		fmt.Fprintf(&stream, "M 644 inline f%04d.txt\ndata %d\n%s\n", i, len(data), data)
	}
	imp := exec.Command("git", "-C", dir, "fast-import", "--quiet")
	imp.Stdin = &stream
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}

	held := 0
	release := func() {
		for ; held > 0; held-- {
			<-scanSlots
		}
	}
	t.Cleanup(release)
	for ; held < cap(scanSlots); held++ {
		scanSlots <- struct{}{}
	}
	defer func(was time.Duration) { attemptsEvery = was }(attemptsEvery)
	attemptsEvery = 50 * time.Millisecond

	progress := make(chan string, 1)
	var out bytes.Buffer
	errOut := &watchWriter{prefix: "  progress  ", seen: progress}
	root := newRoot(&out, errOut, getenv)
	root.SetArgs([]string{"scan", dir})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	var line string
	select {
	case line = <-progress:
	case err := <-done:
		t.Fatalf("the scan ended (%v) without a progress line:\n%s%s", err, out.String(), errOut)
	case <-time.After(time.Minute): // a deadline, not a pace: a heartbeat is due every 3.3s
		t.Fatalf("no progress line in a minute of scanning:\n%s%s", out.String(), errOut)
	}
	want := regexp.MustCompile(`^  progress  ` + fmt.Sprint(commits) + ` commits walked, [0-9,]+ blobs? scanned \([0-9.]+ [KMG]?i?B\), [0-9,]+ findings? so far$`)
	if !want.MatchString(line) {
		t.Errorf("progress line %q, want %s", line, want)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("scan: %v\n%s%s", err, out.String(), errOut)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("scanned   %d commits, %d blobs", commits, commits)) || strings.Contains(out.String(), "progress") {
		t.Errorf("standard output is not the result alone:\n%s", out.String())
	}
}

// watchWriter is a standard error that hands the first line starting with
// prefix to seen.
type watchWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	prefix string
	seen   chan string
	told   bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.told {
		for _, l := range strings.Split(w.buf.String(), "\n") {
			if strings.HasPrefix(l, w.prefix) {
				w.told = true
				w.seen <- l
				break
			}
		}
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
