package ocibuild

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"

	"gitfleet/internal/infra/errclass"
)

// Source is the commit a snapshot is built from, with the names the image's
// labels carry.
type Source struct {
	Repo       string // "host/owner/name" as gitfleet names it
	ExternalID string // the host's repository id
	Commit     string // 40-hex SHA
}

// Stats counts what a build put in the layer.
type Stats struct {
	Files, Dirs, Symlinks int
	SubmodulesSkipped     int
	Bytes                 int64 // file content bytes
}

// Labels set on a snapshot's image config.
const (
	LabelSource     = "org.opencontainers.image.source"   // "https://" + Source.Repo
	LabelRevision   = "org.opencontainers.image.revision" // Source.Commit
	LabelRepository = "dev.gitfleet.repository"           // Source.Repo
	LabelExternalID = "dev.gitfleet.external-id"          // Source.ExternalID
)

// Reasons of the Retryable errors a damaged mirror gives; fetching the
// commit again repairs both.
const (
	ReasonMissingObject = "missing object"
	ReasonCorruptObject = "corrupt object"
)

// gzipLevel is part of the layer digest: changing it changes every
// snapshot's digest.
const gzipLevel = 6

// largeObject is the size above which go-git streams an object instead of
// reading it whole into memory.
const largeObject = 1 << 20

// blobCacheBytes bounds go-git's object cache while building: every object
// is read once, so a cache buys nothing but the deltas' bases.
const blobCacheBytes = 8 << 20

// epoch is every timestamp of a snapshot.
var epoch = time.Unix(0, 0).UTC()

// Build writes the tree of src.Commit, read from repo (a bare mirror), as
// one tar layer on top of base (nil: an empty linux/amd64 image), labels the
// image, and returns it with what the layer holds.
//
// The layer is spooled to a file in tmpDir (created if missing), which the
// returned image reads whenever its layer is asked for (push, Compressed,
// Uncompressed): the caller removes tmpDir once done with the image, and
// not before. A failed build leaves nothing in tmpDir.
//
// Errors: an unknown commit or an unsafe tree is Permanent; a missing or
// corrupt object is Retryable; a cancelled ctx stops the build between
// entries and within large files.
func Build(ctx context.Context, repo *git.Repository, src Source, base v1.Image, tmpDir string) (img v1.Image, stats Stats, err error) {
	// One commit, one snapshot: the label carries the SHA in one spelling.
	src.Commit = strings.ToLower(src.Commit)
	if !isSHA(src.Commit) {
		return nil, Stats{}, errclass.Permanentf(errclass.ReasonInvalidInput, "commit %q is not a 40-hex SHA", src.Commit)
	}
	st, closeStorer := streamingStorer(repo)
	defer closeStorer()

	want := plumbing.NewHash(src.Commit)
	commitObj, err := readSmall(st, plumbing.CommitObject, want)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, Stats{}, errclass.Permanentf(errclass.ReasonNotFound, "commit %s is not in the repository", src.Commit)
	}
	if err != nil {
		return nil, Stats{}, err
	}
	commit, err := object.DecodeCommit(st, commitObj)
	if err != nil {
		return nil, Stats{}, errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, fmt.Errorf("commit %s: %w", src.Commit, err))
	}

	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return nil, Stats{}, fmt.Errorf("spool layer: %w", err)
	}
	f, err := os.CreateTemp(tmpDir, "snapshot-*.tar.gz")
	if err != nil {
		return nil, Stats{}, fmt.Errorf("spool layer: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()

	l, stats, err := writeLayer(ctx, st, commit.TreeHash, f)
	if err != nil {
		return nil, Stats{}, err
	}
	if err := f.Close(); err != nil {
		return nil, Stats{}, fmt.Errorf("spool layer: %w", err)
	}
	img, err = assemble(base, l, src)
	if err != nil {
		return nil, Stats{}, err
	}
	return img, stats, nil
}

// writeLayer writes the tree as a gzipped tar to f, computing the layer's
// digest, size and diff ID on the way.
func writeLayer(ctx context.Context, st storer.EncodedObjectStorer, tree plumbing.Hash, f *os.File) (*fileLayer, Stats, error) {
	bw := bufio.NewWriterSize(f, 1<<20)
	compressed := sha256.New()
	var size countWriter
	zw, err := gzip.NewWriterLevel(io.MultiWriter(bw, compressed, &size), gzipLevel)
	if err != nil {
		return nil, Stats{}, err
	}
	uncompressed := sha256.New()
	w := &treeWriter{ctx: ctx, st: st, tw: tar.NewWriter(io.MultiWriter(zw, uncompressed)), buf: make([]byte, 128<<10)}
	if err := w.tree("", tree); err != nil {
		return nil, Stats{}, err
	}
	if err := w.tw.Close(); err != nil {
		return nil, Stats{}, fmt.Errorf("spool layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, Stats{}, fmt.Errorf("spool layer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, Stats{}, fmt.Errorf("spool layer: %w", err)
	}
	return &fileLayer{
		path:   f.Name(),
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))},
		size:   int64(size),
	}, w.stats, nil
}

// assemble adds the layer to base and sets the snapshot's config.
func assemble(base v1.Image, l *fileLayer, src Source) (v1.Image, error) {
	if base == nil {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	mt, err := base.MediaType()
	if err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	// A manifest mixing Docker and OCI media types is refused by some
	// registries: the layer follows the base's manifest.
	l.mediaType = types.OCILayer
	if mt == types.DockerManifestSchema2 {
		l.mediaType = types.DockerLayer
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     l,
		MediaType: l.mediaType,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: "gitfleet snapshot",
			Comment:   src.Repo + "@" + src.Commit,
		},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	if cfg.OS == "" && cfg.Architecture == "" {
		cfg.OS, cfg.Architecture = "linux", "amd64"
	}
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	cfg.Config.Labels[LabelSource] = "https://" + src.Repo
	cfg.Config.Labels[LabelRevision] = src.Commit
	cfg.Config.Labels[LabelRepository] = src.Repo
	cfg.Config.Labels[LabelExternalID] = src.ExternalID
	return mutate.ConfigFile(img, cfg)
}

// streamingStorer returns the storer to build from: for a repository on
// disk, a second view of the same files with go-git's large object streaming
// on (PlainOpen's storage reads every object whole into memory, and caches
// it), so that a build's memory does not grow with its largest file.
func streamingStorer(repo *git.Repository) (storer.EncodedObjectStorer, func()) {
	fs, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo.Storer, func() {}
	}
	st := filesystem.NewStorageWithOptions(fs.Filesystem(), cache.NewObjectLRU(blobCacheBytes),
		filesystem.Options{LargeObjectThreshold: largeObject, KeepDescriptors: true})
	return st, func() { _ = st.Close() }
}

// readSmall reads a commit or tree object whole and checks it against its
// id: a mirror's damage must not become a snapshot under a commit's name.
func readSmall(st storer.EncodedObjectStorer, t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := st.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return nil, err
	}
	if obj.Type() != t {
		if t == plumbing.CommitObject {
			return nil, plumbing.ErrObjectNotFound
		}
		return nil, errclass.Permanentf(errclass.ReasonInvalidInput, "a %s, not a %s", obj.Type(), t)
	}
	return readWhole(obj, h)
}

// readWhole reads obj into memory and checks it against its id h.
func readWhole(obj plumbing.EncodedObject, h plumbing.Hash) (*plumbing.MemoryObject, error) {
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, obj.Size()))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", obj.Type(), h, err)
	}
	mem := &plumbing.MemoryObject{}
	mem.SetType(obj.Type())
	_, _ = mem.Write(data) // in memory: cannot fail
	if got := mem.Hash(); got != h {
		return nil, errclass.Wrap(errclass.Retryable, ReasonCorruptObject, fmt.Errorf("%s %s hashes to %s", obj.Type(), h, got))
	}
	return mem, nil
}

func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
