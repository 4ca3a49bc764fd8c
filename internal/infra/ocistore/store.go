package ocistore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefNameAnnotation is the index.json annotation that carries an image's
// name in the store.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

const (
	// tmpPrefix marks files being written: blobs streaming in (in
	// blobs/sha256, so the final rename stays in one directory) and
	// index.json replacements. No digest or index name starts with it.
	tmpPrefix = ".tmp-"
	// maxManifest bounds the manifests and indexes read into memory.
	maxManifest = 4 << 20
)

var digestRE = regexp.MustCompile(`^sha256:([0-9a-f]{64})$`)

// hexOf returns the hex part of a valid sha256 digest. Every digest that
// reaches a file name goes through it, whichever peer or file it came from.
func hexOf(digest string) (string, bool) {
	m := digestRE.FindStringSubmatch(digest)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Store is a runner's local OCI image layout. Its methods are safe for
// concurrent use; one Store per directory (Open removes the temporary files
// another Store on the same directory would be writing).
type Store struct {
	dir   string
	quota int64
	// maxImage bounds what one image may declare (manifest, config and
	// layers), whatever the quota.
	maxImage int64
	// client carries every download; the go-containerregistry transport
	// (auth, scheme) is layered on top per pull and source.
	client http.RoundTripper
	// stall aborts a download that receives nothing for that long, so a
	// hung peer costs a bounded wait rather than the whole pull's deadline.
	stall  time.Duration
	served atomic.Int64

	// mu guards everything below and serialises index.json writes,
	// blob commits and garbage collection.
	mu       sync.Mutex
	entries  []entry
	usage    int64
	pins     map[string]int          // digest → pulls that need it kept
	reserved map[string]*reservation // digest → quota held for a blob not yet present
	inflight map[string]*flight      // digest → its download in progress
	// pulling are the manifests of the pulls in progress, which peers may
	// read before the image is complete (PeerHandler).
	pulling []*pulling
	// changed is closed, and replaced, whenever a download starts or ends,
	// a blob is committed or a pull begins or ends: what a peer request
	// waiting for a blob or a manifest watches.
	changed chan struct{}
}

// notifyLocked wakes the peer requests waiting for the store to change.
// Callers hold mu.
func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// entry is one descriptor of index.json with what GC and Images need.
type entry struct {
	desc v1.Descriptor
	name string   // "" for entries without RefNameAnnotation (kept, not listed)
	size int64    // manifest and every blob it references
	refs []string // digests it keeps alive, its own included
}

type reservation struct {
	size int64
	refs int
}

// Image is an image held by the store.
type Image struct {
	Name   string
	Digest string // manifest digest
	Size   int64  // manifest, config and layers
}

// Options bound a store; the zero value means no quota and
// DefaultMaxImageBytes.
type Options struct {
	// Quota is the most bytes of blobs the store may hold (0 = unlimited).
	Quota int64
	// MaxImageBytes is the most bytes one image may declare, manifest,
	// config and layers together (0 = DefaultMaxImageBytes): sizes come
	// from registries and peers gitfleet does not control, and a manifest
	// over it is refused before anything is reserved or fetched.
	MaxImageBytes int64
}

// DefaultMaxImageBytes is the largest image a store takes unless told
// otherwise: far above any image a runner should hold, far below what a
// sum of int64 sizes could overflow to.
const DefaultMaxImageBytes = 1 << 40

// Open opens (creating if missing) an OCI image layout at dir. quota is
// the max bytes of blobs the store may hold (0 = unlimited).
func Open(dir string, quota int64) (*Store, error) {
	return OpenWith(dir, Options{Quota: quota})
}

// OpenWith opens (creating if missing) an OCI image layout at dir, bounded
// by o. Leftover temporary files from an interrupted pull are removed;
// complete blobs are kept, since they only ever appear by rename after
// verification.
func OpenWith(dir string, o Options) (*Store, error) {
	if o.Quota < 0 || o.MaxImageBytes < 0 {
		return nil, fmt.Errorf("ocistore: open %s: negative bound %+v", dir, o)
	}
	if o.MaxImageBytes == 0 {
		o.MaxImageBytes = DefaultMaxImageBytes
	}
	s := &Store{
		dir:      dir,
		quota:    o.Quota,
		maxImage: o.MaxImageBytes,
		stall:    DefaultStall,
		pins:     map[string]int{},
		reserved: map[string]*reservation{},
		inflight: map[string]*flight{},
		changed:  make(chan struct{}),
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 8
	s.client = t
	if err := os.MkdirAll(s.blobDir(), 0o755); err != nil {
		return nil, fmt.Errorf("ocistore: open %s: %w", dir, err)
	}
	layout := filepath.Join(dir, "oci-layout")
	if _, err := os.Stat(layout); errors.Is(err, fs.ErrNotExist) {
		if err := writeFileAtomic(dir, layout, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			return nil, fmt.Errorf("ocistore: open %s: %w", dir, err)
		}
	}
	if err := s.removeTemps(); err != nil {
		return nil, fmt.Errorf("ocistore: open %s: %w", dir, err)
	}
	if err := s.loadIndex(); err != nil {
		return nil, fmt.Errorf("ocistore: open %s: %w", dir, err)
	}
	blobs, err := os.ReadDir(s.blobDir())
	if err != nil {
		return nil, fmt.Errorf("ocistore: open %s: %w", dir, err)
	}
	for _, b := range blobs {
		if info, err := b.Info(); err == nil && info.Mode().IsRegular() && isHex(b.Name()) {
			s.usage += info.Size()
		}
	}
	return s, nil
}

// Dir is the layout's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) blobDir() string { return filepath.Join(s.dir, "blobs", "sha256") }

func (s *Store) blobPath(hex string) string { return filepath.Join(s.blobDir(), hex) }

func isHex(name string) bool {
	_, ok := hexOf("sha256:" + name)
	return ok
}

func (s *Store) removeTemps() error {
	for _, d := range []string{s.dir, s.blobDir()} {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				if err := os.Remove(filepath.Join(d, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

func (s *Store) loadIndex() error {
	raw, err := os.ReadFile(filepath.Join(s.dir, "index.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return s.writeIndex(nil)
	}
	if err != nil {
		return err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	for _, d := range idx.Manifests {
		s.entries = append(s.entries, s.entryOf(d))
	}
	return nil
}

// entryOf reads what a descriptor references from the blobs on disk. A
// manifest that cannot be read keeps only itself alive.
func (s *Store) entryOf(d v1.Descriptor) entry {
	e := entry{desc: d, name: d.Annotations[RefNameAnnotation], size: d.Size}
	seen := map[string]bool{}
	var walk func(d v1.Descriptor, depth int)
	walk = func(d v1.Descriptor, depth int) {
		digest := d.Digest.String()
		if seen[digest] {
			return
		}
		seen[digest] = true
		e.refs = append(e.refs, digest)
		if depth > 0 {
			e.size += d.Size
		}
		if (!d.MediaType.IsImage() && !d.MediaType.IsIndex()) || depth > 4 {
			return
		}
		hex, ok := hexOf(digest)
		if !ok {
			return
		}
		raw, err := readLimited(s.blobPath(hex), maxManifest)
		if err != nil {
			return
		}
		if d.MediaType.IsIndex() {
			if idx, err := v1.ParseIndexManifest(bytes.NewReader(raw)); err == nil {
				for _, c := range idx.Manifests {
					walk(c, depth+1)
				}
			}
			return
		}
		if m, err := v1.ParseManifest(bytes.NewReader(raw)); err == nil {
			walk(m.Config, depth+1)
			for _, l := range m.Layers {
				walk(l, depth+1)
			}
		}
	}
	walk(d, 0)
	return e
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", path, info.Size(), limit)
	}
	buf := make([]byte, info.Size())
	_, err = io.ReadFull(f, buf)
	return buf, err
}

// writeIndex replaces index.json atomically. Callers hold mu.
func (s *Store) writeIndex(entries []entry) error {
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}}
	for _, e := range entries {
		idx.Manifests = append(idx.Manifests, e.desc)
	}
	raw, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(s.dir, filepath.Join(s.dir, "index.json"), raw)
}

// writeFileAtomic writes path through a synced temporary file in dir and a
// rename, then syncs dir so the rename survives a crash.
func writeFileAtomic(dir, path string, data []byte) error {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Images lists the named images, sorted by name.
func (s *Store) Images() ([]Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Image
	for _, e := range s.entries {
		if e.name != "" {
			out = append(out, Image{Name: e.name, Digest: e.desc.Digest.String(), Size: e.size})
		}
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Image looks one image up by name.
func (s *Store) Image(name string) (Image, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.name == name && name != "" {
			return Image{Name: e.name, Digest: e.desc.Digest.String(), Size: e.size}, true, nil
		}
	}
	return Image{}, false, nil
}

// Usage is the number of bytes of complete blobs in the store, referenced
// or not (blobs of an interrupted pull count until GC drops them).
func (s *Store) Usage() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage, nil
}

// Remove drops name's index entry and garbage-collects the blobs nothing
// else references. Removing an absent name is not an error.
func (s *Store) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.entries, func(e entry) bool { return e.name == name && name != "" })
	if i < 0 {
		// Not held, but a pull of it that never finished may have left
		// blobs: collect them too.
		return s.gcLocked()
	}
	kept := slices.Delete(slices.Clone(s.entries), i, i+1)
	if err := s.writeIndex(kept); err != nil {
		return fmt.Errorf("ocistore: remove %s: %w", name, err)
	}
	s.entries = kept
	return s.gcLocked()
}

// GC deletes the blobs that no index entry references and no pull in
// progress needs, such as the blobs an abandoned pull left behind.
func (s *Store) GC() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gcLocked()
}

// gcLocked runs under mu, which commits also take, so a blob a pull has
// pinned cannot be committed and collected in between.
func (s *Store) gcLocked() error {
	live := map[string]bool{}
	for _, e := range s.entries {
		for _, r := range e.refs {
			live[r] = true
		}
	}
	for d := range s.pins {
		live[d] = true
	}
	ents, err := os.ReadDir(s.blobDir())
	if err != nil {
		return fmt.Errorf("ocistore: gc: %w", err)
	}
	var errs []error
	for _, b := range ents {
		if !isHex(b.Name()) || live["sha256:"+b.Name()] {
			continue
		}
		info, err := b.Info()
		if err != nil {
			continue
		}
		if err := os.Remove(filepath.Join(s.blobDir(), b.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		s.usage -= info.Size()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ocistore: gc: %w", err)
	}
	return nil
}
