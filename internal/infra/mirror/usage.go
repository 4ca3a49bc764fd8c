package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"
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

// lastUse is when the mirror at path was last used: its use file's time,
// else the directory's.
func lastUse(path string) time.Time {
	if info, err := os.Stat(path + useSuffix); err == nil {
		return info.ModTime()
	}
	if info, err := os.Stat(path); err == nil {
		return info.ModTime()
	}
	return time.Time{}
}

// A mirror's sidecar (<mirror>.meta) holds its size and the URL it was
// last synced from, written under the mirror's lock by whatever changes it
// (a sync, a fetch by SHA, a repack): counting the mirrors' bytes reads one
// small file a mirror instead of walking every file of every mirror, and
// the URL says which repository the mirror is (its directory's name is a
// digest), so a worker can tell which of its mirrors it owns.
const metaSuffix = ".meta"

type sidecar struct {
	// URL is the URL the mirror was last synced from, as asked (a
	// repository's placement key), without user information.
	URL   string `json:"url,omitempty"`
	Bytes int64  `json:"bytes"`
	// Packs counts its pack files (Repack merges them past RepackAbove).
	Packs int `json:"packs"`
}

func readSidecar(path string) (sidecar, bool) {
	var sc sidecar
	b, err := os.ReadFile(path + metaSuffix)
	if err != nil || json.Unmarshal(b, &sc) != nil || sc.Bytes < 0 {
		return sidecar{}, false
	}
	return sc, true
}

// dirBytes adds up the sizes of the regular files under path.
func dirBytes(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// record writes the sidecar of the mirror at path, which the caller holds
// the lock of: its size now and remoteURL ("" keeps the URL recorded). A
// sidecar that cannot be written is not an error: Held walks that mirror.
func (m *Mirrors) record(path, remoteURL string) {
	if _, err := os.Stat(path); err != nil {
		os.Remove(path + metaSuffix)
		return
	}
	sc, _ := readSidecar(path)
	if remoteURL != "" {
		sc.URL = withoutUserinfo(remoteURL)
	}
	sc.Bytes, sc.Packs = dirBytes(path), countPacks(path)
	m.writeSidecar(path, sc)
}

func (m *Mirrors) writeSidecar(path string, sc sidecar) {
	b, err := json.Marshal(sc)
	if err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Join(m.root, "tmp"), "meta-")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path+metaSuffix)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// withoutUserinfo drops a URL's user and password: a sidecar holds no
// credential.
func withoutUserinfo(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	u.User = nil
	return u.String()
}

// Held is one mirror on this worker's disk.
type Held struct {
	Path string
	// URL is the URL it was last synced from ("": not recorded, a mirror
	// of an earlier release not synced since).
	URL      string
	Bytes    int64
	Packs    int
	LastUsed time.Time
}

// Held lists the mirrors under the root with their sizes (from their
// sidecars) and last use. A mirror without a sidecar (one of an earlier
// release) is walked once, and its sidecar written when it is not busy.
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
		sc, ok := readSidecar(path)
		if !ok {
			if unlock, locked := m.tryLock(path); locked {
				m.record(path, "")
				sc, ok = readSidecar(path)
				unlock()
			}
			if !ok {
				sc.Bytes, sc.Packs = dirBytes(path), countPacks(path)
			}
		}
		out = append(out, Held{Path: path, URL: sc.URL, Bytes: sc.Bytes, Packs: sc.Packs, LastUsed: lastUse(path)})
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

// recentUse protects a mirror from eviction and repacks: a reader that
// does not mark its reading (Reading) may be reading it.
const recentUse = 10 * time.Minute

// Readers of a mirror (a scan, a build, a validity check) share a lock on
// <mirror>.read while they read: eviction and repacks, which remove files,
// take it exclusively without waiting and leave a mirror being read alone,
// however long ago its reader started. Syncs do not take it: they only add.
const readSuffix = ".read"

// readPoll is how often Reading asks again while an eviction or a repack
// holds the mirror.
const readPoll = 50 * time.Millisecond

// Reading marks the mirror of remoteURL read until the returned Closer is
// closed. It waits while an eviction or a repack is at work on the mirror
// (they take idle mirrors only, so seldom), until ctx ends; after an
// eviction the mirror is gone, and opening it fails as it would have.
func (m *Mirrors) Reading(ctx context.Context, remoteURL string) (io.Closer, error) {
	fl := flock.New(m.Path(remoteURL) + readSuffix)
	ok, err := fl.TryRLockContext(ctx, readPoll)
	if err != nil || !ok {
		return nil, fmt.Errorf("mark the mirror read: %w", errors.Join(err, ctx.Err()))
	}
	return fl, nil
}

// noReaders takes the mirror's read lock exclusively if no reader holds
// it; the caller closes it when done removing files.
func noReaders(path string) (*flock.Flock, bool) {
	fl := flock.New(path + readSuffix)
	if ok, err := fl.TryLock(); err != nil || !ok {
		return nil, false
	}
	return fl, true
}

// Owned tells whether this worker owns the repository a mirror was synced
// from (Held.URL, never ""); nil: it owns them all.
type Owned func(url string) bool

// notOwned reports a mirror known to be another worker's.
func notOwned(h Held, owned Owned) bool {
	return owned != nil && h.URL != "" && !owned(h.URL)
}

// Evict removes mirrors until those left hold at most quota bytes
// (GITFLEET_MIRROR_QUOTA): first those this worker does not own, then
// those it owns, each group least recently used first. It never removes
// one used within the last 10 minutes, one being read (Reading), nor one
// busy (a sync or a fetch holding its lock: skipped, not waited for), and
// looks at a mirror's last
// use again once it holds its lock, so a sync that ended meanwhile keeps
// it. An evicted mirror is fetched again when next needed. It returns the
// paths removed.
func (m *Mirrors) Evict(ctx context.Context, quota int64, owned Owned) ([]string, error) {
	held, err := m.Held()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, h := range held {
		total += h.Bytes
	}
	slices.SortStableFunc(held, func(a, b Held) int {
		if na, nb := notOwned(a, owned), notOwned(b, owned); na != nb {
			if na {
				return -1
			}
			return 1
		}
		return a.LastUsed.Compare(b.LastUsed)
	})
	if testHookEvictListed != nil {
		testHookEvictListed()
	}
	var removed []string
	for _, h := range held {
		if total <= quota {
			break
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if time.Since(h.LastUsed) < recentUse {
			continue
		}
		ok, err := m.removeIdle(h.Path)
		if err != nil {
			return removed, err
		}
		if ok {
			total -= h.Bytes
			removed = append(removed, h.Path)
		}
	}
	return removed, nil
}

// testHookEvictListed, when set, runs between Evict's listing and its
// removals.
var testHookEvictListed func()

// idle takes the mirror at path for upkeep that removes files: its lock
// taken without waiting, not used within recentUse (seen under the lock)
// and no reader in it. ok is false when it is not idle; release when done.
func (m *Mirrors) idle(path string) (release func(), ok bool) {
	unlock, ok := m.tryLock(path)
	if !ok {
		return nil, false
	}
	if time.Since(lastUse(path)) < recentUse {
		unlock()
		return nil, false
	}
	readers, ok := noReaders(path)
	if !ok {
		unlock()
		return nil, false
	}
	return func() {
		readers.Close() //nolint:errcheck // unlocking a lock file: the lock goes with the descriptor anyway
		unlock()
	}, true
}

// removeIdle removes the mirror at path unless it is busy (its lock held)
// or was used within recentUse, as seen under its lock. It reports whether
// it removed it.
func (m *Mirrors) removeIdle(path string) (bool, error) {
	release, ok := m.idle(path)
	if !ok {
		return false, nil
	}
	defer release()
	if err := os.RemoveAll(path); err != nil {
		return false, err
	}
	for _, suffix := range []string{useSuffix, metaSuffix} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return true, err
		}
	}
	return true, nil
}

// ReleaseUnowned removes the mirrors of repositories this worker has not
// owned for grace (another worker took them: this one joined, was drained,
// or came back after the others took its share), as seen by its calls at
// now: a mirror is not owned from the first call that finds another owner,
// and owned again, its time forgotten, by any call that finds it owns it.
// A worker restarted gives each mirror a full grace period. Like Evict, it
// keeps a mirror busy or used within the last 10 minutes (a scan placed here
// before the move may still read it), and one whose URL is not recorded. It
// returns the paths removed.
func (m *Mirrors) ReleaseUnowned(ctx context.Context, owned Owned, grace time.Duration, now time.Time) ([]string, error) {
	held, err := m.Held()
	if err != nil {
		return nil, err
	}
	m.umu.Lock()
	defer m.umu.Unlock()
	if m.unowned == nil {
		m.unowned = map[string]time.Time{}
	}
	seen := make(map[string]bool, len(held))
	var removed []string
	for _, h := range held {
		seen[h.Path] = true
		if !notOwned(h, owned) {
			delete(m.unowned, h.Path)
			continue
		}
		since, ok := m.unowned[h.Path]
		if !ok {
			m.unowned[h.Path] = now
			continue
		}
		if now.Sub(since) < grace || time.Since(h.LastUsed) < recentUse {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		ok, err := m.removeIdle(h.Path)
		if err != nil {
			return removed, err
		}
		if ok {
			delete(m.unowned, h.Path)
			removed = append(removed, h.Path)
		}
	}
	for p := range m.unowned {
		if !seen[p] {
			delete(m.unowned, p)
		}
	}
	return removed, nil
}
