package forge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors returned by the repository-management methods. They are wrapped
// with context; test them with errors.Is.
var (
	ErrNotFound    = errors.New("repository not found")
	ErrExists      = errors.New("repository already exists")
	ErrInvalidName = errors.New("invalid name")
	ErrInvalidPath = errors.New("invalid file path")
)

const (
	firstRepoID  = 1000
	firstOwnerID = 1
)

// Repo is a snapshot of a repository's identity.
type Repo struct {
	ID            int64
	Owner         string // canonical owner login
	Name          string // canonical repository name
	DefaultBranch string
	Private       bool
}

// FullName is "owner/name".
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

type ownerState struct {
	id    int64
	login string
	typ   string // "User" or "Organization"
}

// repoState is the registry's record of one repository. Identity fields are
// guarded by registry.mu; opMu serializes changes to the repository's git
// content (commits, imports, deletion). Lock order: opMu before registry.mu.
type repoState struct {
	id            int64
	owner         *ownerState
	name          string
	private       bool
	defaultBranch string
	createdAt     time.Time
	updatedAt     time.Time
	pushedAt      time.Time
	sizeKB        int64
	archived      bool
	deleted       bool

	opMu      sync.Mutex
	commitSeq int64 // guarded by opMu; feeds deterministic commit dates
}

// repoView is an immutable copy of a repoState for serving.
type repoView struct {
	Repo
	OwnerID   int64
	OwnerType string
	CreatedAt time.Time
	UpdatedAt time.Time
	PushedAt  time.Time
	SizeKB    int64
	Archived  bool
}

// registry maps names to repository ids. Names are matched
// case-insensitively; keys are lower-cased "owner/name".
type registry struct {
	mu          sync.RWMutex
	nextRepoID  int64
	nextOwnerID int64
	repos       map[int64]*repoState
	byName      map[string]int64
	redirects   map[string]int64 // old lower-cased full name -> id
	owners      map[string]*ownerState
}

func (g *registry) init() {
	g.nextRepoID = firstRepoID
	g.nextOwnerID = firstOwnerID
	g.repos = map[int64]*repoState{}
	g.byName = map[string]int64{}
	g.redirects = map[string]int64{}
	g.owners = map[string]*ownerState{}
}

func key(owner, name string) string { return strings.ToLower(owner + "/" + name) }

func (rs *repoState) view() repoView {
	return repoView{
		Repo: Repo{
			ID:            rs.id,
			Owner:         rs.owner.login,
			Name:          rs.name,
			DefaultBranch: rs.defaultBranch,
			Private:       rs.private,
		},
		OwnerID:   rs.owner.id,
		OwnerType: rs.owner.typ,
		CreatedAt: rs.createdAt,
		UpdatedAt: rs.updatedAt,
		PushedAt:  rs.pushedAt,
		SizeKB:    rs.sizeKB,
		Archived:  rs.archived,
	}
}

// resolve finds a repository by current name or, failing that, by an old
// name that redirects to it. It returns ok=false for unknown names.
func (g *registry) resolve(owner, name string) (v repoView, redirected, ok bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	k := key(owner, name)
	if rs := g.repos[g.byName[k]]; rs != nil {
		return rs.view(), false, true
	}
	if id, found := g.redirects[k]; found {
		if rs, live := g.repos[id]; live {
			return rs.view(), true, true
		}
	}
	return repoView{}, false, false
}

func (g *registry) byID(id int64) (repoView, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	rs, ok := g.repos[id]
	if !ok {
		return repoView{}, false
	}
	return rs.view(), true
}

func (g *registry) currentLocked(owner, name string) (*repoState, error) {
	rs := g.repos[g.byName[key(owner, name)]]
	if rs == nil { // unknown, or reserved by an unfinished CreateRepo
		return nil, fmt.Errorf("forge: %s/%s: %w", owner, name, ErrNotFound)
	}
	return rs, nil
}

func (g *registry) ownerLocked(login string) *ownerState {
	o, ok := g.owners[strings.ToLower(login)]
	if !ok {
		o = &ownerState{id: g.nextOwnerID, login: login, typ: "User"}
		g.nextOwnerID++
		g.owners[strings.ToLower(login)] = o
	}
	return o
}

// dropRedirectsTo removes every redirect that points to id.
func (g *registry) dropRedirectsTo(id int64) {
	for k, v := range g.redirects {
		if v == id {
			delete(g.redirects, k)
		}
	}
}

// ValidOwner reports whether login is acceptable as an owner: 1–39
// characters, ASCII letters, digits and single hyphens, not starting or
// ending with a hyphen. "api" is reserved because /api/ is the REST prefix.
func ValidOwner(login string) error {
	if len(login) < 1 || len(login) > 39 {
		return fmt.Errorf("forge: owner %q: must be 1-39 characters: %w", login, ErrInvalidName)
	}
	if strings.EqualFold(login, "api") {
		return fmt.Errorf("forge: owner %q is reserved: %w", login, ErrInvalidName)
	}
	for i := 0; i < len(login); i++ {
		c := login[i]
		switch {
		case isAlnum(c):
		case c == '-' && i > 0 && i < len(login)-1 && login[i-1] != '-':
		default:
			return fmt.Errorf("forge: owner %q: only letters, digits and single inner hyphens: %w", login, ErrInvalidName)
		}
	}
	return nil
}

// ValidRepoName reports whether name is acceptable as a repository name:
// 1–100 characters of [A-Za-z0-9._-], not "." or "..", and not ending in
// ".git" (GitHub strips that suffix, and /{owner}/{name}.git would be
// ambiguous).
func ValidRepoName(name string) error {
	if len(name) < 1 || len(name) > 100 {
		return fmt.Errorf("forge: repository name %q: must be 1-100 characters: %w", name, ErrInvalidName)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("forge: repository name %q: %w", name, ErrInvalidName)
	}
	if strings.HasSuffix(strings.ToLower(name), ".git") {
		return fmt.Errorf("forge: repository name %q: must not end in .git: %w", name, ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("forge: repository name %q: only letters, digits, '.', '_' and '-': %w", name, ErrInvalidName)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func validNames(owner, name string) error {
	if err := ValidOwner(owner); err != nil {
		return err
	}
	return ValidRepoName(name)
}

func (f *Forge) gitDirOf(id int64) string {
	return filepath.Join(f.reposDir, strconv.FormatInt(id, 10)+".git")
}

// CreateRepo creates an empty public repository with default branch "main"
// and a new id (monotonic, starting at 1000). The owner is created on first
// use; an existing owner keeps its canonical case. Creating a repository at a
// name that redirects elsewhere (after a rename or transfer) drops that
// redirect: the new repository wins.
func (f *Forge) CreateRepo(owner, name string) (Repo, error) {
	defer f.hookRepoCreated(owner, name)()
	if err := validNames(owner, name); err != nil {
		return Repo{}, err
	}
	g := &f.reg
	g.mu.Lock()
	k := key(owner, name)
	if _, taken := g.byName[k]; taken {
		g.mu.Unlock()
		return Repo{}, fmt.Errorf("forge: %s/%s: %w", owner, name, ErrExists)
	}
	id := g.nextRepoID
	g.nextRepoID++
	// Reserve the name now; the repository becomes visible once its bare
	// repository exists (see below).
	g.byName[k] = id
	g.mu.Unlock()

	dir := f.gitDirOf(id)
	if err := f.initBare(dir); err != nil {
		_ = os.RemoveAll(dir)
		g.mu.Lock()
		delete(g.byName, k)
		g.mu.Unlock()
		return Repo{}, err
	}

	now := time.Now().UTC().Truncate(time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	rs := &repoState{
		id:            id,
		owner:         g.ownerLocked(owner),
		name:          name,
		defaultBranch: "main",
		createdAt:     now,
		updatedAt:     now,
		pushedAt:      now,
	}
	g.repos[id] = rs
	delete(g.redirects, k)
	return rs.view().Repo, nil
}

// Lookup finds a repository by its current name (case-insensitively). It
// does not follow redirects left by renames and transfers.
func (f *Forge) Lookup(owner, name string) (Repo, bool) {
	f.reg.mu.RLock()
	defer f.reg.mu.RUnlock()
	id, ok := f.reg.byName[key(owner, name)]
	if !ok {
		return Repo{}, false
	}
	rs, ok := f.reg.repos[id]
	if !ok { // reserved by an unfinished CreateRepo
		return Repo{}, false
	}
	return rs.view().Repo, true
}

// LookupID finds a repository by id.
func (f *Forge) LookupID(id int64) (Repo, bool) {
	v, ok := f.reg.byID(id)
	return v.Repo, ok
}

// Repos lists all repositories, ordered by id.
func (f *Forge) Repos() []Repo {
	f.reg.mu.RLock()
	out := make([]Repo, 0, len(f.reg.repos))
	for _, rs := range f.reg.repos {
		out = append(out, rs.view().Repo)
	}
	f.reg.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// GitDir is the path of the repository's bare git directory. It does not
// change on rename or transfer.
func (f *Forge) GitDir(owner, name string) (string, error) {
	rs, err := f.lookupState(owner, name)
	if err != nil {
		return "", err
	}
	return f.gitDirOf(rs.id), nil
}

func (f *Forge) lookupState(owner, name string) (*repoState, error) {
	f.reg.mu.RLock()
	defer f.reg.mu.RUnlock()
	rs, err := f.reg.currentLocked(owner, name)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// move changes a repository's owner and/or name, leaving a redirect from the
// old name.
func (f *Forge) move(owner, name, newOwner, newName string) error {
	if err := validNames(newOwner, newName); err != nil {
		return err
	}
	g := &f.reg
	g.mu.Lock()
	defer g.mu.Unlock()
	rs, err := g.currentLocked(owner, name)
	if err != nil {
		return err
	}
	oldKey, newKey := key(owner, name), key(newOwner, newName)
	if id, taken := g.byName[newKey]; taken && id != rs.id {
		return fmt.Errorf("forge: %s/%s: %w", newOwner, newName, ErrExists)
	}
	delete(g.byName, oldKey)
	g.byName[newKey] = rs.id
	if oldKey != newKey {
		g.redirects[oldKey] = rs.id
	}
	delete(g.redirects, newKey)
	rs.owner = g.ownerLocked(newOwner)
	rs.name = newName
	rs.updatedAt = time.Now().UTC().Truncate(time.Second)
	return nil
}

// Rename gives a repository a new name under the same owner. The old name
// keeps redirecting to the repository (API 301 to /repositories/{id}, git
// 301 to the new path) until a repository is created there. Renaming to a
// different case of the same name only changes the canonical case.
func (f *Forge) Rename(owner, name, newName string) error {
	defer f.hookRepoEdit(owner, name)()
	rs, err := f.lookupState(owner, name)
	if err != nil {
		return err
	}
	f.reg.mu.RLock()
	login := rs.owner.login
	f.reg.mu.RUnlock()
	return f.move(owner, name, login, newName)
}

// Transfer moves a repository to another owner, keeping its name. The old
// full name redirects like after Rename.
func (f *Forge) Transfer(owner, name, newOwner string) error {
	defer f.hookRepoEdit(owner, name)()
	rs, err := f.lookupState(owner, name)
	if err != nil {
		return err
	}
	f.reg.mu.RLock()
	repoName := rs.name
	f.reg.mu.RUnlock()
	return f.move(owner, name, newOwner, repoName)
}

// Delete removes a repository, its redirects and its bare repository.
// In-flight git requests on it may fail.
func (f *Forge) Delete(owner, name string) error {
	defer f.hookRepoEdit(owner, name)()
	rs, err := f.lookupState(owner, name)
	if err != nil {
		return err
	}
	rs.opMu.Lock()
	defer rs.opMu.Unlock()
	g := &f.reg
	g.mu.Lock()
	cur, ok := g.repos[rs.id]
	if !ok || cur != rs || rs.deleted {
		g.mu.Unlock()
		return fmt.Errorf("forge: %s/%s: %w", owner, name, ErrNotFound)
	}
	rs.deleted = true
	delete(g.repos, rs.id)
	delete(g.byName, key(rs.owner.login, rs.name))
	g.dropRedirectsTo(rs.id)
	g.mu.Unlock()
	if err := os.RemoveAll(f.gitDirOf(rs.id)); err != nil {
		return fmt.Errorf("forge: delete %s/%s: %w", owner, name, err)
	}
	return nil
}

// SetPrivate changes a repository's visibility. Private repositories are
// visible only to requests carrying Options.Token.
func (f *Forge) SetPrivate(owner, name string, private bool) error {
	defer f.hookRepoEdit(owner, name)()
	g := &f.reg
	g.mu.Lock()
	defer g.mu.Unlock()
	rs, err := g.currentLocked(owner, name)
	if err != nil {
		return err
	}
	rs.private = private
	rs.updatedAt = time.Now().UTC().Truncate(time.Second)
	return nil
}

// touchPushed records a content change.
func (f *Forge) touchPushed(rs *repoState, sizeKB int64) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	rs.pushedAt = now
	rs.updatedAt = now
	if sizeKB >= 0 {
		rs.sizeKB = sizeKB
	}
}
