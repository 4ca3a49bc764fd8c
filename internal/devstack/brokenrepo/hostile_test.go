package brokenrepo

import (
	"os"
	"testing"
)

// Every hostile case builds, and is what it says at the level of its
// files (git is not asked: it would exhaust its memory on the bombs).
func TestHostileCasesBuild(t *testing.T) {
	parent := t.TempDir()
	for _, c := range Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir + "/HEAD"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
