package mirror

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gofrs/flock"

	"gitfleet/internal/domain/placement"
)

// WorkerIDsDir holds, beside the mirrors, the worker ids claimed on this
// mirror directory: one file an id, locked (flock) by the process that
// holds it while it runs.
const WorkerIDsDir = ".worker-ids"

// ClaimWorkerID gives a worker started on the mirror directory root an id
// that stays with the directory (architecture §2, "Repository affinity"):
// the repositories a worker owns follow its id, and the mirrors it holds
// are in the directory, so a restart on the same directory — a recreated
// container on the same volume — must come back as the same worker. It
// takes an id an earlier process claimed here and no running one holds;
// when every one is held (a second process on a shared volume), it claims
// a new one. The id is held until release; two processes never share one.
func ClaimWorkerID(root string) (id string, release func(), err error) {
	dir := filepath.Join(root, WorkerIDsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("worker id: %w", err)
	}
	// A few rounds: another process may take the id this one just made
	// between its creation and its lock.
	for range 8 {
		ids, err := claimedIDs(dir)
		if err != nil {
			return "", nil, err
		}
		for _, id := range ids {
			if release, ok, err := tryHold(dir, id); err != nil {
				return "", nil, err
			} else if ok {
				return id, release, nil
			}
		}
		id, err := newWorkerID()
		if err != nil {
			return "", nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("worker id: %w", err)
		}
		_ = f.Close()
		if release, ok, err := tryHold(dir, id); err != nil {
			return "", nil, err
		} else if ok {
			return id, release, nil
		}
	}
	return "", nil, fmt.Errorf("worker id: could not claim one in %s", dir)
}

// claimedIDs lists the ids claimed in dir, oldest name first for a stable
// choice.
func claimedIDs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("worker id: %w", err)
	}
	var ids []string
	for _, e := range ents {
		name := e.Name()
		if e.Type().IsRegular() && !strings.HasPrefix(name, ".") && placement.ValidWorkerID(name) == nil {
			ids = append(ids, name)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// tryHold locks the id's file without waiting.
func tryHold(dir, id string) (func(), bool, error) {
	fl := flock.New(filepath.Join(dir, id))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, false, fmt.Errorf("worker id %s: %w", id, err)
	}
	if !ok {
		return nil, false, nil
	}
	return func() { _ = fl.Unlock() }, true, nil
}

// newWorkerID is "w-" and 12 random hex digits.
func newWorkerID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("worker id: %w", err)
	}
	return "w-" + hex.EncodeToString(b[:]), nil
}
