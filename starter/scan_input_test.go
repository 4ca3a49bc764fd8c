package main

import (
	"strings"
	"testing"
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
