//go:build !race

// The race detector makes sync.Pool drop items, so allocation counts only
// mean something without it.

package scan

import (
	"strings"
	"testing"
)

func TestCleanScanDoesNotAllocate(t *testing.T) {
	s := newTestScanner(t, mustDefault(t))
	blob := []byte(strings.Repeat("func add(a, b int) int { return a + b }\n", 100))
	tokenBlob := []byte(strings.Repeat("tokens := lexer.Next(nextToken)\n", 100))
	for name, b := range map[string][]byte{"clean": blob, "keyword, no match": tokenBlob} {
		if n := testing.AllocsPerRun(100, func() { s.Scan("x.go", b, "") }); n != 0 {
			t.Errorf("%s blob: %v allocations per scan", name, n)
		}
	}
}
