package forge

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	docGetRepo   = "https://docs.github.com/rest/repos/repos#get-a-repository"
	docRedirects = "https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#follow-redirects"
)

// userJSON is the "simple user" object GitHub embeds as a repository owner.
type userJSON struct {
	Login            string `json:"login"`
	ID               int64  `json:"id"`
	NodeID           string `json:"node_id"`
	AvatarURL        string `json:"avatar_url"`
	GravatarID       string `json:"gravatar_id"`
	URL              string `json:"url"`
	HTMLURL          string `json:"html_url"`
	FollowersURL     string `json:"followers_url"`
	ReposURL         string `json:"repos_url"`
	OrganizationsURL string `json:"organizations_url"`
	Type             string `json:"type"`
	SiteAdmin        bool   `json:"site_admin"`
}

type permissionsJSON struct {
	Admin    bool `json:"admin"`
	Maintain bool `json:"maintain"`
	Push     bool `json:"push"`
	Triage   bool `json:"triage"`
	Pull     bool `json:"pull"`
}

// repoJSON is the repository object as GitHub serves it (the fields
// go-github's Repository reads; URL templates are abbreviated).
type repoJSON struct {
	ID               int64            `json:"id"`
	NodeID           string           `json:"node_id"`
	Name             string           `json:"name"`
	FullName         string           `json:"full_name"`
	Private          bool             `json:"private"`
	Owner            userJSON         `json:"owner"`
	HTMLURL          string           `json:"html_url"`
	Description      *string          `json:"description"`
	Fork             bool             `json:"fork"`
	URL              string           `json:"url"`
	BranchesURL      string           `json:"branches_url"`
	TagsURL          string           `json:"tags_url"`
	CommitsURL       string           `json:"commits_url"`
	GitURL           string           `json:"git_url"`
	SSHURL           string           `json:"ssh_url"`
	CloneURL         string           `json:"clone_url"`
	SVNURL           string           `json:"svn_url"`
	MirrorURL        *string          `json:"mirror_url"`
	Homepage         *string          `json:"homepage"`
	Language         *string          `json:"language"`
	CreatedAt        string           `json:"created_at"`
	UpdatedAt        string           `json:"updated_at"`
	PushedAt         string           `json:"pushed_at"`
	Size             int64            `json:"size"`
	StargazersCount  int              `json:"stargazers_count"`
	WatchersCount    int              `json:"watchers_count"`
	ForksCount       int              `json:"forks_count"`
	OpenIssuesCount  int              `json:"open_issues_count"`
	Forks            int              `json:"forks"`
	OpenIssues       int              `json:"open_issues"`
	Watchers         int              `json:"watchers"`
	HasIssues        bool             `json:"has_issues"`
	HasProjects      bool             `json:"has_projects"`
	HasWiki          bool             `json:"has_wiki"`
	HasPages         bool             `json:"has_pages"`
	HasDownloads     bool             `json:"has_downloads"`
	Archived         bool             `json:"archived"`
	Disabled         bool             `json:"disabled"`
	IsTemplate       bool             `json:"is_template"`
	Visibility       string           `json:"visibility"`
	Topics           []string         `json:"topics"`
	DefaultBranch    string           `json:"default_branch"`
	AllowForking     bool             `json:"allow_forking"`
	Permissions      *permissionsJSON `json:"permissions,omitempty"`
	NetworkCount     int              `json:"network_count"`
	SubscribersCount int              `json:"subscribers_count"`
}

func ghTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// nodeID builds a legacy-format GraphQL node id ("010:Repository123" in
// base64), like GitHub's older ids.
func nodeID(typ string, id int64) string {
	return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("0%d:%s%d", len(typ), typ, id)))
}

func ownerJSON(c *apiCall, login string, id int64, typ string) userJSON {
	base := c.apiBase() + "users/" + login
	return userJSON{
		Login:            login,
		ID:               id,
		NodeID:           nodeID(typ, id),
		AvatarURL:        c.origin() + "/avatars/u/" + strconv.FormatInt(id, 10),
		URL:              base,
		HTMLURL:          c.origin() + "/" + login,
		FollowersURL:     base + "/followers",
		ReposURL:         base + "/repos",
		OrganizationsURL: base + "/orgs",
		Type:             typ,
	}
}

func repoToJSON(c *apiCall, v repoView) repoJSON {
	full := v.Owner + "/" + v.Name
	api := c.apiBase() + "repos/" + full
	html := c.origin() + "/" + full
	host := c.r.Host
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	visibility := "public"
	if v.Private {
		visibility = "private"
	}
	j := repoJSON{
		ID:            v.ID,
		NodeID:        nodeID("Repository", v.ID),
		Name:          v.Name,
		FullName:      full,
		Private:       v.Private,
		Owner:         ownerJSON(c, v.Owner, v.OwnerID, v.OwnerType),
		HTMLURL:       html,
		URL:           api,
		BranchesURL:   api + "/branches{/branch}",
		TagsURL:       api + "/tags",
		CommitsURL:    api + "/commits{/sha}",
		GitURL:        "git://" + host + "/" + full + ".git",
		SSHURL:        "git@" + host + ":" + full + ".git",
		CloneURL:      html + ".git",
		SVNURL:        html,
		CreatedAt:     ghTime(v.CreatedAt),
		UpdatedAt:     ghTime(v.UpdatedAt),
		PushedAt:      ghTime(v.PushedAt),
		Size:          v.SizeKB,
		HasIssues:     true,
		HasProjects:   true,
		HasWiki:       true,
		HasDownloads:  true,
		Visibility:    visibility,
		Topics:        []string{},
		DefaultBranch: v.DefaultBranch,
		AllowForking:  true,
		Archived:      v.Archived,
	}
	if c.authed {
		j.Permissions = &permissionsJSON{Admin: true, Maintain: true, Push: true, Triage: true, Pull: true}
	}
	return j
}

// resolveRepo finds the repository named by {owner}/{repo} for an API
// request. For an old name it answers 301 to /repositories/{id} (keeping
// any sub-path and query, as GitHub does) and returns ok=false; for an
// unknown or hidden repository it answers 404. subPath is the part of the
// URL path after /repos/{owner}/{repo}.
func (c *apiCall) resolveRepo(subPath string) (repoView, bool) {
	v, redirected, ok := c.f.reg.resolve(c.param("owner"), c.param("repo"))
	if !ok || !c.f.canSee(v, c.who) {
		c.notFound(docGetRepo)
		return repoView{}, false
	}
	if redirected {
		loc := c.apiBase() + "repositories/" + strconv.FormatInt(v.ID, 10) + subPath
		if c.r.URL.RawQuery != "" {
			loc += "?" + c.r.URL.RawQuery
		}
		status := http.StatusMovedPermanently
		if c.r.Method != http.MethodGet && c.r.Method != http.MethodHead {
			status = http.StatusTemporaryRedirect // GitHub keeps the method
		}
		c.w.Header().Set("Location", loc)
		c.json(status, errorBody{Message: http.StatusText(status), URL: loc, DocumentationURL: docRedirects})
		return repoView{}, false
	}
	return v, true
}

// repoByID is resolveRepo for /repositories/{id}.
func (c *apiCall) repoByID() (repoView, bool) {
	id, err := strconv.ParseInt(c.param("id"), 10, 64)
	if err != nil {
		c.notFound(docGetRepo)
		return repoView{}, false
	}
	v, ok := c.f.reg.byID(id)
	if !ok || !c.f.canSee(v, c.who) {
		c.notFound(docGetRepo)
		return repoView{}, false
	}
	return v, true
}

// GET /repos/{owner}/{repo}
func getRepo(c *apiCall) {
	if v, ok := c.resolveRepo(""); ok {
		c.json(http.StatusOK, repoToJSON(c, v))
	}
}

// GET /repositories/{id}
func getRepoByID(c *apiCall) {
	if v, ok := c.repoByID(); ok {
		c.json(http.StatusOK, repoToJSON(c, v))
	}
}
