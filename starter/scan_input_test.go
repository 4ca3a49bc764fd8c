package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"gitfleet/activities"
)

// Control characters in a target are bad input (exit 2, nothing started),
// not a gRPC error about a header; a long argument is echoed once, short.
func TestScanRefusesControlCharactersAndShortensLongInput(t *testing.T) {
	long := "/tmp/" + strings.Repeat("a", 5000)
	for _, tc := range []struct {
		name, target, want string
	}{
		{"newline in a path", t.TempDir() + "/a\nb", "control character"},
		{"escape in a URL", fg.URL() + "/o/r\x1b[31m", "control character"},
		{"long path", long, "(5,005 characters)"},
		{"long URL", fg.URL() + "/" + strings.Repeat("b", 5000), "characters)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := starter(t, "scan", tc.target)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(out, "Scanning") {
				t.Errorf("exit %d, want %d saying %q and starting nothing\n%s%.500s", code, exitUsage, tc.want, out, errOut)
			}
			if len(errOut) > 400 {
				t.Errorf("%d bytes of stderr for one bad argument: %.500s", len(errOut), errOut)
			}
			if strings.ContainsAny(strings.TrimSuffix(errOut, "\n"), "\n\x1b") {
				t.Errorf("a control character reached the terminal: %q", errOut)
			}
		})
	}
}

// unreachableWaits are the test worker's waits between attempts at an
// unreachable host (the default's take minutes).
var unreachableWaits = []time.Duration{3 * time.Second, 3 * time.Second}

// A host that refuses connections fails the scan after a bounded number
// of attempts, with the cause; while it waits the starter says which
// attempt failed and when the next one is.
func TestScanOfAnUnreachableHostFailsWithinItsAttempts(t *testing.T) {
	attemptsEvery = 500 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/team/app.git"
	l.Close() // nothing listens there now: connection refused
	out, errOut, code := starter(t, "scan", url)
	for _, want := range []string{"cannot reach", "attempt 1 failed, retrying in", "connection refused",
		"FAILED", "gave up after 3 attempts: connection refused"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if code != exitFailed || t.Failed() {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// The test worker's collections give an unreachable host up as soon as
// its scans do.
func init() { activities.DefaultUnreachableWaits = unreachableWaits }

// A collection while the Git host and the API are down (nothing listens
// where they were) is bounded: it says each failed attempt while it waits,
// then fails with the cause.
func TestCollectWhileTheHostIsDownIsBounded(t *testing.T) {
	attemptsEvery = 500 * time.Millisecond
	o, _ := newRepo(t)
	up, err := fg.GoDown()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := up(); err != nil {
			t.Fatal(err)
		}
	}()
	out, errOut, code := starter(t, "collect", o+"/app")
	for _, want := range []string{"SyncMirror attempt 1 failed, retrying in", "connection refused", "FAILED", "gave up after 3 attempts"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code != exitFailed || t.Failed() {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
