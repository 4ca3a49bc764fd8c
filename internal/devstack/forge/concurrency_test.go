package forge

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentClonesWhileRenaming runs clones, API reads and log reads
// while the repository is renamed and committed to. Run with -race.
func TestConcurrentClonesWhileRenaming(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	r, first := seeded(t, f, "alice", "r0")

	const cloners, clonesEach = 4, 4
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		heads     []string
		cloneErrs []error
		apiOK     atomic.Int64
	)
	done := make(chan struct{})
	for g := 0; g < cloners; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < clonesEach; i++ {
				// Always through the original name: redirected after the
				// first rename.
				repo, err := cloneMem(f.CloneURL("alice", "r0"), nil)
				mu.Lock()
				if err != nil {
					cloneErrs = append(cloneErrs, err)
				} else if h, herr := repo.Head(); herr != nil {
					cloneErrs = append(cloneErrs, herr)
				} else {
					heads = append(heads, h.Hash().String())
				}
				mu.Unlock()
			}
		}()
	}
	// API readers.
	var readers sync.WaitGroup
	for g := 0; g < 2; g++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			gh := ghClient(t, f, "")
			for {
				select {
				case <-done:
					return
				default:
				}
				repo, _, err := gh.Repositories.Get(ctx(t), "alice", "r0")
				if err != nil {
					t.Errorf("API read during renames: %v", err)
					return
				}
				if repo.GetID() != r.ID {
					t.Errorf("API read got id %d, want %d", repo.GetID(), r.ID)
					return
				}
				apiOK.Add(1)
				_ = f.Requests()
			}
		}()
	}

	// Mutate until the cloners are done.
	commits := map[string]bool{first: true}
	clonersDone := make(chan struct{})
	go func() { wg.Wait(); close(clonersDone) }()
	cur := "r0"
	for i := 1; ; i++ {
		select {
		case <-clonersDone:
		default:
			next := "r" + strconv.Itoa(i)
			if err := f.Rename("alice", cur, next); err != nil {
				t.Fatalf("rename %s -> %s: %v", cur, next, err)
			}
			cur = next
			sha, err := f.Commit("alice", cur, "main", map[string]string{"n": fmt.Sprint(i)}, "step "+strconv.Itoa(i))
			if err != nil {
				t.Fatalf("commit: %v", err)
			}
			commits[sha] = true
			_, _ = f.APIRequests(), f.GitRequests()
			continue
		}
		break
	}
	close(done)
	readers.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(heads)+len(cloneErrs) != cloners*clonesEach {
		t.Fatalf("%d results for %d clones", len(heads)+len(cloneErrs), cloners*clonesEach)
	}
	for _, h := range heads {
		if !commits[h] {
			t.Errorf("a clone got HEAD %s, which the forge never committed", h)
		}
	}
	// A rename between a clone's ref advertisement and its pack request
	// redirects the latter, which git clients (like go-git) do not follow:
	// that is the only acceptable failure.
	for _, err := range cloneErrs {
		if !strings.Contains(err.Error(), "redirect on non-initial request") {
			t.Errorf("clone failed: %v", err)
		}
	}
	if len(heads) == 0 {
		t.Errorf("no clone succeeded; errors: %v", cloneErrs)
	}
	if apiOK.Load() == 0 {
		t.Error("no API read completed")
	}
	t.Logf("%d renames, %d clones ok, %d failed, %d API reads; errors: %v", len(commits)-1, len(heads), len(cloneErrs), apiOK.Load(), cloneErrs)
}

func TestConcurrentCommitsSerialize(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	mustCreate(t, f, "alice", "r")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Commit("alice", "r", "main", map[string]string{"f" + strconv.Itoa(i): "x"}, "c")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent commit: %v", err)
		}
	}
	if got := bareGit(t, f, "alice", "r", "rev-list", "--count", "main"); got != strconv.Itoa(n) {
		t.Errorf("history has %s commits, want %d (a lost update?)", got, n)
	}
	if got := bareGit(t, f, "alice", "r", "ls-tree", "--name-only", "main"); len(splitLines(got)) != n {
		t.Errorf("tip has files %q, want %d", got, n)
	}
}

func TestConcurrentCreateSameName(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	const n = 8
	var wg sync.WaitGroup
	var created, exists atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "Repo"
			if i%2 == 1 {
				name = "repo"
			}
			_, err := f.CreateRepo("alice", name)
			switch {
			case err == nil:
				created.Add(1)
			case errors.Is(err, ErrExists):
				exists.Add(1)
			default:
				t.Errorf("CreateRepo: %v", err)
			}
		}()
	}
	wg.Wait()
	if created.Load() != 1 || exists.Load() != n-1 {
		t.Errorf("created %d, exists %d; want 1 and %d", created.Load(), exists.Load(), n-1)
	}
	if len(f.Repos()) != 1 {
		t.Errorf("repos: %+v", f.Repos())
	}
}

func TestConcurrentDeleteAndCommit(t *testing.T) {
	t.Parallel()
	f := newForge(t)
	seeded(t, f, "alice", "r")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 5; i++ {
			_, err := f.Commit("alice", "r", "main", map[string]string{"x": strconv.Itoa(i)}, "c")
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Errorf("commit racing delete: %v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		if err := f.Delete("alice", "r"); err != nil {
			t.Errorf("delete: %v", err)
		}
	}()
	wg.Wait()
	if _, ok := f.Lookup("alice", "r"); ok {
		t.Error("repository survived Delete")
	}
	if ents := dirEntries(t, f.reposDir); len(ents) != 0 {
		t.Errorf("repos dir not empty: %v", ents)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
