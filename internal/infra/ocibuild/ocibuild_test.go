package ocibuild

import (
	"archive/tar"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gitfleet/internal/infra/errclass"
)

// runGit runs git in dir with no user or system configuration and fixed
// dates, and returns its trimmed output.
func runGit(t testing.TB, dir string, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_AUTHOR_DATE=2020-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(out.String())
}

func writeFile(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

const longName = "a-directory-with-a-name-long-enough/that-the-whole-path-is-more-than-one-hundred-bytes/which-ustar-cannot-hold.txt"

// fixture makes a work tree repository with every kind of entry and returns
// its path and its commit.
func fixture(t testing.TB) (string, string) {
	t.Helper()
	dir := t.TempDir()
	runGit(t, dir, nil, "init", "-q", "-b", "main", ".")
	writeFile(t, filepath.Join(dir, "README.md"), []byte("# fixture\n"), 0o644)
	writeFile(t, filepath.Join(dir, "a", "nested", "deep", "file.txt"), []byte("deep\n"), 0o644)
	writeFile(t, filepath.Join(dir, "a-b"), []byte("sorts before a/ in byte order\n"), 0o644)
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("also before a/\n"), 0o644)
	writeFile(t, filepath.Join(dir, "bin", "run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	writeFile(t, filepath.Join(dir, "with space é.txt"), []byte("non-ASCII name\n"), 0o644)
	writeFile(t, filepath.Join(dir, "empty"), nil, 0o644)
	writeFile(t, filepath.Join(dir, "data", "blob.bin"), randomBytes(2<<20, 1), 0o644)
	writeFile(t, filepath.Join(dir, longName), []byte("long\n"), 0o644)
	for link, target := range map[string]string{"link-file": "README.md", "link-dir": "a/nested", "dangling": "does/not/exist"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, dir, nil, "add", "-A")
	runGit(t, dir, nil, "update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,sub")
	runGit(t, dir, nil, "commit", "-q", "-m", "fixture")
	return dir, runGit(t, dir, nil, "rev-parse", "HEAD")
}

func open(t testing.TB, dir string) *git.Repository {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func source(commit string) Source {
	return Source{Repo: "github.com/acme/widgets", ExternalID: "R_123", Commit: commit}
}

func build(t testing.TB, repo *git.Repository, commit string, base v1.Image) (v1.Image, Stats) {
	t.Helper()
	img, stats, err := Build(context.Background(), repo, source(commit), base, t.TempDir())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return img, stats
}

func digest(t testing.TB, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func lastLayer(t testing.TB, img v1.Image) v1.Layer {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return layers[len(layers)-1]
}

// extract unpacks a tar stream with the system tar, as a runner host would.
func extract(t testing.TB, r io.Reader) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("tar", "-x", "-C", dir)
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	return dir
}

// listing describes a directory: each path's kind and content, exec bit or
// link target.
func listing(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case info.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			out[rel] = "file " + hex.EncodeToString(sum[:8])
			if info.Mode()&0o100 != 0 {
				out[rel] += " exec"
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildMatchesGitArchive compares the layer with what git archive makes
// of the same commit, and checks every tar header's fixed fields.
func TestBuildMatchesGitArchive(t *testing.T) {
	dir, commit := fixture(t)
	img, stats := build(t, open(t, dir), commit, nil)

	want := Stats{Files: 9, Dirs: 7, Symlinks: 3, SubmodulesSkipped: 1, Bytes: 2<<20 + 10 + 5 + 30 + 15 + 19 + 15 + 0 + 5}
	if stats != want {
		t.Errorf("stats = %+v, want %+v", stats, want)
	}

	rc, err := lastLayer(t, img).Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	got := listing(t, extract(t, rc))
	rc.Close()

	var archive bytes.Buffer
	cmd := exec.Command("git", "archive", commit)
	cmd.Dir, cmd.Stdout = dir, &archive
	if err := cmd.Run(); err != nil {
		t.Fatalf("git archive: %v", err)
	}
	wantListing := listing(t, extract(t, &archive))
	// git archive, like git checkout, leaves an empty directory where a
	// submodule is; a snapshot skips it entirely.
	if wantListing["sub"] != "dir" {
		t.Errorf("git archive made %q of the submodule, want an empty dir", wantListing["sub"])
	}
	delete(wantListing, "sub")

	for p, w := range wantListing {
		if got[p] != w {
			t.Errorf("%s: layer has %q, git archive %q", p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := wantListing[p]; !ok {
			t.Errorf("%s: in the layer (%q), not in git archive", p, g)
		}
	}

	rc, err = lastLayer(t, img).Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(time.Unix(0, 0)) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() ||
			h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 && h.Name != longName && !strings.Contains(h.Name, "é") {
			t.Errorf("%s: header %+v has more than the fixed fields", h.Name, h)
		}
		wantMode := map[byte]int64{tar.TypeDir: 0o755, tar.TypeReg: 0o644, tar.TypeSymlink: 0o777}[h.Typeflag]
		if h.Name == "bin/run.sh" {
			wantMode = 0o755
		}
		if h.Mode != wantMode {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, wantMode)
		}
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("entries out of byte order: %q before %q", names[i-1], names[i])
		}
	}
	if names[0] != "README.md" || !contains(names, "a-b") || !contains(names, "a/") {
		t.Errorf("entries = %q", names)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestBuildDeterministic builds one commit from fresh spools and from a
// differently packed clone: same layer, same manifest.
func TestBuildDeterministic(t *testing.T) {
	dir, commit := fixture(t)
	first, _ := build(t, open(t, dir), commit, nil)
	// The caller's spool directory need not exist yet; the commit may be
	// spelled in upper case.
	second, _, err := Build(context.Background(), open(t, dir), source(strings.ToUpper(commit)), nil, filepath.Join(t.TempDir(), "not", "yet"))
	if err != nil {
		t.Fatal(err)
	}

	clone := t.TempDir()
	runGit(t, clone, nil, "clone", "-q", "--mirror", dir, ".")
	runGit(t, clone, nil, "repack", "-q", "-a", "-d", "-f")
	if loose := runGit(t, clone, nil, "count-objects"); !strings.HasPrefix(loose, "0 objects") {
		t.Fatalf("clone not packed: %s", loose)
	}
	packed, _ := build(t, open(t, clone), commit, nil)
	// As mirror.FetchSnapshot fetches: the commit alone, depth 1.
	shallow := t.TempDir()
	runGit(t, shallow, nil, "clone", "-q", "--bare", "--depth", "1", "file://"+dir, ".")
	fromShallow, _ := build(t, open(t, shallow), commit, nil)

	base, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	onBase1, _ := build(t, open(t, dir), commit, base)
	onBase2, _ := build(t, open(t, clone), commit, base)

	for _, tc := range []struct {
		name string
		a, b v1.Image
	}{
		{"twice", first, second},
		{"packed clone", first, packed},
		{"shallow clone", first, fromShallow},
		{"on a base", onBase1, onBase2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a, b := digest(t, tc.a), digest(t, tc.b); a != b {
				t.Errorf("manifest digests differ: %s, %s", a, b)
			}
			la, _ := lastLayer(t, tc.a).Digest()
			lb, _ := lastLayer(t, tc.b).Digest()
			if la != lb {
				t.Errorf("layer digests differ: %s, %s", la, lb)
			}
			checkLayers(t, tc.a)
		})
	}
}

func TestBuildConfig(t *testing.T) {
	dir, commit := fixture(t)
	base, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	baseCfg, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	baseCfg = baseCfg.DeepCopy()
	baseCfg.OS, baseCfg.Architecture = "linux", "arm64"
	baseCfg.Config.Labels = map[string]string{"keep": "me", LabelRevision: "stale"}
	baseCfg.Config.Env = []string{"PATH=/bin"}
	base, err = mutate.ConfigFile(base, baseCfg)
	if err != nil {
		t.Fatal(err)
	}

	labels := map[string]string{
		LabelSource:     "https://github.com/acme/widgets",
		LabelRevision:   commit,
		LabelRepository: "github.com/acme/widgets",
		LabelExternalID: "R_123",
	}
	for _, tc := range []struct {
		name       string
		base       v1.Image
		layers     int
		labels     map[string]string
		platform   string
		manifest   types.MediaType
		layerMedia types.MediaType
	}{
		{"no base", nil, 1, labels, "linux/amd64", types.OCIManifestSchema1, types.OCILayer},
		{"base", base, 3, merge(labels, map[string]string{"keep": "me"}), "linux/arm64", types.DockerManifestSchema2, types.DockerLayer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, _ := build(t, open(t, dir), commit, tc.base)
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !equalMaps(cfg.Config.Labels, tc.labels) {
				t.Errorf("labels = %v, want %v", cfg.Config.Labels, tc.labels)
			}
			if !cfg.Created.Time.Equal(time.Unix(0, 0)) {
				t.Errorf("created = %v", cfg.Created)
			}
			for _, h := range cfg.History {
				if h.Created.Time.After(time.Unix(0, 0)) {
					t.Errorf("history entry %+v has a time", h)
				}
			}
			if p := cfg.OS + "/" + cfg.Architecture; p != tc.platform {
				t.Errorf("platform = %s, want %s", p, tc.platform)
			}
			if tc.base != nil && (len(cfg.Config.Env) != 1 || cfg.Config.Env[0] != "PATH=/bin") {
				t.Errorf("base config lost: env %v", cfg.Config.Env)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != tc.layers || len(cfg.RootFS.DiffIDs) != tc.layers {
				t.Errorf("%d layers, %d diff IDs, want %d", len(layers), len(cfg.RootFS.DiffIDs), tc.layers)
			}
			if tc.base != nil {
				baseLayers, _ := tc.base.Layers()
				for i, bl := range baseLayers {
					a, _ := bl.Digest()
					b, _ := layers[i].Digest()
					if a != b {
						t.Errorf("layer %d: %s, base has %s", i, b, a)
					}
				}
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.MediaType != tc.manifest || m.Layers[len(m.Layers)-1].MediaType != tc.layerMedia {
				t.Errorf("media types: manifest %s, layer %s", m.MediaType, m.Layers[len(m.Layers)-1].MediaType)
			}
			checkLayers(t, img)
		})
	}
}

// checkLayers recomputes every layer's digest, size and diff ID from its
// bytes (go-containerregistry's validate package needs a module gitfleet
// does not require): the ones Build computed while writing must agree.
func checkLayers(t testing.TB, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		d, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		rc, err = l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		diffID, _, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantD, _ := l.Digest()
		wantN, _ := l.Size()
		wantDiff, _ := l.DiffID()
		if d != wantD || n != wantN || diffID != wantDiff || cfg.RootFS.DiffIDs[i] != diffID {
			t.Errorf("layer %d: bytes give %s, %d bytes, diff ID %s; layer says %s, %d, %s; config %s",
				i, d, n, diffID, wantD, wantN, wantDiff, cfg.RootFS.DiffIDs[i])
		}
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPush pushes to an in-process registry on loopback (plain HTTP, no
// credentials) and reads the image back.
func TestPush(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no developer credentials
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	dir, commit := fixture(t)
	base, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		base v1.Image
	}{{"no base", nil}, {"base", base}} {
		t.Run(tc.name, func(t *testing.T) {
			img, _ := build(t, open(t, dir), commit, tc.base)
			ref := host + "/snapshots/widgets:" + commit[:12] + strings.ReplaceAll(tc.name, " ", "-")
			got, err := Push(context.Background(), ref, img)
			if err != nil {
				t.Fatal(err)
			}
			if want := digest(t, img).String(); got != want {
				t.Errorf("Push = %s, local digest %s", got, want)
			}
			remoteImg, err := Base(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			if d := digest(t, remoteImg).String(); d != got {
				t.Errorf("registry serves %s, pushed %s", d, got)
			}
			local, _ := img.Layers()
			pulled, err := remoteImg.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(local) != len(pulled) {
				t.Fatalf("%d layers pulled, %d pushed", len(pulled), len(local))
			}
			for i := range local {
				a, _ := local[i].Digest()
				b, _ := pulled[i].Digest()
				if a != b {
					t.Errorf("layer %d: pulled %s, pushed %s", i, b, a)
				}
			}
			checkLayers(t, remoteImg)
			if _, err := remote.Get(mustRef(t, host+"/snapshots/widgets@"+got)); err != nil {
				t.Errorf("by digest: %v", err)
			}
		})
	}

	if _, err := Base(context.Background(), host+"/snapshots/absent:latest"); !isClass(err, errclass.Permanent, errclass.ReasonNotFound) {
		t.Errorf("Base of an absent image: %v", err)
	}
	if _, err := Push(context.Background(), "not a reference", nil); !isClass(err, errclass.Permanent, errclass.ReasonInvalidInput) {
		t.Errorf("Push to a bad reference: %v", err)
	}
}

func mustRef(t testing.TB, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func isClass(err error, class errclass.Class, reason string) bool {
	var e *errclass.Error
	return errors.As(err, &e) && e.Class == class && e.Reason == reason
}

// crafted writes a commit whose tree holds entries (blob "x" where no hash
// is given) under a "deep" directory. The tree is encoded by hand: go-git's
// encoder refuses some of these names, a hostile remote would not.
func crafted(t testing.TB, repo *git.Repository, entries []object.TreeEntry) string {
	t.Helper()
	st := repo.Storer
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	w.Write([]byte("x"))
	w.Close()
	blobHash, err := st.SetEncodedObject(blob)
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		if entries[i].Hash.IsZero() {
			entries[i].Hash = blobHash
		}
	}
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	var raw bytes.Buffer
	for _, e := range entries {
		raw.WriteString(strings.TrimLeft(e.Mode.String(), "0") + " " + e.Name + "\x00")
		raw.Write(e.Hash[:])
	}
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.TreeObject)
	w, _ = obj.Writer()
	w.Write(raw.Bytes())
	w.Close()
	inner, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	// "a" and "b" put a valid file in the spool before the bad entry is met.
	root := put(&object.Tree{Entries: []object.TreeEntry{
		{Name: "a", Mode: filemode.Regular, Hash: blobHash},
		{Name: "deep", Mode: filemode.Dir, Hash: inner},
	}})
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1577836800, 0)}
	return put(&object.Commit{Author: sig, Committer: sig, Message: "crafted", TreeHash: root}).String()
}

// TestBuildErrors covers the classes of the ways a build fails, and that a
// failed build leaves nothing in its directory.
func TestBuildErrors(t *testing.T) {
	dir, commit := fixture(t)
	repo := open(t, dir)
	missing := plumbing.NewHash("2222222222222222222222222222222222222222")
	tree := func(entries ...object.TreeEntry) func() string {
		return func() string { return crafted(t, repo, entries) }
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tc := range []struct {
		name   string
		commit func() string
		ctx    context.Context
		class  errclass.Class
		reason string
		msg    string
	}{
		{"unknown commit", func() string { return "3333333333333333333333333333333333333333" }, nil,
			errclass.Permanent, errclass.ReasonNotFound, "commit 3333333333333333333333333333333333333333 is not in the repository"},
		{"a tree's id", func() string { return runGit(t, dir, nil, "rev-parse", "HEAD^{tree}") }, nil,
			errclass.Permanent, errclass.ReasonNotFound, "is not in the repository"},
		{"not a SHA", func() string { return "HEAD" }, nil, errclass.Permanent, errclass.ReasonInvalidInput, "not a 40-hex SHA"},
		{"short SHA", func() string { return commit[:12] }, nil, errclass.Permanent, errclass.ReasonInvalidInput, "not a 40-hex SHA"},
		{"dot dot", tree(object.TreeEntry{Name: "..", Mode: filemode.Regular}), nil, errclass.Permanent, errclass.ReasonInvalidInput, `unsafe entry name ".."`},
		{"dot dot dir", tree(object.TreeEntry{Name: "..", Mode: filemode.Dir, Hash: plumbing.NewHash(runGit(t, dir, nil, "rev-parse", "HEAD^{tree}"))}), nil,
			errclass.Permanent, errclass.ReasonInvalidInput, `unsafe entry name ".."`},
		{"dot", tree(object.TreeEntry{Name: ".", Mode: filemode.Regular}), nil, errclass.Permanent, errclass.ReasonInvalidInput, `"."`},
		{"slash", tree(object.TreeEntry{Name: "x/../../etc", Mode: filemode.Regular}), nil, errclass.Permanent, errclass.ReasonInvalidInput, "unsafe entry name"},
		{"absolute", tree(object.TreeEntry{Name: "/etc", Mode: filemode.Regular}), nil, errclass.Permanent, errclass.ReasonInvalidInput, "unsafe entry name"},
		{"empty name", tree(object.TreeEntry{Name: "", Mode: filemode.Regular}), nil, errclass.Permanent, errclass.ReasonInvalidInput, "empty filename"},
		{"NUL", tree(object.TreeEntry{Name: "a\x00b", Mode: filemode.Regular}), nil, errclass.Permanent, errclass.ReasonInvalidInput, ""},
		{".git", tree(object.TreeEntry{Name: ".GIT", Mode: filemode.Dir, Hash: plumbing.NewHash(runGit(t, dir, nil, "rev-parse", "HEAD^{tree}"))}), nil,
			errclass.Permanent, errclass.ReasonInvalidInput, "reserved for Git"},
		{"duplicate", tree(object.TreeEntry{Name: "x", Mode: filemode.Regular}, object.TreeEntry{Name: "x", Mode: filemode.Executable}), nil,
			errclass.Permanent, errclass.ReasonInvalidInput, "appears twice"},
		{"file and dir", tree(object.TreeEntry{Name: "x", Mode: filemode.Regular}, object.TreeEntry{Name: "x", Mode: filemode.Dir, Hash: plumbing.NewHash(runGit(t, dir, nil, "rev-parse", "HEAD^{tree}"))}), nil,
			errclass.Permanent, errclass.ReasonInvalidInput, "appears twice"},
		{"blob as dir", tree(object.TreeEntry{Name: "x", Mode: filemode.Dir}), nil, errclass.Permanent, errclass.ReasonInvalidInput, "a blob, not a tree"},
		{"empty link target", tree(object.TreeEntry{Name: "x", Mode: filemode.Symlink, Hash: plumbing.NewHash("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")}), nil,
			errclass.Permanent, errclass.ReasonInvalidInput, "link target of 0 bytes"},
		{"missing blob", tree(object.TreeEntry{Name: "x", Mode: filemode.Regular, Hash: missing}), nil, errclass.Retryable, ReasonMissingObject, "object not found"},
		{"missing tree", tree(object.TreeEntry{Name: "x", Mode: filemode.Dir, Hash: missing}), nil, errclass.Retryable, ReasonMissingObject, "object not found"},
		{"cancelled", func() string { return commit }, cancelled, "", "", "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			tmp := t.TempDir()
			img, _, err := Build(ctx, repo, source(tc.commit()), nil, tmp)
			if err == nil {
				t.Fatalf("built %v", img)
			}
			t.Log(err)
			if tc.class == "" {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			} else if !isClass(err, tc.class, tc.reason) {
				t.Errorf("err = %#v (%v), want %s/%s", err, err, tc.class, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q, want it to say %q", err, tc.msg)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left %v in the spool directory", left)
			}
		})
	}
}

// TestBuildCorruptBlob plants a loose object whose content is not what its
// id says: Retryable, as a fetch repairs it.
func TestBuildCorruptBlob(t *testing.T) {
	dir, _ := fixture(t)
	repo := open(t, dir)
	var h plumbing.Hash
	copy(h[:], bytes.Repeat([]byte{0x44}, 20))
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte("blob 5\x00wrong"))
	zw.Close()
	writeFile(t, filepath.Join(dir, ".git", "objects", h.String()[:2], h.String()[2:]), z.Bytes(), 0o444)
	commit := crafted(t, repo, []object.TreeEntry{{Name: "x", Mode: filemode.Regular, Hash: h}})
	_, _, err := Build(context.Background(), repo, source(commit), nil, t.TempDir())
	if !isClass(err, errclass.Retryable, ReasonCorruptObject) {
		t.Errorf("err = %v, want Retryable/%s", err, ReasonCorruptObject)
	}
}

// TestBuildMemory builds a tree with a 64 MiB file, from a loose object and
// from a pack, and measures what the build and the image's digests
// allocate: about 2.4 MiB either way, where reading through PlainOpen's own
// storage (no large object streaming) allocates some 320 to 380 MiB.
func TestBuildMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB file")
	}
	const size = 64 << 20
	dir := t.TempDir()
	runGit(t, dir, nil, "init", "-q", "-b", "main", ".")
	writeFile(t, filepath.Join(dir, "big.bin"), randomBytes(size, 2), 0o644)
	runGit(t, dir, nil, "add", "-A")
	runGit(t, dir, nil, "commit", "-q", "-m", "big")
	commit := runGit(t, dir, nil, "rev-parse", "HEAD")

	for _, tc := range []struct {
		name   string
		before func()
	}{
		{"loose", func() {}},
		{"packed", func() { runGit(t, dir, nil, "repack", "-q", "-a", "-d") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.before()
			repo := open(t, dir)
			tmp := t.TempDir()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			img, stats, err := Build(context.Background(), repo, source(commit), nil, tmp)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := img.Digest(); err != nil {
				t.Fatal(err)
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d MiB file, allocated %.2f MiB, %v (%.0f MiB/s)", tc.name, size>>20,
				float64(alloc)/(1<<20), elapsed.Round(time.Millisecond), float64(size)/(1<<20)/elapsed.Seconds())
			if stats.Bytes != size {
				t.Errorf("stats.Bytes = %d", stats.Bytes)
			}
			if alloc > 4<<20 {
				t.Errorf("allocated %d bytes building a %d byte file", alloc, size)
			}
		})
	}
}
