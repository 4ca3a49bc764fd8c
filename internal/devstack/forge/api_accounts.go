package forge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The account endpoints: who the token is, what it sees, listed with
// GitHub's pagination and conditional requests (see api.go's routes).

// views lists every live repository the caller may see, by filter.
func (f *Forge) views(c caller, keep func(repoView) bool) []repoView {
	f.reg.mu.RLock()
	all := make([]repoView, 0, len(f.reg.repos))
	for _, rs := range f.reg.repos {
		all = append(all, rs.view())
	}
	f.reg.mu.RUnlock()
	out := all[:0]
	for _, v := range all {
		if f.canSee(v, c) && keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// adminLogin is the login GET /user answers for Options.Token: a site
// administrator, who sees every repository.
const adminLogin = "forge-admin"

func getUser(c *apiCall) {
	if c.who.admin {
		u := ownerJSON(c, adminLogin, 0, "User")
		u.SiteAdmin = true
		c.json(http.StatusOK, u)
		return
	}
	if c.who.inst != nil || c.who.app != nil {
		c.error(http.StatusForbidden, "Resource not accessible by integration", "https://docs.github.com/rest/users/users#get-the-authenticated-user")
		return
	}
	if c.who.user == nil {
		c.error(http.StatusUnauthorized, "Requires authentication", "https://docs.github.com/rest/users/users#get-the-authenticated-user")
		return
	}
	c.cachedJSON(ownerJSON(c, c.who.user.login, c.who.user.id, "User"), time.Unix(c.f.changed.Load(), 0))
}

// getUserRepos serves GET /user/repos: the repositories the user owns,
// collaborates on, or sees as a member of their organizations.
func getUserRepos(c *apiCall) {
	if c.who.user == nil {
		c.error(http.StatusUnauthorized, "Requires authentication", "https://docs.github.com/rest/repos/repos#list-repositories-for-the-authenticated-user")
		return
	}
	q := c.r.URL.Query()
	aff := map[string]bool{"owner": true, "collaborator": true, "organization_member": true}
	if a := q.Get("affiliation"); a != "" {
		aff = map[string]bool{}
		for _, p := range strings.Split(a, ",") {
			aff[strings.TrimSpace(p)] = true
		}
	}
	typ, vis := q.Get("type"), q.Get("visibility")
	me := c.who.user.login
	vs := c.f.views(c.who, func(v repoView) bool {
		owner := strings.EqualFold(v.Owner, me)
		member := v.OwnerType == "Organization" && c.f.member(c.who, v.Owner)
		collab := c.f.collaborator(v, c.who)
		switch typ {
		case "owner":
			if !owner {
				return false
			}
		case "member":
			if owner {
				return false
			}
		case "public":
			if v.Private {
				return false
			}
		case "private":
			if !v.Private {
				return false
			}
		}
		switch vis {
		case "public":
			if v.Private {
				return false
			}
		case "private":
			if !v.Private {
				return false
			}
		}
		return owner && aff["owner"] || member && aff["organization_member"] || collab && aff["collaborator"]
	})
	c.listRepos(vs, "full_name")
}

func getUserOrgs(c *apiCall) {
	if c.who.user == nil {
		c.error(http.StatusUnauthorized, "Requires authentication", "https://docs.github.com/rest/orgs/orgs#list-organizations-for-the-authenticated-user")
		return
	}
	orgs := c.f.userOrgs(c.who)
	items := make([]any, len(orgs))
	for i, o := range orgs {
		items[i] = orgJSONOf(c, o)
	}
	c.paged(items, time.Unix(c.f.changed.Load(), 0))
}

// getUserOrgMembership serves GET /user/memberships/orgs/{org}: the
// caller's membership, 404 when it has none (or {org} is no organization).
func getUserOrgMembership(c *apiCall) {
	if c.who.user == nil && !c.who.admin {
		c.error(http.StatusUnauthorized, "Requires authentication", "https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user")
		return
	}
	o, ok := c.org()
	if !ok {
		return
	}
	role := "member"
	switch {
	case c.who.admin:
		role = "admin"
	case !c.f.member(c.who, o.login):
		c.notFound("https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user")
		return
	}
	c.json(http.StatusOK, map[string]any{"state": "active", "role": role, "url": c.apiBase() + "user/memberships/orgs/" + o.login,
		"organization": orgJSONOf(c, o)})
}

func (c *apiCall) org() (*ownerState, bool) {
	c.f.reg.mu.RLock()
	o := c.f.reg.owners[strings.ToLower(c.param("org"))]
	c.f.reg.mu.RUnlock()
	if o == nil || o.typ != "Organization" {
		c.notFound("https://docs.github.com/rest/orgs/orgs#get-an-organization")
		return nil, false
	}
	return o, true
}

func getOrg(c *apiCall) {
	if o, ok := c.org(); ok {
		c.cachedJSON(orgJSONOf(c, o), time.Unix(c.f.changed.Load(), 0))
	}
}

// getOrgRepos serves GET /orgs/{org}/repos: what the caller may see of them.
func getOrgRepos(c *apiCall) {
	o, ok := c.org()
	if !ok {
		return
	}
	typ := c.r.URL.Query().Get("type")
	member := c.f.member(c.who, o.login)
	vs := c.f.views(c.who, func(v repoView) bool {
		if !strings.EqualFold(v.Owner, o.login) {
			return false
		}
		switch typ {
		case "public":
			return !v.Private
		case "private":
			return v.Private
		case "forks":
			return false // the forge has no forks
		case "member":
			return member
		}
		return true
	})
	c.listRepos(vs, "created")
}

type orgJSON struct {
	Login       string `json:"login"`
	ID          int64  `json:"id"`
	NodeID      string `json:"node_id"`
	URL         string `json:"url"`
	ReposURL    string `json:"repos_url"`
	Description string `json:"description"`
	Type        string `json:"type,omitempty"`
}

func orgJSONOf(c *apiCall, o *ownerState) orgJSON {
	base := c.apiBase() + "orgs/" + o.login
	return orgJSON{Login: o.login, ID: o.id, NodeID: nodeID("Organization", o.id), URL: base, ReposURL: base + "/repos",
		Description: "The " + o.login + " organization"}
}

// listRepos sorts (sort, direction: GitHub's defaults) and serves a page.
func (c *apiCall) listRepos(vs []repoView, defaultSort string) {
	q := c.r.URL.Query()
	by := q.Get("sort")
	if by == "" {
		by = defaultSort
	}
	desc := q.Get("direction") == "desc" || (q.Get("direction") == "" && by != "full_name")
	less := func(a, b repoView) bool {
		switch by {
		case "created":
			return a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.ID < b.ID
		case "updated":
			return a.UpdatedAt.Before(b.UpdatedAt) || a.UpdatedAt.Equal(b.UpdatedAt) && a.ID < b.ID
		case "pushed":
			return a.PushedAt.Before(b.PushedAt) || a.PushedAt.Equal(b.PushedAt) && a.ID < b.ID
		}
		return strings.ToLower(a.FullName()) < strings.ToLower(b.FullName())
	}
	sort.Slice(vs, func(i, j int) bool {
		if desc {
			return less(vs[j], vs[i])
		}
		return less(vs[i], vs[j])
	})
	items := make([]any, len(vs))
	var newest time.Time
	for i, v := range vs {
		items[i] = repoToJSON(c, v)
		newest = maxTime(newest, v.UpdatedAt, v.PushedAt)
	}
	c.paged(items, maxTime(newest, time.Unix(c.f.changed.Load(), 0)))
}

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// paged serves one page of items as GitHub paginates: per_page (default
// 30, at most 100) and page, with a Link header (first, prev, next, last).
func (c *apiCall) paged(items []any, lastModified time.Time) {
	q := c.r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	last := max(1, (len(items)+per-1)/per)
	from := min((page-1)*per, len(items))
	to := min(from+per, len(items))
	link := func(p int, rel string) string {
		u := *c.r.URL
		v := u.Query()
		v.Set("page", strconv.Itoa(p))
		u.RawQuery = v.Encode()
		return fmt.Sprintf(`<%s%s>; rel="%s"`, c.origin(), u.RequestURI(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		c.w.Header().Set("Link", strings.Join(links, ", "))
	}
	c.cachedJSON(items[from:to], lastModified)
}

// cachedJSON answers 200 with an ETag (a digest of the exact body) and
// Last-Modified, or 304 Not Modified to a request whose If-None-Match (or,
// without it, If-Modified-Since) matches — and, as on GitHub, a 304 costs
// no rate-limit quota.
func (c *apiCall) cachedJSON(v any, lastModified time.Time) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(c.w, err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := c.w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", lastModified.UTC().Format(http.TimeFormat))
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	if notModified(c.r, etag, lastModified) {
		c.f.rates.of(credential(c.r)).refund().setHeaders(h)
		h.Del("Link")
		c.w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(body)
}

func notModified(r *http.Request, etag string, lastModified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == etag || t == "*" {
				return true
			}
		}
		return false
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil {
			return !lastModified.Truncate(time.Second).After(t)
		}
	}
	return false
}
