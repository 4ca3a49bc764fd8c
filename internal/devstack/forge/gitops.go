package forge

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DeleteFile, used as a value in the files map of Commit, removes that path
// from the branch instead of writing it. (An empty string is an empty file.)
const DeleteFile = "\x00forge:delete-file\x00"

// Identity used for every commit the forge writes. Commit dates are
// baseCommitTime plus a per-repository sequence number (in minutes), so the
// same sequence of operations on a repository yields the same commit ids.
const (
	commitName     = "Forge Bot"
	commitEmail    = "forge@example.invalid"
	baseCommitTime = 1700000000 // 2023-11-14T22:13:20Z
)

const zeroOID = "0000000000000000000000000000000000000000"

// gitEnv is the environment for every git child: the caller's environment
// without GIT_* variables (so an outer GIT_DIR cannot leak in), with user and
// system configuration disabled.
func gitEnv(extra ...string) []string {
	env := make([]string, 0, len(os.Environ())+8)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
	)
	return append(env, extra...)
}

// run runs git in gitDir (a bare repository) and returns its trimmed stdout.
func (f *Forge) run(gitDir string, env []string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(f.gitPath, args...)
	cmd.Dir = gitDir
	cmd.Env = gitEnv(append([]string{"GIT_DIR=" + gitDir}, env...)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("forge: git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// initBare creates the bare repository for a new repo id.
func (f *Forge) initBare(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("forge: %w", err)
	}
	if _, err := f.run(dir, nil, nil, "init", "--quiet", "--bare", "--initial-branch=main", dir); err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"uploadpack.allowReachableSHA1InWant", "true"},
		{"uploadpack.allowFilter", "true"},
		{"http.uploadpack", "true"},
		{"http.receivepack", "false"},
		{"http.getanyfile", "false"},
		{"core.logAllRefUpdates", "false"},
		{"gc.auto", "0"},
		{"gc.autoDetach", "false"},
	} {
		if _, err := f.run(dir, nil, nil, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// ValidBranch reports whether branch is usable as refs/heads/<branch>
// (a conservative subset of git check-ref-format).
func ValidBranch(branch string) error {
	bad := func(why string) error {
		return fmt.Errorf("forge: branch %q: %s: %w", branch, why, ErrInvalidName)
	}
	if branch == "" || branch == "@" {
		return bad("empty or @")
	}
	if strings.Contains(branch, "..") || strings.Contains(branch, "@{") || strings.Contains(branch, "//") {
		return bad(`contains "..", "@{" or "//"`)
	}
	if strings.HasPrefix(branch, "/") || strings.HasSuffix(branch, "/") || strings.HasSuffix(branch, ".") || strings.HasPrefix(branch, "-") {
		return bad("bad start or end")
	}
	for _, c := range branch {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return bad("forbidden character")
		}
	}
	for _, part := range strings.Split(branch, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return bad(`component starts with "." or ends with ".lock"`)
		}
	}
	return nil
}

// ValidFilePath reports whether p is usable as a file path in a commit:
// relative, slash-separated, no empty, ".", ".." or ".git" components, no
// backslashes or control characters.
func ValidFilePath(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("forge: file path %q: %s: %w", p, why, ErrInvalidPath)
	}
	if p == "" {
		return bad("empty")
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return bad("control character or backslash")
		}
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "":
			return bad("empty component (leading, trailing or double slash)")
		case part == "." || part == "..":
			return bad(`"." or ".." component`)
		case strings.EqualFold(part, ".git"):
			return bad(".git component")
		}
	}
	return nil
}

// Commit adds a commit on top of branch's tip. A missing branch is created
// from the default branch's tip (or as a root commit if that does not exist
// either). files maps slash-separated paths (nested paths
// allowed) to contents; existing files are replaced, other files are kept,
// and the value DeleteFile removes a path (a no-op if it does not exist).
// An empty map makes an empty commit. Author and committer are fixed
// ("Forge Bot <forge@example.invalid>") and dates are deterministic per
// repository. It returns the new commit id.
func (f *Forge) Commit(owner, name, branch string, files map[string]string, message string) (string, error) {
	return f.writeCommit(owner, name, branch, files, message, false)
}

// ForcePush replaces branch with a new root commit (no parent) holding
// exactly files (DeleteFile values are ignored), like a force push of an
// unrelated history. Objects no longer reachable from any ref are then
// pruned, so the old tip can no longer be fetched by id ("not our ref").
func (f *Forge) ForcePush(owner, name, branch string, files map[string]string, message string) (string, error) {
	return f.writeCommit(owner, name, branch, files, message, true)
}

func (f *Forge) writeCommit(owner, name, branch string, files map[string]string, message string, force bool) (string, error) {
	if err := ValidBranch(branch); err != nil {
		return "", err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		if err := ValidFilePath(p); err != nil {
			return "", err
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)

	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return "", err
	}
	defer rs.opMu.Unlock()
	dir := f.gitDirOf(rs.id)
	ref := "refs/heads/" + branch

	tmp, err := os.MkdirTemp(f.tmpDir, "commit-")
	if err != nil {
		return "", fmt.Errorf("forge: %w", err)
	}
	defer os.RemoveAll(tmp)
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}

	// old is the branch's current tip ("" if missing); base is the commit
	// the new one builds on: the tip, or for a new branch the default
	// branch's tip; none for ForcePush.
	old, err := f.run(dir, nil, nil, "for-each-ref", "--format=%(objectname)", ref)
	if err != nil {
		return "", err
	}
	base := old
	if base == "" && !force {
		f.reg.mu.RLock()
		def := rs.defaultBranch
		f.reg.mu.RUnlock()
		if base, err = f.run(dir, nil, nil, "for-each-ref", "--format=%(objectname)", "refs/heads/"+def); err != nil {
			return "", err
		}
	}
	if force {
		base = ""
	}
	if base != "" {
		if _, err := f.run(dir, idx, nil, "read-tree", base); err != nil {
			return "", err
		}
	}

	// Write blobs: contents go to scratch files, hashed in one process.
	var writes []string
	for _, p := range paths {
		if files[p] != DeleteFile {
			writes = append(writes, p)
		}
	}
	oids := map[string]string{}
	if len(writes) > 0 {
		var list strings.Builder
		for i, p := range writes {
			fn := filepath.Join(tmp, "blob-"+strconv.Itoa(i))
			if err := os.WriteFile(fn, []byte(files[p]), 0o644); err != nil {
				return "", fmt.Errorf("forge: %w", err)
			}
			list.WriteString(fn + "\n")
		}
		out, err := f.run(dir, nil, strings.NewReader(list.String()), "hash-object", "-w", "--no-filters", "--stdin-paths")
		if err != nil {
			return "", err
		}
		lines := strings.Split(out, "\n")
		if len(lines) != len(writes) {
			return "", fmt.Errorf("forge: hash-object returned %d ids for %d files", len(lines), len(writes))
		}
		for i, p := range writes {
			oids[p] = lines[i]
		}
	}

	var info bytes.Buffer
	for _, p := range paths {
		if oid, ok := oids[p]; ok {
			fmt.Fprintf(&info, "100644 %s\t%s\x00", oid, p)
		} else if !force {
			fmt.Fprintf(&info, "0 %s\t%s\x00", zeroOID, p)
		}
	}
	if info.Len() > 0 {
		if _, err := f.run(dir, idx, &info, "update-index", "-z", "--add", "--replace", "--index-info"); err != nil {
			return "", err
		}
	}
	tree, err := f.run(dir, idx, nil, "write-tree")
	if err != nil {
		return "", err
	}

	rs.commitSeq++
	date := fmt.Sprintf("@%d +0000", baseCommitTime+60*rs.commitSeq)
	who := []string{
		"GIT_AUTHOR_NAME=" + commitName, "GIT_AUTHOR_EMAIL=" + commitEmail, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + commitName, "GIT_COMMITTER_EMAIL=" + commitEmail, "GIT_COMMITTER_DATE=" + date,
	}
	args := []string{"commit-tree", tree}
	if base != "" {
		args = append(args, "-p", base)
	}
	args = append(args, "-F", "-")
	sha, err := f.run(dir, who, strings.NewReader(message), args...)
	if err != nil {
		return "", err
	}

	expect := old
	if expect == "" {
		expect = zeroOID
	}
	if _, err := f.run(dir, nil, nil, "update-ref", "-m", "forge", ref, sha, expect); err != nil {
		return "", err
	}
	if force && old != "" {
		if _, err := f.run(dir, nil, nil, "gc", "--quiet", "--prune=now"); err != nil {
			return "", err
		}
	}
	f.touchPushed(rs, f.sizeKB(dir))
	f.emitRefUpdate(rs, ref, old, sha, force && old != "")
	return sha, nil
}

// lockRepo finds a repository by current name and locks it for a content
// change. The caller must unlock rs.opMu.
func (f *Forge) lockRepo(owner, name string) (*repoState, error) {
	rs, err := f.lookupState(owner, name)
	if err != nil {
		return nil, err
	}
	rs.opMu.Lock()
	f.reg.mu.RLock()
	deleted := rs.deleted
	f.reg.mu.RUnlock()
	if deleted {
		rs.opMu.Unlock()
		return nil, fmt.Errorf("forge: %s/%s: %w", owner, name, ErrNotFound)
	}
	return rs, nil
}

// sizeKB estimates the repository size the way GitHub's "size" field does
// (KiB on disk). It returns -1 if it cannot tell.
func (f *Forge) sizeKB(dir string) int64 {
	out, err := f.run(dir, nil, nil, "count-objects", "-v")
	if err != nil {
		return -1
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok && (k == "size" || k == "size-pack") {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
		}
	}
	return total
}

// Import feeds a `git fast-import` stream into the repository (for building
// large or unusual histories). The stream's commands decide which refs are
// written; non-fast-forward ref updates are refused as fast-import does by
// default.
func (f *Forge) Import(owner, name string, stream io.Reader) error {
	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return err
	}
	defer rs.opMu.Unlock()
	defer f.hookRefs(rs)() // runs first: under opMu, after the import
	dir := f.gitDirOf(rs.id)
	if _, err := f.run(dir, nil, stream, "fast-import", "--quiet"); err != nil {
		return err
	}
	f.touchPushed(rs, f.sizeKB(dir))
	return nil
}

// Repack packs the repository into one pack with deltas computed afresh,
// as GitHub serves repositories, and returns the pack's size in bytes
// (fast-import writes packs with few deltas, which a plain repack would
// reuse: a history of 590 MB of source served as 182 MB instead of 48).
func (f *Forge) Repack(owner, name string) (int64, error) {
	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return 0, err
	}
	defer rs.opMu.Unlock()
	dir := f.gitDirOf(rs.id)
	if _, err := f.run(dir, nil, nil, "repack", "-adfq"); err != nil {
		return 0, err
	}
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range packs {
		fi, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// SetDefaultBranch changes the repository's default branch (its HEAD). The
// branch does not have to exist yet.
func (f *Forge) SetDefaultBranch(owner, name, branch string) error {
	defer f.hookRepoEdit(owner, name)()
	if err := ValidBranch(branch); err != nil {
		return err
	}
	rs, err := f.lockRepo(owner, name)
	if err != nil {
		return err
	}
	defer rs.opMu.Unlock()
	if _, err := f.run(f.gitDirOf(rs.id), nil, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		return err
	}
	f.reg.mu.Lock()
	rs.defaultBranch = branch
	f.reg.mu.Unlock()
	return nil
}
