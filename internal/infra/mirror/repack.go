package mirror

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"gitfleet/internal/infra/gitread"
)

// RepackAbove is the number of packs past which the worker's upkeep
// repacks a mirror: every sync that brings something adds a pack and its
// index, and each lookup searches them all.
const RepackAbove = 16

// Repack merges the packs of each mirror holding more than maxPacks into
// one, in the background: under the mirror's lock (a busy mirror is
// skipped, and a sync waits for the repack), and only for a mirror no one
// is reading (Reading; one opening it waits for the repack) nor used within
// the last 10 minutes, the rules eviction keeps, since a repack removes the
// packs it merged. It returns the paths repacked.
func (m *Mirrors) Repack(ctx context.Context, maxPacks int) ([]string, error) {
	held, err := m.Held()
	if err != nil {
		return nil, err
	}
	var done []string
	for _, h := range held {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if h.Packs <= maxPacks || time.Since(h.LastUsed) < recentUse {
			continue
		}
		ok, err := m.repackIdle(ctx, h.Path, maxPacks)
		if err != nil {
			return done, fmt.Errorf("repack %s: %w", filepath.Base(h.Path), err)
		}
		if ok {
			done = append(done, h.Path)
		}
	}
	return done, nil
}

// repackIdle repacks the mirror at path unless it is busy or in use, as
// seen under its lock.
func (m *Mirrors) repackIdle(ctx context.Context, path string, maxPacks int) (bool, error) {
	// Readers wait for the repack to end (Reading): it removes the packs
	// it merged, which a reader may have listed and not yet opened.
	release, ok := m.idle(path)
	if !ok {
		return false, nil
	}
	defer release()
	defer m.record(path, "")
	if err := removeTemp(path); err != nil {
		return false, err
	}
	packs, err := listPacks(path)
	if err != nil || len(packs) <= maxPacks {
		return false, err
	}
	return true, mergePacks(ctx, filepath.Join(path, "objects", "pack"), packs)
}

// listPacks lists the mirror's packs (pack-*.pack with their index),
// oldest first.
func listPacks(path string) ([]string, error) {
	dir := filepath.Join(path, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type found struct {
		base  string
		mtime time.Time
	}
	var out []found
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, ".pack") || !e.Type().IsRegular() {
			continue
		}
		base := filepath.Join(dir, strings.TrimSuffix(name, ".pack"))
		if _, err := os.Stat(base + ".idx"); err != nil {
			continue // being written, or left without its index: not ours to merge
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, found{base, info.ModTime()})
	}
	slices.SortFunc(out, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	bases := make([]string, len(out))
	for i, f := range out {
		bases[i] = f.base
	}
	return bases, nil
}

// countPacks counts the mirror's pack files.
func countPacks(path string) int {
	ents, _ := os.ReadDir(filepath.Join(path, "objects", "pack"))
	n := 0
	for _, e := range ents {
		if name := e.Name(); strings.HasPrefix(name, "pack-") && strings.HasSuffix(name, ".pack") {
			n++
		}
	}
	return n
}

// packHeader is a version 2 pack's header: "PACK", version, object count.
const packHeader = 12

// mergePacks writes one pack holding every object of packs (their bases,
// without .pack/.idx) and removes them: the new pack is their entries one
// after the other under a new header and checksum. An entry's offset
// delta points back within its own pack, whose entries stay together and
// in order, and a reference delta names its base, which a complete pack
// holds: the entries are copied as they are, nothing inflated or
// recompressed, and gitread's indexer (the one received packs go through)
// reads the result, checks it and writes its index. The new pack and its
// index are in place (the pack first) before any old file goes; a crash
// leaves a temporary file that the next sync or repack removes, or both
// old and new packs (objects twice, which readers and git accept; the next
// repack merges them).
func mergePacks(ctx context.Context, dir string, packs []string) (err error) {
	var total uint64
	for _, p := range packs {
		n, err := packObjects(p + ".pack")
		if err != nil {
			return err
		}
		total += uint64(n)
	}
	if total > 1<<32-1 {
		return fmt.Errorf("%d objects: more than a pack holds", total)
	}
	f, err := os.CreateTemp(dir, tmpPackPrefix)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		if tmp != "" {
			os.Remove(tmp)
		}
	}()
	// Complete packs: no base comes from elsewhere. One that never
	// resolves (a delta cycle a fetch refused) is refused again.
	ix := gitread.NewIndexer(f, gitread.IndexOptions{Base: func(plumbing.Hash) (plumbing.ObjectType, []byte, error) {
		return plumbing.InvalidObject, nil, plumbing.ErrObjectNotFound
	}})
	sum := sha1.New()
	w := io.MultiWriter(ix, sum)
	hdr := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(hdr[8:], uint32(total))
	if _, err := w.Write(hdr); err != nil {
		ix.Abort()
		return err
	}
	for _, p := range packs {
		if err := ctx.Err(); err != nil {
			ix.Abort()
			return err
		}
		if err := copyEntries(w, p+".pack"); err != nil {
			ix.Abort()
			return err
		}
	}
	if _, err := w.Write(sum.Sum(nil)); err != nil {
		ix.Abort()
		return err
	}
	index, err := ix.Finish()
	if err != nil {
		return err
	}
	// The entries refused when fetched are refused again (the same data
	// trips the same bound), and stay in the pack as they were.
	if uint64(index.Objects())+uint64(len(index.Refused)) != total {
		return fmt.Errorf("%w: merged pack indexes %d objects of %d (%d refused)", gitread.ErrCorrupt, index.Objects(), total, len(index.Refused))
	}
	if err := f.Close(); err != nil {
		return err
	}
	f = nil
	base := filepath.Join(dir, "pack-"+index.Checksum.String())
	if slices.Contains(packs, base) {
		return nil // the same pack again: nothing to merge
	}
	if err := os.Chmod(tmp, 0o444); err != nil {
		return err
	}
	if err := os.Rename(tmp, base+".pack"); err != nil {
		return err
	}
	tmp = ""
	if err := writeIndex(dir, base, index); err != nil {
		return err
	}
	// The index first: an index without its pack would be skipped, a pack
	// without an index is never read.
	for _, p := range packs {
		for _, ext := range []string{".idx", ".refused", ".pack"} {
			if err := os.Remove(p + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// packObjects reads a pack's header: version 2 or 3, and its object
// count.
func packObjects(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var hdr [packHeader]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", gitread.ErrCorrupt, filepath.Base(path), err)
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) {
		return 0, fmt.Errorf("%w: %s is not a pack", gitread.ErrCorrupt, filepath.Base(path))
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return 0, fmt.Errorf("%w: %s: pack version %d", gitread.ErrCorrupt, filepath.Base(path), v)
	}
	return binary.BigEndian.Uint32(hdr[8:]), nil
}

// copyEntries copies a pack's entries: what lies between its header and
// its trailing checksum.
func copyEntries(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	n := info.Size() - packHeader - sha1.Size
	if n < 0 {
		return fmt.Errorf("%w: %s is too short for a pack", gitread.ErrCorrupt, filepath.Base(path))
	}
	_, err = io.Copy(w, io.NewSectionReader(f, packHeader, n))
	return err
}
