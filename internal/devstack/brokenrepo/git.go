package brokenrepo

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// git runs git with no user or system configuration, a fixed identity and
// the C locale. With gitDir set it works on that repository (GIT_DIR);
// otherwise in the working directory cwd.
func git(gitDir, cwd string, stdin io.Reader, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	base := make([]string, 0, len(os.Environ())+12)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			base = append(base, kv)
		}
	}
	base = append(base, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "LC_ALL=C",
		"GIT_AUTHOR_NAME=brokenrepo", "GIT_AUTHOR_EMAIL=brokenrepo@example.com",
		"GIT_COMMITTER_NAME=brokenrepo", "GIT_COMMITTER_EMAIL=brokenrepo@example.com")
	if gitDir != "" {
		base = append(base, "GIT_DIR="+gitDir)
		if cwd == "" {
			cwd = gitDir
		}
	}
	cmd.Env = append(base, env...)
	cmd.Dir = cwd
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// repo builds one bare repository. Its first error sticks: later calls do
// nothing and return "", and build returns that error.
type repo struct {
	dir   string
	clock int64 // the next commit's date: commits are deterministic
	err   error
}

func (r *repo) fail(err error) {
	if r.err == nil && err != nil {
		r.err = err
	}
}

func (r *repo) git(stdin io.Reader, args ...string) string {
	if r.err != nil {
		return ""
	}
	out, err := git(r.dir, "", stdin, nil, args...)
	r.fail(err)
	return out
}

func (r *repo) init() {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		r.fail(err)
		return
	}
	r.git(nil, "init", "--quiet", "--bare", "--initial-branch=main", r.dir)
	r.clock = 1_700_000_000
}

// blob writes a loose blob.
func (r *repo) blob(content string) string {
	return r.git(strings.NewReader(content), "hash-object", "-w", "--stdin")
}

// tree writes the tree of files (path → content; paths '/'-separated) with
// loose objects, and returns its id. A content starting with "blob:" names
// an existing blob by id instead.
func (r *repo) tree(files map[string]string) string {
	type entry struct{ mode, typ, id, name string }
	dirs := map[string]map[string]string{}
	var here []entry
	for p, content := range files {
		dir, rest, nested := strings.Cut(p, "/")
		if nested {
			if dirs[dir] == nil {
				dirs[dir] = map[string]string{}
			}
			dirs[dir][rest] = content
			continue
		}
		id, ok := strings.CutPrefix(content, "blob:")
		if !ok {
			id = r.blob(content)
		}
		here = append(here, entry{"100644", "blob", id, p})
	}
	for name, sub := range dirs {
		here = append(here, entry{"040000", "tree", r.tree(sub), name})
	}
	slices.SortFunc(here, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var in strings.Builder
	for _, e := range here {
		fmt.Fprintf(&in, "%s %s %s\t%s\n", e.mode, e.typ, e.id, e.name)
	}
	return r.git(strings.NewReader(in.String()), "mktree")
}

// commit writes a commit of tree with the given parents.
func (r *repo) commit(tree, msg string, parents ...string) string {
	if r.err != nil {
		return ""
	}
	args := []string{"commit-tree", tree, "-m", msg}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	r.clock += 60
	date := fmt.Sprintf("@%d +0000", r.clock)
	out, err := git(r.dir, "", nil, []string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}, args...)
	r.fail(err)
	return out
}

// commitFiles commits a tree of files on top of parents.
func (r *repo) commitFiles(files map[string]string, msg string, parents ...string) string {
	return r.commit(r.tree(files), msg, parents...)
}

// ref points ref name at id (a new ref, no reflog).
func (r *repo) ref(name, id string) { r.git(nil, "update-ref", name, id) }

// tag writes an annotated tag named name of object id and returns the tag
// object's id; the ref refs/tags/<name> is not written.
func (r *repo) tag(name, id, typ string) string {
	r.clock += 60
	obj := fmt.Sprintf("object %s\ntype %s\ntag %s\ntagger brokenrepo <brokenrepo@example.com> %d +0000\n\n%s\n",
		id, typ, name, r.clock, name)
	return r.git(strings.NewReader(obj), "mktag")
}

// write is file surgery: it writes a file under the repository directory,
// replacing a read-only one.
func (r *repo) write(rel string, data []byte) {
	if r.err != nil {
		return
	}
	p := filepath.Join(r.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.fail(err)
		return
	}
	if _, err := os.Stat(p); err == nil {
		r.fail(os.Chmod(p, 0o644))
	}
	r.fail(os.WriteFile(p, data, 0o644))
}

// loose is the path of a loose object, relative to the repository.
func loose(id string) string {
	if len(id) < 3 {
		return ""
	}
	return path.Join("objects", id[:2], id[2:])
}

// packs lists the repository's pack files.
func (r *repo) packs() []string {
	if r.err != nil {
		return nil
	}
	ps, err := filepath.Glob(filepath.Join(r.dir, "objects", "pack", "*.pack"))
	r.fail(err)
	return ps
}
