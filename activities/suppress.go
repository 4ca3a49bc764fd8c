package activities

import (
	"context"
	"errors"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.uber.org/zap"

	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/suppress"
	"gitfleet/internal/infra/store"
)

// inlineCause is gitleaks:allow when the line of f's secret carries it,
// as gitleaks skips such a finding: the scanner decides it on the content
// it found the secret in (a file inside an archive, a compressed file's
// content), whose offsets the blob's are not.
func inlineCause(f scan.Finding) string {
	if !f.Inline {
		return ""
	}
	return string(suppress.Inline)
}

// applyIgnore marks the scope's findings named by the .gitleaksignore at
// the root of the scanned tips (those of in.Data too, which Finalize
// writes), and clears the marks of those no file names any more. A tip
// whose file cannot be read leaves every mark as it was.
func (s *Shards) applyIgnore(ctx context.Context, repo *repository, tips map[string]plumbing.Hash, in *store.FinalizeInput) error {
	ig, err := gitleaksIgnore(repo, tips)
	if err != nil {
		s.logger(ctx, in.Lease.ShardID, in.Lease.Fence).Warn(".gitleaksignore unreadable: suppressions left as they were",
			zap.String("error", s.Scanner.Digest(err.Error())))
		return nil
	}
	for i, f := range in.Data.Findings {
		if f.Ignored == "" && ig.Match(f.Commit, f.Path+archiveSuffix(f.Archive), f.RuleID, f.Line) {
			in.Data.Findings[i].Ignored = string(suppress.IgnoreFile)
		}
	}
	_, err = s.Store.ApplyIgnore(ctx, in.ScopeID, ig.Fingerprints())
	return err
}

func archiveSuffix(inner string) string {
	if inner == "" {
		return ""
	}
	return "!" + inner
}

// gitleaksIgnore reads the .gitleaksignore at the root of each tip's tree
// (gitleaks reads the one at the root of what it scans) and returns their
// fingerprints together; a file over suppress.MaxIgnoreBytes is read no
// further than that.
func gitleaksIgnore(repo *repository, tips map[string]plumbing.Hash) (suppress.Ignore, error) {
	all := suppress.Ignore{}
	// Many refs share a tip and many tips a tree (50,001 branches on one
	// commit read that commit 50,001 times): each object is read once.
	seenTip, seenTree, read := map[plumbing.Hash]bool{}, map[plumbing.Hash]bool{}, map[plumbing.Hash]bool{}
	for _, tip := range tips {
		if seenTip[tip] {
			continue
		}
		seenTip[tip] = true
		tree, err := tipTree(repo, tip)
		if err != nil {
			return nil, err
		}
		if tree == nil || seenTree[tree.Hash] {
			continue
		}
		seenTree[tree.Hash] = true
		e, err := tree.FindEntry(suppress.IgnoreFileName)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !e.Mode.IsFile() || read[e.Hash] {
			continue
		}
		read[e.Hash] = true
		blob, err := repo.repo.BlobObject(e.Hash)
		if err != nil {
			return nil, err
		}
		r, err := blob.Reader()
		if err != nil {
			return nil, err
		}
		content, err := io.ReadAll(io.LimitReader(r, suppress.MaxIgnoreBytes))
		_ = r.Close()
		if err != nil {
			return nil, err
		}
		ig, _ := suppress.ParseIgnore(content)
		all.Add(ig)
	}
	return all, nil
}

// tipTree is the tree at a tip: a commit's, through any tags; nil for a
// tip that is a blob.
func tipTree(repo *repository, h plumbing.Hash) (*object.Tree, error) {
	obj, err := repo.repo.Object(plumbing.AnyObject, h)
	for depth := 0; err == nil; depth++ {
		switch o := obj.(type) {
		case *object.Tag:
			if depth > 10 {
				return nil, errors.New("a chain of tags too long")
			}
			obj, err = o.Object()
			continue
		case *object.Commit:
			return o.Tree()
		case *object.Tree:
			return o, nil
		}
		return nil, nil
	}
	return nil, err
}
