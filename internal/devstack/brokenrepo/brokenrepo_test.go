package brokenrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every case builds, and its damage is what it says: git itself sees it.
func TestCasesBuild(t *testing.T) {
	parent := t.TempDir()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			out, err := git(dir, "", nil, nil, "for-each-ref", "--format=%(objecttype) %(refname)")
			t.Logf("for-each-ref: %d lines, err %v", strings.Count(out, "\n"), err)
			fsck, err := git(dir, "", nil, nil, "fsck", "--no-dangling")
			t.Logf("fsck: %.300s err %v", fsck, err)
			if left, _ := filepath.Glob(filepath.Join(parent, c.Name+".git.*")); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			_ = os.RemoveAll(dir)
		})
	}
}
