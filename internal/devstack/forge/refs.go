package forge

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDefaultBranch is returned when deleting a repository's default
// branch, which GitHub refuses.
var ErrDefaultBranch = errors.New("cannot delete the default branch")

// ErrNoRef is returned for a branch or tag that does not exist.
var ErrNoRef = errors.New("no such branch or tag")

// DeleteBranch deletes a branch other than the default one, like
// `git push --delete`; the App webhooks get push (deleted) and delete.
func (f *Forge) DeleteBranch(owner, name, branch string) error {
	if err := ValidBranch(branch); err != nil {
		return err
	}
	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return err
	}
	defer rs.opMu.Unlock()
	f.reg.mu.RLock()
	def := rs.defaultBranch
	f.reg.mu.RUnlock()
	if branch == def {
		return fmt.Errorf("forge: %s/%s branch %s: %w", owner, name, branch, ErrDefaultBranch)
	}
	return f.deleteRef(rs, "refs/heads/"+branch)
}

// CreateTag creates a lightweight tag at target (a commit id or a branch;
// "" for the default branch's tip) and returns the commit it points at;
// the App webhooks get push (created) and create (ref_type tag).
func (f *Forge) CreateTag(owner, name, tag, target string) (string, error) {
	if err := ValidBranch(tag); err != nil {
		return "", err
	}
	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return "", err
	}
	defer rs.opMu.Unlock()
	dir := f.gitDirOf(rs.id)
	if target == "" {
		f.reg.mu.RLock()
		target = "refs/heads/" + rs.defaultBranch
		f.reg.mu.RUnlock()
	}
	sha, err := f.run(dir, nil, nil, "rev-parse", "--verify", "--quiet", target+"^{commit}")
	if err != nil || sha == "" {
		return "", fmt.Errorf("forge: %s/%s %s: %w", owner, name, target, ErrNoRef)
	}
	ref := "refs/tags/" + tag
	if _, err := f.run(dir, nil, nil, "update-ref", ref, sha, zeroOID); err != nil {
		return "", fmt.Errorf("forge: %s/%s tag %s: %w", owner, name, tag, ErrExists)
	}
	f.touchPushed(rs, -1)
	f.emitRefUpdate(rs, ref, zeroOID, sha, false)
	return sha, nil
}

// DeleteTag deletes a tag; the App webhooks get push (deleted) and delete.
func (f *Forge) DeleteTag(owner, name, tag string) error {
	if err := ValidBranch(tag); err != nil {
		return err
	}
	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return err
	}
	defer rs.opMu.Unlock()
	return f.deleteRef(rs, "refs/tags/"+tag)
}

// deleteRef removes a ref (rs.opMu held) and sends its events.
func (f *Forge) deleteRef(rs *repoState, ref string) error {
	dir := f.gitDirOf(rs.id)
	old, err := f.run(dir, nil, nil, "for-each-ref", "--format=%(objectname)", ref)
	if err != nil {
		return err
	}
	if old = strings.TrimSpace(old); old == "" {
		return fmt.Errorf("forge: %s: %w", ref, ErrNoRef)
	}
	if _, err := f.run(dir, nil, nil, "update-ref", "-d", ref, old); err != nil {
		return err
	}
	f.touchPushed(rs, -1)
	f.emitRefUpdate(rs, ref, old, zeroOID, false)
	return nil
}
