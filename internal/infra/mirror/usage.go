package mirror

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A mirror's use (a sync, a read for a scan or a verification) touches its
// use file: the quota evicts the mirrors least recently used first.
const useSuffix = ".used"

// touch records a use of the mirror at path.
func touch(path string) {
	now := time.Now()
	if err := os.Chtimes(path+useSuffix, now, now); err != nil {
		if f, err := os.Create(path + useSuffix); err == nil {
			f.Close()
		}
	}
}

// Held is one mirror on this worker's disk.
type Held struct {
	Path     string
	Bytes    int64
	LastUsed time.Time
}

// Held lists the mirrors under the root with their sizes and last use.
func (m *Mirrors) Held() ([]Held, error) {
	entries, err := os.ReadDir(m.root)
	if err != nil {
		return nil, err
	}
	var out []Held
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".git") {
			continue
		}
		path := filepath.Join(m.root, e.Name())
		h := Held{Path: path}
		_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					h.Bytes += info.Size()
				}
			}
			return nil
		})
		if info, err := os.Stat(path + useSuffix); err == nil {
			h.LastUsed = info.ModTime()
		} else if info, err := e.Info(); err == nil {
			h.LastUsed = info.ModTime()
		}
		out = append(out, h)
	}
	return out, nil
}

// Usage counts the mirrors held and their bytes.
func (m *Mirrors) Usage() (mirrors, bytes int64, err error) {
	held, err := m.Held()
	for _, h := range held {
		mirrors, bytes = mirrors+1, bytes+h.Bytes
	}
	return mirrors, bytes, err
}

// recentUse protects a mirror from eviction: a scan may be reading it
// without its lock.
const recentUse = 10 * time.Minute

// Evict removes the mirrors least recently used until those left hold at
// most quota bytes (GITFLEET_MIRROR_QUOTA), never one used within the last
// 10 minutes, each under its lock; an evicted mirror is fetched again when
// next needed. It returns the paths removed.
func (m *Mirrors) Evict(ctx context.Context, quota int64) ([]string, error) {
	held, err := m.Held()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, h := range held {
		total += h.Bytes
	}
	slices.SortFunc(held, func(a, b Held) int { return a.LastUsed.Compare(b.LastUsed) })
	var removed []string
	for _, h := range held {
		if total <= quota || time.Since(h.LastUsed) < recentUse {
			break
		}
		unlock, err := m.lock(ctx, h.Path)
		if err != nil {
			return removed, err
		}
		err = os.RemoveAll(h.Path)
		if err == nil {
			os.Remove(h.Path + useSuffix)
		}
		unlock()
		if err != nil {
			return removed, err
		}
		total -= h.Bytes
		removed = append(removed, h.Path)
	}
	return removed, nil
}
