package brokenrepo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gitfleet/internal/devstack/gittest"
)

// Outcome is how a scan of a case must end.
type Outcome string

const (
	// Complete: everything readable was scanned; the shard is Done.
	Complete Outcome = "Complete"
	// Partial: the run finalized but skipped something it counted under
	// Case.Reason; what it could not read is a hole that cannot be
	// recovered (the repository is the source), and the shard is Done.
	Partial Outcome = "Partial"
	// Parked: the shard is set aside with park reason Case.Reason.
	Parked Outcome = "Parked"
)

// Secret is the secret the cases plant (a GitHub personal access token of
// the documented format, built from parts so that this file is no finding).
var Secret = gittest.FakePAT("Br0k")

// Case is one broken repository and what scanning it must end in.
type Case struct {
	Name string
	// Broken says what is wrong with the repository.
	Broken string
	Want   Outcome
	// Reason is, for Parked, the park reason; for Partial, the reason the
	// receipt counts a skip under; for Complete, a reason the receipt must
	// count something under that did not make the run Partial (ignored
	// refs, binary blobs), or "".
	Reason string
	// Findings is how many findings the scan must record of the planted
	// secrets (Secret, and others a case plants): 0 means it must not be
	// found (not planted, unreadable or not scanned by design).
	Findings int
	// Commits is how many commits the scan must diff (-1: not checked).
	Commits int64
	build   func(r *repo)
}

// Build creates the case's bare repository in a new directory under parent
// and returns its path. Everything it writes stays under that directory.
func (c Case) Build(parent string) (string, error) {
	dir := filepath.Join(parent, c.Name+".git")
	r := &repo{dir: dir}
	r.init()
	c.build(r)
	if r.err != nil {
		return "", fmt.Errorf("build %s: %w", c.Name, r.err)
	}
	return dir, nil
}

// Cases returns the corpus, in a fixed order.
func Cases() []Case {
	return []Case{
		{
			Name:   "empty-ref-files",
			Broken: "empty files under refs/: refs/.gitkeep (not a ref name: git skips it) and refs/heads/wip (git: ignoring broken ref)",
			Want:   Complete, Reason: "empty ref file", Findings: 1, Commits: 2,
			build: func(r *repo) {
				main := healthy(r)
				r.ref("refs/heads/main", main)
				r.write("refs/.gitkeep", nil)
				r.write("refs/heads/wip", nil)
			},
		},
		{
			Name:   "garbage-ref-files",
			Broken: "ref files holding no object id: text, a short id, binary bytes",
			Want:   Complete, Reason: "malformed ref file", Findings: 1, Commits: 2,
			build: func(r *repo) {
				r.ref("refs/heads/main", healthy(r))
				r.write("refs/heads/garbage", []byte("this is not a commit id\n"))
				r.write("refs/tags/short", []byte("0123abc\n"))
				r.write("refs/heads/binary", []byte{0, 1, 2, 0xff, '\n'})
			},
		},
		{
			Name:   "dangling-symref",
			Broken: "symbolic refs to refs that do not exist, a cycle of symbolic refs, HEAD on a missing branch",
			Want:   Complete, Reason: "dangling symbolic ref", Findings: 1, Commits: 2,
			build: func(r *repo) {
				r.ref("refs/heads/main", healthy(r))
				r.write("HEAD", []byte("ref: refs/heads/nowhere\n"))
				r.write("refs/heads/alias", []byte("ref: refs/heads/gone\n"))
				r.write("refs/heads/loop-a", []byte("ref: refs/heads/loop-b\n"))
				r.write("refs/heads/loop-b", []byte("ref: refs/heads/loop-a\n"))
				r.write("refs/heads/good-alias", []byte("ref: refs/heads/main\n"))
			},
		},
		{
			Name:   "packed-refs-junk",
			Broken: "packed-refs with junk lines (git itself refuses the file): text, a short id, an id without a name, an invalid name, a stray peeled line",
			Want:   Complete, Reason: "malformed packed-refs line", Findings: 1, Commits: 2,
			build: func(r *repo) {
				main := healthy(r)
				other := r.commitFiles(map[string]string{"other.txt": "other\n"}, "other")
				if r.err != nil {
					return
				}
				zero := strings.Repeat("0", 40)
				r.write("packed-refs", []byte("# pack-refs with: peeled fully-peeled sorted \n"+
					"^"+other+"\n"+
					"junk\n"+
					"0123abc refs/heads/short-id\n"+
					main+"\n"+
					main+" refs/heads/main\n"+
					other+" refs/heads/two words\n"+
					zero+"zz refs/heads/long-id\n"+
					other+" refs/heads/dots..in..name\n"+
					"\n"))
			},
		},
		{
			Name:   "refs-to-tree-and-blob",
			Broken: "refs naming a tree, a blob and an annotated tag of a blob, none reachable from a commit; each holds the secret",
			Want:   Complete, Findings: 2, Commits: 2,
			build: func(r *repo) {
				r.ref("refs/heads/main", r.commitFiles(map[string]string{"README.md": "clean\n"}, "clean"))
				blob := r.blob("token = " + Secret + "\n")
				r.ref("refs/tags/key-blob", blob)
				r.ref("refs/tags/key-blob-signed", r.tag("key-blob-signed", blob, "blob"))
				r.ref("refs/tags/tree-snapshot", r.tree(map[string]string{"deploy/ci.env": "GITHUB_TOKEN=" + Secret + "\n"}))
				// A second commit, so that Commits counts what it should.
				r.ref("refs/heads/next", r.commitFiles(map[string]string{"README.md": "next\n"}, "next"))
			},
		},
		{
			Name:   "annotated-tag-chain",
			Broken: "the secret's commit is reachable only through tags of tags (20 deep) and a lightweight tag of the outermost one",
			Want:   Complete, Findings: 1, Commits: 2,
			build: func(r *repo) {
				id, typ := healthy(r), "commit"
				for i := range 20 {
					id, typ = r.tag(fmt.Sprintf("v1-%02d", i), id, typ), "tag"
					if i%5 == 0 {
						r.ref(fmt.Sprintf("refs/tags/v1-%02d", i), id)
					}
				}
				r.ref("refs/tags/latest", id)
			},
		},
		{
			Name:   "corrupt-loose-blob",
			Broken: "a loose blob whose file is garbage instead of zlib data",
			Want:   Partial, Reason: "corrupt object", Findings: 1, Commits: 3,
			build: func(r *repo) {
				data := r.blob("data that will not survive\n")
				tip := r.commitFiles(map[string]string{"data.txt": "blob:" + data, "more.txt": "more\n"}, "data", healthy(r))
				r.ref("refs/heads/main", tip)
				r.write(loose(data), []byte("this is not zlib data\n"))
			},
		},
		{
			Name:   "corrupt-loose-tree",
			Broken: "the tip commit's root tree is a loose object cut short",
			Want:   Parked, Reason: "corrupt repository", Commits: -1,
			build: func(r *repo) {
				tree := r.tree(map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
				r.ref("refs/heads/main", r.commit(tree, "tip", healthy(r)))
				if r.err != nil {
					return
				}
				raw, err := os.ReadFile(filepath.Join(r.dir, loose(tree)))
				r.fail(err)
				r.write(loose(tree), raw[:len(raw)/2])
			},
		},
		{
			Name:   "truncated-pack",
			Broken: "everything is in one pack, cut to half its length",
			Want:   Parked, Reason: "corrupt repository", Commits: -1,
			build: func(r *repo) {
				tip := healthy(r)
				for i := range 5 {
					tip = r.commitFiles(map[string]string{fmt.Sprintf("f%d.txt", i): strings.Repeat("line\n", 100*i+1)}, "more", tip)
				}
				r.ref("refs/heads/main", tip)
				r.git(nil, "repack", "-a", "-d", "-q")
				r.git(nil, "pack-refs", "--all")
				packs := r.packs()
				if r.err == nil && len(packs) != 1 {
					r.fail(fmt.Errorf("%d packs after repack", len(packs)))
				}
				if r.err == nil {
					fi, err := os.Stat(packs[0])
					r.fail(err)
					r.fail(os.Chmod(packs[0], 0o644))
					r.fail(os.Truncate(packs[0], fi.Size()/2))
				}
			},
		},
		{
			Name:   "partial-clone",
			Broken: "a blobless partial clone (--filter=blob:limit=1k): the large blobs are missing",
			Want:   Partial, Reason: "missing object", Findings: 1, Commits: 2,
			build: func(r *repo) {
				src := r.dir + ".src"
				defer os.RemoveAll(src)
				s := &repo{dir: src}
				s.init()
				tip := s.commitFiles(map[string]string{"big.txt": strings.Repeat("a large file\n", 400)}, "big")
				s.ref("refs/heads/main", s.commitFiles(map[string]string{
					"big.txt": strings.Repeat("a large file, changed\n", 400), "config/ci.env": "GITHUB_TOKEN=" + Secret + "\n",
				}, "secret", tip))
				s.git(nil, "config", "uploadpack.allowFilter", "true")
				r.fail(s.err)
				clone(r, "--filter=blob:limit=1k", src)
			},
		},
		{
			Name:   "shallow-clone",
			Broken: "a shallow clone (--depth 1): the tip's parent is missing; an older secret is beyond the boundary",
			Want:   Complete, Findings: 1, Commits: 1,
			build: func(r *repo) {
				src := r.dir + ".src"
				defer os.RemoveAll(src)
				s := &repo{dir: src}
				s.init()
				old := s.commitFiles(map[string]string{"old.env": "OLD_TOKEN=" + Secret + "\n"}, "old secret")
				mid := s.commitFiles(map[string]string{"README.md": "removed\n"}, "removed", old)
				s.ref("refs/heads/main", s.commitFiles(map[string]string{"README.md": "removed\n", "new.env": "NEW=" + Secret + "\n"}, "new secret", mid))
				r.fail(s.err)
				clone(r, "--depth=1", src)
			},
		},
		{
			Name:   "huge-blob",
			Broken: "a 200 MB blob (zeros, streamed into a pack by git from a sparse file) beside a small file with the secret",
			Want:   Partial, Reason: "oversized", Findings: 1, Commits: 1,
			build: func(r *repo) {
				sparse := r.dir + ".big"
				defer os.Remove(sparse)
				f, err := os.Create(sparse)
				r.fail(err)
				if err == nil {
					r.fail(f.Truncate(200 << 20))
					r.fail(f.Close())
				}
				big := r.git(nil, "-c", "core.bigFileThreshold=1m", "hash-object", "-w", sparse)
				r.ref("refs/heads/main", r.commitFiles(map[string]string{"big.bin": "blob:" + big, "config/ci.env": "GITHUB_TOKEN=" + Secret + "\n"}, "big"))
			},
		},
		{
			Name:   "binary-secret",
			Broken: "a binary file (NUL bytes) with the secret inside: binary blobs are skipped and counted, so it is not found",
			Want:   Complete, Reason: "binary", Findings: 0, Commits: 1,
			build: func(r *repo) {
				var b bytes.Buffer
				b.WriteString("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
				b.WriteString("GITHUB_TOKEN=" + Secret + "\n")
				b.Write(bytes.Repeat([]byte{0, 0xff, 0x10}, 200))
				r.ref("refs/heads/main", r.commitFiles(map[string]string{"logo.dat": b.String(), "README.md": "logo\n"}, "logo"))
			},
		},
		{
			Name:   "empty-repository",
			Broken: "git init and nothing else: no commit, HEAD on an unborn branch",
			Want:   Complete, Findings: 0, Commits: 0,
			build: func(r *repo) {},
		},
		{
			Name:   "fifty-thousand-refs",
			Broken: "50,000 refs in packed-refs (branches and tags over three commits) and 100 loose ones",
			Want:   Complete, Findings: 1, Commits: 4,
			build: func(r *repo) {
				c1 := healthy(r)
				c2 := r.commitFiles(map[string]string{"b.txt": "b\n"}, "b", c1)
				c3 := r.commitFiles(map[string]string{"c.txt": "c\n"}, "c", c2)
				if r.err != nil {
					return
				}
				commits := []string{c1, c2, c3}
				var b strings.Builder
				b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
				for i := range 25_000 {
					fmt.Fprintf(&b, "%s refs/heads/branch-%05d\n", commits[i%3], i)
				}
				for i := range 25_000 {
					fmt.Fprintf(&b, "%s refs/tags/t-%05d\n", commits[i%3], i)
				}
				r.write("packed-refs", []byte(b.String()))
				for i := range 100 {
					r.write(fmt.Sprintf("refs/heads/loose-%03d", i), []byte(commits[i%3]+"\n"))
				}
			},
		},
	}
}

// healthy writes a small healthy history of two commits, the secret
// planted in the second, and returns its tip (no ref points at it yet).
func healthy(r *repo) string {
	first := r.commitFiles(map[string]string{"README.md": "hello\n"}, "first")
	return r.commitFiles(map[string]string{"README.md": "hello\n", "config/ci.env": "GITHUB_TOKEN=" + Secret + "\n"}, "secret", first)
}

// clone makes r a bare clone of the repository at src with the given
// option, over file:// (the protocol partial and shallow clones need).
func clone(r *repo, opt, src string) {
	if r.err != nil {
		return
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.fail(err)
		return
	}
	_, err := git("", filepath.Dir(r.dir), nil, nil, "clone", "--quiet", "--bare", "--no-local", opt, "file://"+src, r.dir)
	r.fail(err)
}
