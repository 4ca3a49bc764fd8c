package mirror

import (
	"os"
	"path/filepath"
	"testing"

	"gitfleet/internal/domain/placement"
)

// A worker id stays with its mirror directory: a restart (the id released,
// claimed again) comes back as the same worker; a second process on the
// same directory while the first runs gets an id of its own; restarted
// in turn, each finds one it held.
func TestClaimWorkerIDStaysWithTheDirectory(t *testing.T) {
	root := t.TempDir()
	claim := func() (string, func()) {
		t.Helper()
		id, release, err := ClaimWorkerID(root)
		if err != nil {
			t.Fatal(err)
		}
		if err := placement.ValidWorkerID(id); err != nil {
			t.Fatal(err)
		}
		return id, release
	}
	first, release := claim()
	release()
	again, release := claim()
	if again != first {
		t.Fatalf("restart on the same directory: id %q, want %q", again, first)
	}
	second, releaseSecond := claim() // a second process while the first runs
	if second == first {
		t.Fatalf("two processes on one directory share id %q", first)
	}
	releaseSecond() // the second restarts: the first's id is held, so it gets its own back
	back, releaseSecond := claim()
	if back != second {
		t.Fatalf("second process restarted: id %q, want %q", back, second)
	}
	release()
	releaseSecond()
	ids, err := os.ReadDir(filepath.Join(root, WorkerIDsDir))
	if err != nil || len(ids) != 2 {
		t.Fatalf("claimed ids: %v, %v; want 2", ids, err)
	}
	// Another directory (another volume) is another worker.
	other, rel, err := ClaimWorkerID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	if other == first || other == second {
		t.Fatalf("a fresh directory got %q, an id of another", other)
	}
}

// The ids' directory is not a mirror: the mirrors' usage does not count
// it.
func TestWorkerIDsAreNotMirrors(t *testing.T) {
	root := t.TempDir()
	m, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, release, err := ClaimWorkerID(root); err != nil {
		t.Fatal(err)
	} else {
		defer release()
	}
	if n, _, err := m.Usage(); err != nil || n != 0 {
		t.Fatalf("usage with only a worker id = %d mirrors, %v; want 0", n, err)
	}
}
