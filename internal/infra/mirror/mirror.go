package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/gofrs/flock"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// Mirrors manages the mirrors under Root.
type Mirrors struct {
	root  string
	http  *http.Client
	creds Credentials // nil: anonymous (SetCredentials)

	mu    sync.Mutex
	locks map[string]*pathLock

	umu     sync.Mutex
	unowned map[string]time.Time // ReleaseUnowned: since when a mirror is another's
}

// pathLock serialises the goroutines of this process on one mirror; the
// entry leaves the map with its last user.
type pathLock struct {
	mu    sync.Mutex
	users int
}

// New returns a Mirrors rooted at root (created if missing). httpClient is
// used for the redirect probe, with gitfleet's redirect policy (see
// checkRedirect) whatever its own; nil means a client with a 30 s timeout.
func New(root string, httpClient *http.Client) (*Mirrors, error) {
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("mirror root: %w", err)
	}
	if err := removeStaleScratch(filepath.Join(root, "tmp"), time.Now().Add(-staleScratch)); err != nil {
		return nil, fmt.Errorf("mirror root: %w", err)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &Mirrors{root: root, http: withPolicy(httpClient), locks: map[string]*pathLock{}}, nil
}

// Remote describes a remote after a sync.
type Remote struct {
	// URL is where the requested URL really leads after redirects.
	URL string
	// Head is the commit the remote's HEAD points at ("" when empty).
	Head string
	// DefaultBranch is the branch HEAD points at, without refs/heads/.
	DefaultBranch string
	// Empty reports a repository without any commit.
	Empty bool
	// RefsDigest names the branches and tags the mirror holds after the
	// sync (see RefsDigest): a worker whose mirror has the same digest
	// needs no fetch to scan what this sync saw.
	RefsDigest string
}

// Path is the mirror directory for a remote URL.
func (m *Mirrors) Path(remoteURL string) string {
	sum := sha256.Sum256([]byte(canonicalURL(remoteURL)))
	return filepath.Join(m.root, hex.EncodeToString(sum[:16])+".git")
}

func canonicalURL(u string) string {
	return strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(u), "/"), ".git")
}

// Resolve follows redirects from remoteURL the way git does for the
// reference advertisement, and returns the URL the repository really lives
// at. A renamed or transferred GitHub repository answers at its old URL with
// a redirect to the new one. Redirects are followed only within the
// origin of remoteURL (see checkRedirect): another is Permanent, found
// before anything is sent there.
func (m *Mirrors) Resolve(ctx context.Context, remoteURL string) (string, error) {
	var url string
	err := authed(ctx, m.creds, remoteURL, func(auth *githttp.BasicAuth) error {
		var err error
		url, _, err = m.advertise(ctx, remoteURL, auth)
		return err
	})
	return url, err
}

// advertise asks for the remote's reference advertisement (one request,
// following redirects) and returns where the repository really lives and
// its refs, HEAD included; none for an empty repository.
func (m *Mirrors) advertise(ctx context.Context, remoteURL string, auth *githttp.BasicAuth) (string, []*plumbing.Reference, error) {
	if err := checkRemote(remoteURL); err != nil {
		return "", nil, err
	}
	probe := strings.TrimSuffix(remoteURL, "/") + "/info/refs?service=git-upload-pack"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
	if err != nil {
		return "", nil, errclass.Permanentf(errclass.ReasonInvalidInput, "bad repository URL: %v", err)
	}
	req.Header.Set("Git-Protocol", "version=0")
	auth.SetAuth(req) // nil: anonymous
	resp, err := m.http.Do(req)
	if err != nil {
		var refused *errclass.Error
		if errors.As(err, &refused) {
			return "", nil, refused // a redirect not followed
		}
		return "", nil, fmt.Errorf("reach %s: %w", remoteURL, err)
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound:
		return "", nil, errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound,
			fmt.Errorf("%s: %w (or private)", remoteURL, transport.ErrRepositoryNotFound))
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		return "", nil, errclass.Wrap(errclass.Permanent, errclass.ReasonPermissionDenied,
			fmt.Errorf("%s: %w", remoteURL, transport.ErrAuthenticationRequired))
	case code == http.StatusTooManyRequests || code >= 500:
		return "", nil, errclass.Wrap(errclass.Retryable, fmt.Sprintf("server error %d", code),
			fmt.Errorf("%s answered %s", remoteURL, resp.Status))
	case code != http.StatusOK:
		return "", nil, errclass.Permanentf(errclass.ReasonUnsupported, "%s answered %s", remoteURL, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-advertisement" {
		return "", nil, errclass.Permanentf(errclass.ReasonUnsupported, "%s is not a smart HTTP Git server (content type %q)", remoteURL, ct)
	}
	final := *resp.Request.URL
	final.RawQuery = ""
	effective := strings.TrimSuffix(final.String(), "/info/refs")

	adv := packp.NewAdvRefs()
	if err := adv.Decode(limitAdvertisement(resp.Body)); err != nil {
		if errors.Is(err, packp.ErrEmptyAdvRefs) {
			return effective, nil, nil
		}
		if errors.Is(err, gitread.ErrLimit) {
			return "", nil, fmt.Errorf("%s: read the refs: %w", remoteURL, err)
		}
		return "", nil, errclass.Wrap(errclass.Retryable, "bad advertisement", fmt.Errorf("%s: read the refs: %w", remoteURL, err))
	}
	all, err := adv.AllReferences()
	if err != nil {
		return "", nil, fmt.Errorf("%s: read the refs: %w", remoteURL, err)
	}
	refs := make([]*plumbing.Reference, 0, len(all))
	for _, r := range all {
		refs = append(refs, r)
	}
	return effective, refs, nil
}

// RefsDigest names a set of branches and tags with their targets, in any
// order: equal digests, equal refs. Other refs (HEAD, pull requests,
// gitfleet's own synthetic refs) do not count: a mirror holds exactly the
// remote's branches and tags.
func RefsDigest(refs []*plumbing.Reference) string {
	lines := make([]string, 0, len(refs))
	for _, r := range refs {
		if r.Type() == plumbing.HashReference && (r.Name().IsBranch() || r.Name().IsTag()) {
			lines = append(lines, r.Name().String()+" "+r.Hash().String()+"\n")
		}
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Holds reports whether the local mirror of remoteURL holds exactly the refs
// a sync somewhere saw (refsDigest): then it can be read without fetching.
func (m *Mirrors) Holds(remoteURL, refsDigest string) bool {
	if refsDigest == "" {
		return false
	}
	repo, err := git.PlainOpen(m.Path(remoteURL))
	if err != nil {
		return false
	}
	iter, err := repo.References()
	if err != nil {
		return false
	}
	var refs []*plumbing.Reference
	_ = iter.ForEach(func(r *plumbing.Reference) error { refs = append(refs, r); return nil })
	if RefsDigest(refs) != refsDigest {
		return false
	}
	touch(m.Path(remoteURL))
	return true
}

// listRefs lists the remote's refs (git ls-remote), without cloning, with
// auth (nil: anonymously).
func listRefs(ctx context.Context, remoteURL string, auth *githttp.BasicAuth) ([]*plumbing.Reference, error) {
	if err := checkRemote(remoteURL); err != nil {
		return nil, err
	}
	refs, err := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{remoteURL}}).ListContext(ctx, &git.ListOptions{Auth: method(auth)})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list refs of %s: %w", remoteURL, err)
	}
	return refs, nil
}

// headOf finds the HEAD symref and its commit among listed refs.
func headOf(refs []*plumbing.Reference) (branch plumbing.ReferenceName, commit string) {
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	head, ok := byName[plumbing.HEAD]
	if !ok {
		return "", ""
	}
	if head.Type() == plumbing.HashReference {
		return "", head.Hash().String()
	}
	if target, ok := byName[head.Target()]; ok && target.Type() == plumbing.HashReference {
		return head.Target(), target.Hash().String()
	}
	return head.Target(), ""
}

// sync is Sync with auth (nil: anonymously).
func (m *Mirrors) sync(ctx context.Context, remoteURL string, auth *githttp.BasicAuth) (Remote, error) {
	effective, refs, err := m.advertise(ctx, remoteURL, auth)
	if err != nil {
		return Remote{}, err
	}
	branch, head := headOf(refs)
	out := Remote{URL: effective, Head: head, DefaultBranch: branch.Short(), Empty: len(refs) == 0, RefsDigest: RefsDigest(refs)}
	if out.Empty {
		return out, nil
	}
	path := m.Path(effective)
	unlock, err := m.lock(ctx, path)
	if err != nil {
		return Remote{}, err
	}
	defer unlock()
	// In use from now on (the quota spares it), and its size and URL
	// recorded whatever the fetch leaves, before the lock goes.
	touch(path)
	defer m.record(path, remoteURL)
	if err := removeTemp(path); err != nil {
		return Remote{}, err
	}
	if err := m.fetchInto(ctx, path, effective, branch, head, auth); err != nil {
		if ctx.Err() != nil || !damaged(err) {
			return Remote{}, err
		}
		// A mirror left damaged by a crash (or a pack damaged on its way)
		// is rebuilt once from scratch.
		if rmErr := os.RemoveAll(path); rmErr != nil {
			return Remote{}, errors.Join(err, rmErr)
		}
		if err := m.fetchInto(ctx, path, effective, branch, head, auth); err != nil {
			if ctx.Err() == nil && damaged(err) && errclass.Classify(err).Reason != "unclassified" {
				// Damaged again, fetched afresh: the remote's data is.
				return Remote{}, errclass.Wrap(errclass.Permanent, errclass.ReasonCorrupt, err)
			}
			return Remote{}, err
		}
	}
	touch(path)
	return out, nil
}

// damaged reports errors that a fresh mirror may cure: corrupt objects or
// refs, or local storage trouble, as opposed to the remote refusing or
// failing.
func damaged(err error) bool {
	if errors.Is(err, errDamaged) {
		return true
	}
	switch errclass.Classify(err).Reason {
	case errclass.ReasonCorruptPack, errclass.ReasonCorrupt, "unclassified":
		return true
	}
	return false
}

// Discard removes the mirror of remoteURL (waiting for its lock), for one
// whose data was found damaged: the next Sync rebuilds it from scratch.
func (m *Mirrors) Discard(ctx context.Context, remoteURL string) error {
	path := m.Path(remoteURL)
	unlock, err := m.lock(ctx, path)
	if err != nil {
		return err
	}
	defer unlock()
	os.Remove(path + metaSuffix)
	return os.RemoveAll(path)
}

// errDamaged reports a mirror whose refs name objects it does not hold
// (classified as corrupt data: Permanent, once Sync has rebuilt it).
var errDamaged = fmt.Errorf("mirror is damaged: %w", gitread.ErrCorrupt)

func (m *Mirrors) fetchInto(ctx context.Context, path, remoteURL string, head plumbing.ReferenceName, headCommit string, auth *githttp.BasicAuth) error {
	repo, err := m.open(path)
	if err != nil {
		return err
	}
	st, release := withPackWriter(repo.Storer, path)
	defer release()
	var refs *refBuffer
	if ps, ok := st.(*packStorage); ok {
		if refs, err = bufferRefs(ps); err != nil {
			return fmt.Errorf("%w: %v", errDamaged, err)
		}
		st = refs
	}
	rem := git.NewRemote(st, &config.RemoteConfig{Name: "origin", URLs: []string{remoteURL}})
	err = rem.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"},
		Tags:     git.NoTags, // the refspec above already takes them all
		Force:    true,
		Prune:    true,
		Auth:     method(auth),
		Progress: serverProgress,
	})
	if refs != nil {
		// What go-git set before a failure is kept, as its own storage
		// would have kept it: every object those refs name is stored.
		if ferr := refs.flush(); ferr != nil && (err == nil || errors.Is(err, git.NoErrAlreadyUpToDate)) {
			return ferr
		}
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("fetch %s: %w", remoteURL, err)
	}
	if head != "" {
		if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, head)); err != nil {
			return fmt.Errorf("set mirror HEAD: %w", err)
		}
	}
	// Refs already matching the remote make the fetch a no-op even when the
	// objects behind them are gone (a crash, a damaged pack): check the one
	// commit everything else starts from.
	if headCommit != "" {
		if _, err := object.GetCommit(st, plumbing.NewHash(headCommit)); err != nil {
			return fmt.Errorf("%w: head commit unreadable: %v", errDamaged, err)
		}
	}
	return nil
}

// remote is an anonymous remote on repo, the bare repository at dir:
// mirrors keep no remote configuration, since the URL a repository answers
// at can change. Its fetches write packs with gitread's indexer (see
// packStorage), and its object lookups are gitread's: st is that storage,
// for the caller's own lookups. Call release when done.
func remote(repo *git.Repository, dir, url string) (_ *git.Remote, st storage.Storer, release func()) {
	st, release = withPackWriter(repo.Storer, dir)
	return git.NewRemote(st, &config.RemoteConfig{Name: "origin", URLs: []string{url}}), st, release
}

// open opens the bare mirror at path, creating it atomically if missing so a
// crash never leaves a half-initialised directory at the final path.
func (m *Mirrors) open(path string) (*git.Repository, error) {
	repo, err := git.PlainOpen(path)
	if err == nil {
		return repo, nil
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("open mirror: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Join(m.root, "tmp"), "init-")
	if err != nil {
		return nil, err
	}
	if _, err := git.PlainInit(tmp, true); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("init mirror: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("place mirror: %w", err)
	}
	return git.PlainOpen(path)
}

// Open opens the mirror of remoteURL for reading. Callers that read while
// another goroutine may sync should hold no expectations beyond the refs
// they resolved.
func (m *Mirrors) Open(remoteURL string) (*git.Repository, error) {
	return git.PlainOpen(m.Path(remoteURL))
}

// HasCommit asks the remote whether it still has commit sha reachable, by
// fetching exactly that commit with depth 1 into an empty scratch
// repository (`git fetch --depth 1 origin <sha>`). The scratch
// repository guarantees the answer comes from the remote, never from objects
// a local mirror still holds. "not our ref" is a definite no.
func (m *Mirrors) HasCommit(ctx context.Context, remoteURL, sha string) (bool, error) {
	if !plumbing.IsHash(sha) {
		return false, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", sha)
	}
	tmp, err := os.MkdirTemp(filepath.Join(m.root, "tmp"), "verify-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	repo, err := git.PlainInit(tmp, true)
	if err != nil {
		return false, err
	}
	var ok bool
	err = authed(ctx, m.creds, remoteURL, func(auth *githttp.BasicAuth) error {
		var err error
		ok, err = fetchSHA(ctx, repo, tmp, remoteURL, sha, "refs/gitfleet/verify", 1, auth)
		return err
	})
	return ok, err
}

// FetchSnapshot fetches commit sha alone (depth 1: its tree, not its
// history) from the remote into a new bare repository at dir, for building
// an image of it. It reports false when the remote does not have it.
func FetchSnapshot(ctx context.Context, remoteURL, sha, dir string) (*git.Repository, bool, error) {
	if !plumbing.IsHash(sha) {
		return nil, false, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", sha)
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return nil, false, err
	}
	ok, err := fetchSHA(ctx, repo, dir, remoteURL, sha, "refs/gitfleet/snapshot", 1, nil)
	return repo, ok, err
}

// FetchCommit fetches commit sha from the remote into its mirror, pinned
// under ref so that later syncs never prune it. It reports false when the
// remote does not have it.
func (m *Mirrors) FetchCommit(ctx context.Context, remoteURL, sha, ref string) (bool, error) {
	if !plumbing.IsHash(sha) {
		return false, errclass.Permanentf(errclass.ReasonInvalidInput, "%q is not a commit id", sha)
	}
	path := m.Path(remoteURL)
	unlock, err := m.lock(ctx, path)
	if err != nil {
		return false, err
	}
	defer unlock()
	defer m.record(path, "")
	if err := removeTemp(path); err != nil {
		return false, err
	}
	repo, err := m.open(path)
	if err != nil {
		return false, err
	}
	var ok bool
	err = authed(ctx, m.creds, remoteURL, func(auth *githttp.BasicAuth) error {
		var err error
		ok, err = fetchSHA(ctx, repo, path, remoteURL, sha, ref, 0, auth)
		return err
	})
	return ok, err
}

// fetchSHA fetches one commit by id into repo (at dir) under ref; depth 0
// means its whole history. "not our ref" is the remote's definite no.
func fetchSHA(ctx context.Context, repo *git.Repository, dir, remoteURL, sha, ref string, depth int, auth *githttp.BasicAuth) (bool, error) {
	if err := checkRemote(remoteURL); err != nil {
		return false, err
	}
	rem, _, release := remote(repo, dir, remoteURL)
	defer release()
	err := rem.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{config.RefSpec(sha + ":" + ref)},
		Depth:    depth,
		Tags:     git.NoTags,
		Auth:     method(auth),
		Progress: serverProgress,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return true, nil
	case strings.Contains(err.Error(), "not our ref"):
		return false, nil
	}
	return false, fmt.Errorf("fetch %s by SHA: %w", remoteURL, err)
}

// staleScratch is the age past which a scratch repository under the root's
// tmp/ (a fetch by SHA, a mirror being created) was left by a process that
// died: no fetch lasts that long (a Git activity's attempt is bounded to
// 30 minutes). Other processes may share the root, so younger ones stay.
const staleScratch = 24 * time.Hour

// removeStaleScratch removes what under dir was last modified before
// cutoff.
func removeStaleScratch(dir string, cutoff time.Time) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue // gone meanwhile, or in use
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// removeTemp removes the temporary files a fetch into the mirror at path
// left when its process died (a pack being received, an index being
// written): called under the mirror's lock, when no fetch into it runs,
// so that crashes do not fill the disk with partial packs.
func removeTemp(path string) error {
	dir := filepath.Join(path, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	for _, e := range ents {
		if name := e.Name(); strings.HasPrefix(name, tmpPackPrefix) || strings.HasPrefix(name, tmpIdxPrefix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("mirror: remove a partial pack: %w", err)
			}
		}
	}
	return nil
}

// pathLock is the in-process lock of the mirror at path, shared by its
// users; release when done with it (the last user's release forgets it).
func (m *Mirrors) pathLock(path string) (*pathLock, func()) {
	m.mu.Lock()
	pl, ok := m.locks[path]
	if !ok {
		pl = &pathLock{}
		m.locks[path] = pl
	}
	pl.users++
	m.mu.Unlock()
	return pl, func() {
		m.mu.Lock()
		if pl.users--; pl.users == 0 {
			delete(m.locks, path)
		}
		m.mu.Unlock()
	}
}

// lock serialises work on one mirror across goroutines (a mutex) and
// processes (a blocking flock on a sibling lock file).
func (m *Mirrors) lock(ctx context.Context, path string) (func(), error) {
	pl, release := m.pathLock(path)
	pl.mu.Lock()

	fl := flock.New(path + ".lock")
	locked := make(chan error, 1)
	go func() { locked <- fl.Lock() }()
	select {
	case err := <-locked:
		if err != nil {
			pl.mu.Unlock()
			release()
			return nil, fmt.Errorf("lock mirror: %w", err)
		}
	case <-ctx.Done():
		// The flock may still be granted: give it back when it is.
		go func() {
			if <-locked == nil {
				_ = fl.Close()
			}
			pl.mu.Unlock()
			release()
		}()
		return nil, ctx.Err()
	}
	return func() {
		_ = fl.Close()
		pl.mu.Unlock()
		release()
	}, nil
}

// tryLock takes the lock of the mirror at path if no one holds it, in
// this process or another: upkeep (eviction, repacks) skips a busy mirror
// rather than wait behind a fetch that may last minutes.
func (m *Mirrors) tryLock(path string) (func(), bool) {
	pl, release := m.pathLock(path)
	if !pl.mu.TryLock() {
		release()
		return nil, false
	}
	fl := flock.New(path + ".lock")
	if ok, err := fl.TryLock(); err != nil || !ok {
		pl.mu.Unlock()
		release()
		return nil, false
	}
	return func() {
		_ = fl.Close()
		pl.mu.Unlock()
		release()
	}, true
}

// Head is what the remote's HEAD points at now, from the reference
// advertisement alone (git ls-remote): no clone, no API request. An empty
// repository has no head ("").
func Head(ctx context.Context, remoteURL string) (string, error) {
	refs, err := ListRefs(ctx, remoteURL)
	if err != nil {
		return "", err
	}
	_, head := headOf(refs)
	return head, nil
}

// TempDir creates a scratch directory under the root's tmp/ (a build's
// spooled layer): the caller removes it; one a killed process left is
// removed by the next New once a day old.
func (m *Mirrors) TempDir(pattern string) (string, error) {
	return os.MkdirTemp(filepath.Join(m.root, "tmp"), pattern)
}
