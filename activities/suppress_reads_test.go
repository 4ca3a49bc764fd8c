package activities

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/store"
)

// countingStorage counts object reads.
type countingStorage struct {
	*memory.Storage
	reads int
}

func (s *countingStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	s.reads++
	return s.Storage.EncodedObject(t, h)
}

// A repository's .gitleaksignore is read once per distinct tip and tree,
// not once per ref: 50,001 branches on one commit read that commit, its
// tree and the file 50,001 times each (9-11x gitleaks' time).
func TestGitleaksIgnoreReadsEachTipOnce(t *testing.T) {
	st := &countingStorage{Storage: memory.NewStorage()}
	repo, err := git.Init(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	io.WriteString(w, "abc123:config.env:generic-api-key:1\n") //nolint:errcheck // memory
	w.Close()                                                  //nolint:errcheck // memory
	blobHash := put(t, st, blob)
	tree := &object.Tree{Entries: []object.TreeEntry{{Name: ".gitleaksignore", Mode: 0o100644, Hash: blobHash}}}
	treeHash := encode(t, st, tree)
	sig := object.Signature{Name: "a", Email: "a@example.com", When: time.Unix(1, 0)}
	commit := &object.Commit{Author: sig, Committer: sig, Message: "c", TreeHash: treeHash}
	commitHash := encode(t, st, commit)

	tips := map[string]plumbing.Hash{}
	for i := range 1000 {
		tips[fmt.Sprintf("refs/heads/b%d", i)] = commitHash
	}
	st.reads = 0
	ig, err := gitleaksIgnore(&repository{repo: repo}, tips)
	if err != nil {
		t.Fatal(err)
	}
	if len(ig.Fingerprints()) != 1 {
		t.Errorf("fingerprints %v, want the file's one", ig.Fingerprints())
	}
	if st.reads > 3 {
		t.Errorf("%d object reads for 1,000 refs on one commit; want the commit, its tree and the file once each", st.reads)
	}
}

func encode(t *testing.T, st *countingStorage, o interface {
	Encode(plumbing.EncodedObject) error
}) plumbing.Hash {
	t.Helper()
	obj := st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		t.Fatal(err)
	}
	return put(t, st, obj)
}

func put(t *testing.T, st *countingStorage, obj plumbing.EncodedObject) plumbing.Hash {
	t.Helper()
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A tip whose .gitleaksignore cannot be read (its blob missing: a damaged
// tree or mirror) leaves every suppression as it was: no finding of the
// run is marked, though another tip's readable file names it, and the
// store is not asked to mark or clear any (it is nil here: asking it
// panics); the scan goes on, and the warning names no path.
func TestUnreadableGitleaksIgnoreLeavesTheMarks(t *testing.T) {
	st := &countingStorage{Storage: memory.NewStorage()}
	repo, err := git.Init(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	io.WriteString(w, "c1:config.env:generic-api-key:1\n") //nolint:errcheck // memory
	w.Close()                                              //nolint:errcheck // memory
	readable := put(t, st, blob)
	missing := plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
	sig := object.Signature{Name: "a", Email: "a@example.com", When: time.Unix(1, 0)}
	tips := map[string]plumbing.Hash{}
	for ref, file := range map[string]plumbing.Hash{"refs/heads/main": readable, "refs/heads/damaged": missing} {
		tree := encode(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: ".gitleaksignore", Mode: 0o100644, Hash: file}}})
		tips[ref] = encode(t, st, &object.Commit{Author: sig, Committer: sig, Message: ref, TreeHash: tree})
	}

	core, logs := observer.New(zap.WarnLevel)
	s := &Shards{Scanner: &scan.Scanner{}, Log: zap.New(core)}
	in := &store.FinalizeInput{Data: store.DataOps{Findings: []store.Finding{
		{Commit: "c1", Path: "config.env", RuleID: "generic-api-key", Line: 1},
	}}}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("the store was asked to mark or clear suppressions (%v)", r)
			}
		}()
		if err := s.applyIgnore(context.Background(), &repository{repo: repo}, tips, in); err != nil {
			t.Errorf("an unreadable .gitleaksignore failed the scan: %v", err)
		}
	}()
	if got := in.Data.Findings[0].Ignored; got != "" {
		t.Errorf("the finding was marked %q from a partial read of the tips' files", got)
	}
	warned := logs.FilterMessage(".gitleaksignore unreadable: suppressions left as they were").All()
	if len(warned) != 1 {
		t.Fatalf("warnings %v, want the one saying the suppressions were left", logs.All())
	}
	if e := fmt.Sprint(warned[0].ContextMap()); strings.Contains(e, "gitleaksignore") || strings.Contains(e, missing.String()) {
		t.Errorf("the warning names what it could not read: %s", e)
	}
}
