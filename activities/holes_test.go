package activities_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// bareRepo is a bare repository whose objects are loose files, so a test
// can take one away and put it back.
type bareRepo struct {
	t   *testing.T
	dir string
	tip string
}

func newBareRepo(t *testing.T) *bareRepo {
	dir := filepath.Join(t.TempDir(), "repo.git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, nil, "init", "--bare", "-q", "-b", "main")
	return &bareRepo{t: t, dir: dir}
}

func (r *bareRepo) blob(content string) string {
	return strings.TrimSpace(gittest.Git(r.t, r.dir, strings.NewReader(content), "hash-object", "-w", "--stdin"))
}

// commit adds a commit on main with files (name → blob id) as its tree.
func (r *bareRepo) commit(files map[string]string) string {
	var tree strings.Builder
	for name, id := range files {
		fmt.Fprintf(&tree, "100644 blob %s\t%s\n", id, name)
	}
	t := strings.TrimSpace(gittest.Git(r.t, r.dir, strings.NewReader(tree.String()), "mktree", "--missing"))
	args := []string{"commit-tree", t, "-m", "change"}
	if r.tip != "" {
		args = append(args, "-p", r.tip)
	}
	r.tip = strings.TrimSpace(gittest.Git(r.t, r.dir, nil, args...))
	gittest.Git(r.t, r.dir, nil, "update-ref", "refs/heads/main", r.tip)
	return r.tip
}

func (r *bareRepo) object(id string) string { return filepath.Join(r.dir, "objects", id[:2], id[2:]) }

// A blob the repository lacks is a hole: the run still moves the
// watermarks, so the next run walks only the new commits and tries the
// hole again; the run says the hole cannot be recovered (the repository
// is the source). Once the blob is back, it is read and its secret found.
func TestAMissingBlobIsAHoleNotARescan(t *testing.T) {
	s := shards(t, time.Minute, 10)
	r := newBareRepo(t)
	alpha, secret := r.blob("alpha\n"), r.blob("TOKEN="+ghToken+"\n")
	first := r.commit(map[string]string{"a.txt": alpha, "secret.env": secret})
	r.commit(map[string]string{"a.txt": alpha, "secret.env": secret, "b.txt": r.blob("beta\n")})
	spec, shardID := localShard(t, s, r.dir)
	kept, err := os.ReadFile(r.object(secret))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.object(secret)); err != nil {
		t.Fatal(err)
	}
	scan := func(owner string) (shard.Receipt, shard.Status) {
		t.Helper()
		l := lease(t, s, shardID, owner)
		rc, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec})
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		st, err := s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: l, ReceiptID: rc.ID})
		if err != nil {
			t.Fatal(err)
		}
		return rc, st
	}

	rc, st := scan("o1")
	if rc.Complete || !rc.Covered || rc.Missing != 1 || rc.Lost != 1 || rc.Holes != 0 || rc.Commits != 2 || st != shard.Done {
		t.Fatalf("first scan: %s %+v; want covered, 1 missing blob lost (the repository is the source), Done", st, rc)
	}
	scope, _ := env.Store.Scope(context.Background(), shardID, s.Scanner.Policy())
	if marks, _ := env.Store.Watermarks(context.Background(), scope); marks["refs/heads/main"] != r.tip {
		t.Fatalf("watermarks %v, want main at its tip despite the hole", marks)
	}
	if hs, _ := env.Store.Holes(context.Background(), scope); len(hs) != 1 || hs[0].Path != "secret.env" || hs[0].Commit != first ||
		hs[0].Reason != store.HoleMissing {
		t.Fatalf("holes %+v, want secret.env of the first commit, missing", hs)
	}

	// A new commit: only it is walked, and the hole tried again.
	r.commit(map[string]string{"a.txt": alpha, "secret.env": secret, "c.txt": r.blob("gamma\n")})
	rc, st = scan("o2")
	if rc.Commits != 1 || rc.BlobsScanned != 1 || rc.Missing != 1 || rc.Lost != 1 || st != shard.Done {
		t.Fatalf("scan after a commit: %s %+v; want 1 commit walked, 1 blob scanned, the hole tried again", st, rc)
	}

	// The blob is back: read, its secret found where it was introduced.
	if err := os.WriteFile(r.object(secret), kept, 0o444); err != nil {
		t.Fatal(err)
	}
	rc, st = scan("o3")
	if !rc.Complete || rc.Commits != 0 || rc.BlobsScanned != 1 || rc.Findings != 1 || rc.Lost+rc.Holes != 0 || st != shard.Done {
		t.Fatalf("scan with the blob back: %s %+v; want the hole read, its secret found, Complete", st, rc)
	}
	fs := findingSet(t, shardID)
	for k := range fs {
		if k.path != "secret.env" || k.commit != first {
			t.Fatalf("finding %+v, want secret.env in the first commit", k)
		}
	}
	page, err := env.Store.Secrets(context.Background(), scope, store.Page{})
	if err != nil || len(page.Secrets) != 1 || page.Secrets[0].Status != store.Present {
		t.Fatalf("secrets %+v, %v; want the one secret, present at main's tip", page.Secrets, err)
	}
}

// A scan out of time keeps what it did: the refs it walked to their tips
// get their watermarks, its blobs are seen; the next run goes on from
// there and gets further, until the shard is done, each blob scanned once.
func TestAScanContinuesAcrossAttempts(t *testing.T) {
	s := shards(t, time.Minute, 20)
	dir, info := generate(t, repogen.Spec{Commits: 120, FilesPerCommit: 3, Refs: 6, BlobSize: 200, Seed: 31})
	spec, shardID := localShard(t, s, dir)
	var scanned int64
	runs, lastCommits := 0, int64(0)
	for st := shard.Active; st == shard.Active; runs++ {
		if runs > info.Blobs {
			t.Fatalf("%d runs and the shard is still Active: the runs make no progress", runs)
		}
		l := lease(t, s, shardID, fmt.Sprintf("o%d", runs))
		rc, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec, MaxDuration: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if rc.BlobsScanned+rc.BlobsSkipped == 0 && !rc.Complete {
			t.Fatalf("run %d out of time without reading anything new: %+v", runs, rc)
		}
		scanned += rc.BlobsScanned + rc.BlobsSkipped
		lastCommits = rc.Commits
		if st, err = s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: l, ReceiptID: rc.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if scanned != int64(info.Blobs) || runs < 3 {
		t.Fatalf("%d blobs scanned in %d runs, want each of the %d once, over several runs", scanned, runs, info.Blobs)
	}
	if lastCommits >= 120 {
		t.Fatalf("the last run walked %d commits: it went through the whole history again", lastCommits)
	}
	scope, _ := env.Store.Scope(context.Background(), shardID, s.Scanner.Policy())
	if marks, _ := env.Store.Watermarks(context.Background(), scope); len(marks) != len(info.Refs) {
		t.Fatalf("%d watermarks, want one for each of the %d refs", len(marks), len(info.Refs))
	}
}

// A blob damaged in our own copy of a mirror is a hole a later run may
// read: the run discards the mirror, and the next fetches it afresh and
// reads the blob (its secret found), Done.
func TestADamagedMirrorBlobIsReadFromAFreshCopy(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	if _, err := fg.CreateRepo("acme", "holes"); err != nil {
		t.Fatal(err)
	}
	secret := "TOKEN=" + ghToken + "\n" + strings.Repeat("padding line\n", 40)
	if _, err := fg.Commit("acme", "holes", "main", map[string]string{"a.txt": "a\n", "secret.env": secret}, "a"); err != nil {
		t.Fatal(err)
	}
	s := shards(t, time.Minute, 100)
	if s.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "holes")
	spec := shard.Spec{Key: "holes:" + url, Target: target.Target{Location: url}}
	shardID, err := s.EnsureShard(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := s.SyncShardMirror(context.Background(), workflows.ShardWork{Lease: lease(t, s, shardID, "o"), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	damage(t, s.Mirrors.Path(url), gittest.Hash("blob", []byte(secret)))
	scan := func(owner string) (shard.Receipt, shard.Status) {
		t.Helper()
		l := lease(t, s, shardID, owner)
		rc, err := s.ScanShard(context.Background(), workflows.ShardWork{Lease: l, Spec: spec, RefsDigest: digest})
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		st, err := s.CheckpointShard(context.Background(), workflows.CheckpointInput{Lease: l, ReceiptID: rc.ID})
		if err != nil {
			t.Fatal(err)
		}
		return rc, st
	}
	rc, st := scan("o")
	if rc.Corrupt != 1 || rc.Holes != 1 || rc.Lost != 0 || !rc.Covered || rc.Findings != 0 || st != shard.Active {
		t.Fatalf("scan of the damaged copy: %s %+v; want the blob a hole a later run may read, Active", st, rc)
	}
	if _, err := os.Stat(s.Mirrors.Path(url)); !os.IsNotExist(err) {
		t.Fatalf("the damaged mirror is still there (%v): the next run would read the same copy", err)
	}
	rc, st = scan("o2")
	if !rc.Complete || rc.Commits != 0 || rc.BlobsScanned != 1 || rc.Findings != 1 || rc.Holes+rc.Lost != 0 || st != shard.Done {
		t.Fatalf("scan of a fresh copy: %s %+v; want the hole read, its secret found, Done", st, rc)
	}
}

// damage flips bytes inside blob's compressed data in the mirror's pack.
func damage(t *testing.T, repo string, blob plumbing.Hash) {
	t.Helper()
	packs, err := gitread.OpenPacks(repo)
	if err != nil {
		t.Fatal(err)
	}
	_, off, ok := packs.Position(blob)
	packs.Close() //nolint:errcheck // read only
	files, _ := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.pack"))
	if !ok || len(files) != 1 {
		t.Fatalf("blob %s in the mirror's packs: %t, %d packs", blob, ok, len(files))
	}
	if err := os.Chmod(files[0], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, off+4); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] ^= 0xff
	}
	if _, err := f.WriteAt(buf, off+4); err != nil {
		t.Fatal(err)
	}
}
