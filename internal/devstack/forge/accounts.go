package forge

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// User is a forge user with its token.
type User struct {
	ID    int64
	Login string
	// Token authenticates as the user (API: Bearer or token; git: Basic).
	Token string
}

// account is a user's record.
type account struct {
	id    int64
	login string
	token string
}

// accounts holds the users, organization memberships and the repositories
// restricted to some users. Guarded by mu; the registry's lock is never
// held while taking it.
type accounts struct {
	mu      sync.RWMutex
	byLogin map[string]*account
	byToken map[string]*account
	members map[string]map[string]bool // org (lower) → member logins (lower)
	access  map[int64]map[string]bool  // private repository id → the only users (lower) who see it

	// GitHub Apps (apps.go).
	apps          map[int64]*appState
	installs      map[int64]*installState
	instTokens    map[string]*instToken
	nextAppID     int64
	nextInstallID int64
	minted        atomic.Int64
	everToken     []string              // every installation token minted
	everGrant     map[string]*instToken // what each was granted, revoked ones too
}

func (a *accounts) init() {
	a.byLogin = map[string]*account{}
	a.byToken = map[string]*account{}
	a.members = map[string]map[string]bool{}
	a.access = map[int64]map[string]bool{}
	a.initApps()
}

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func newToken() string {
	b := make([]byte, 36)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(tokenAlphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = tokenAlphabet[n.Int64()]
	}
	return "ghp_" + string(b)
}

// AddUser creates a user (an owner of type User) with a fresh token.
func (f *Forge) AddUser(login string) (User, error) {
	if err := ValidOwner(login); err != nil {
		return User{}, err
	}
	f.reg.mu.Lock()
	o := f.reg.ownerLocked(login)
	f.reg.mu.Unlock()
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	if _, dup := f.acct.byLogin[strings.ToLower(login)]; dup {
		return User{}, fmt.Errorf("forge: user %s: %w", login, ErrExists)
	}
	ac := &account{id: o.id, login: o.login, token: newToken()}
	f.acct.byLogin[strings.ToLower(login)] = ac
	f.acct.byToken[ac.token] = ac
	f.touch()
	return User{ID: ac.id, Login: ac.login, Token: ac.token}, nil
}

// RotateToken gives a user a new token; the old one stops working.
func (f *Forge) RotateToken(login string) (User, error) {
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	ac, ok := f.acct.byLogin[strings.ToLower(login)]
	if !ok {
		return User{}, fmt.Errorf("forge: user %s: %w", login, ErrNotFound)
	}
	delete(f.acct.byToken, ac.token)
	ac.token = newToken()
	f.acct.byToken[ac.token] = ac
	return User{ID: ac.id, Login: ac.login, Token: ac.token}, nil
}

// CreateOrg creates an organization (an owner of type Organization).
func (f *Forge) CreateOrg(login string) error {
	if err := ValidOwner(login); err != nil {
		return err
	}
	f.reg.mu.Lock()
	o := f.reg.ownerLocked(login)
	o.typ = "Organization"
	f.reg.mu.Unlock()
	f.acct.mu.Lock()
	if f.acct.members[strings.ToLower(login)] == nil {
		f.acct.members[strings.ToLower(login)] = map[string]bool{}
	}
	f.acct.mu.Unlock()
	f.touch()
	return nil
}

// AddMember makes user a member of org: it sees the organization's private
// repositories (GitHub's default base permission), unless SetRepoAccess
// restricts one.
func (f *Forge) AddMember(org, user string) error { return f.setMember(org, user, true) }

// RemoveMember revokes a membership.
func (f *Forge) RemoveMember(org, user string) error { return f.setMember(org, user, false) }

func (f *Forge) setMember(org, user string, member bool) error {
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	m, ok := f.acct.members[strings.ToLower(org)]
	if !ok {
		return fmt.Errorf("forge: organization %s: %w", org, ErrNotFound)
	}
	if _, ok := f.acct.byLogin[strings.ToLower(user)]; !ok {
		return fmt.Errorf("forge: user %s: %w", user, ErrNotFound)
	}
	if member {
		m[strings.ToLower(user)] = true
	} else {
		delete(m, strings.ToLower(user))
	}
	f.touch()
	return nil
}

// SetRepoAccess restricts a private repository to the listed users (its
// owner, when a user, always sees it); no users lifts the restriction.
func (f *Forge) SetRepoAccess(owner, name string, users ...string) error {
	r, ok := f.Lookup(owner, name)
	if !ok {
		return fmt.Errorf("forge: %s/%s: %w", owner, name, ErrNotFound)
	}
	f.acct.mu.Lock()
	defer f.acct.mu.Unlock()
	if len(users) == 0 {
		delete(f.acct.access, r.ID)
	} else {
		set := map[string]bool{}
		for _, u := range users {
			set[strings.ToLower(u)] = true
		}
		f.acct.access[r.ID] = set
	}
	f.touch()
	return nil
}

// SetArchived archives or unarchives a repository.
func (f *Forge) SetArchived(owner, name string, archived bool) error {
	defer f.hookRepoEdit(owner, name)()
	rs, err := f.lookupState(owner, name)
	if err != nil {
		return err
	}
	f.reg.mu.Lock()
	rs.archived = archived
	rs.updatedAt = time.Now().UTC().Truncate(time.Second)
	f.reg.mu.Unlock()
	return nil
}

// touch records that what lists show changed (Last-Modified).
func (f *Forge) touch() { f.changed.Store(time.Now().UTC().Truncate(time.Second).Unix()) }

// caller is who an API or git request acts as.
type caller struct {
	admin bool          // Options.Token: sees everything
	user  *account      // a user's token
	app   *appState     // an App's JWT: sees no repository, only its installations
	inst  *installState // an installation token: what the installation was granted,
	tok   *instToken    // as narrowed by the token's request
}

// member reports whether the caller is a member of org.
func (f *Forge) member(c caller, org string) bool {
	if c.user == nil {
		return false
	}
	f.acct.mu.RLock()
	defer f.acct.mu.RUnlock()
	return f.acct.members[strings.ToLower(org)][strings.ToLower(c.user.login)]
}

// canSee tells whether a repository may be shown to the caller: public
// ones to everybody, private ones to the admin token, the owning user,
// members of the owning organization and collaborators, as restricted by
// SetRepoAccess.
func (f *Forge) canSee(v repoView, c caller) bool {
	if !v.Private || c.admin {
		return true
	}
	if c.inst != nil {
		f.acct.mu.RLock()
		defer f.acct.mu.RUnlock()
		return c.inst.grants(v) && c.tok.sees(v)
	}
	if c.user == nil {
		return false
	}
	me := strings.ToLower(c.user.login)
	if strings.EqualFold(v.Owner, c.user.login) {
		return true
	}
	f.acct.mu.RLock()
	defer f.acct.mu.RUnlock()
	if only, restricted := f.acct.access[v.ID]; restricted {
		return only[me]
	}
	return v.OwnerType == "Organization" && f.acct.members[strings.ToLower(v.Owner)][me]
}

// collaborator reports a repository shared with the user by SetRepoAccess
// that the user neither owns nor sees through membership.
func (f *Forge) collaborator(v repoView, c caller) bool {
	if c.user == nil {
		return false
	}
	f.acct.mu.RLock()
	defer f.acct.mu.RUnlock()
	return f.acct.access[v.ID][strings.ToLower(c.user.login)]
}

// userOrgs lists the organizations a user is a member of, by login.
func (f *Forge) userOrgs(c caller) []*ownerState {
	if c.user == nil {
		return nil
	}
	me := strings.ToLower(c.user.login)
	f.acct.mu.RLock()
	var names []string
	for org, m := range f.acct.members {
		if m[me] {
			names = append(names, org)
		}
	}
	f.acct.mu.RUnlock()
	sort.Strings(names)
	f.reg.mu.RLock()
	defer f.reg.mu.RUnlock()
	out := make([]*ownerState, 0, len(names))
	for _, n := range names {
		if o := f.reg.owners[n]; o != nil {
			out = append(out, o)
		}
	}
	return out
}

// credential is the secret an Authorization header carries ("" for none).
func credential(r *http.Request) string {
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	cred = strings.TrimSpace(cred)
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		return cred
	case "basic":
		if user, pass, ok := r.BasicAuth(); ok {
			if pass != "" {
				return pass
			}
			return user
		}
	}
	return ""
}
