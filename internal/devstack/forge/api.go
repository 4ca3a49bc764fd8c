package forge

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

const (
	apiPrefix = "/api/v3/"
	docsURL   = "https://docs.github.com/rest"
)

// apiCall is one API request being served.
type apiCall struct {
	f      *Forge
	w      http.ResponseWriter
	r      *http.Request
	params map[string]string // {name} segments of the matched pattern
	authed bool              // carries a valid token
	who    caller
}

func (c *apiCall) param(name string) string { return c.params[name] }

// origin is scheme://host of the request.
func (c *apiCall) origin() string { return origin(c.r) }

// apiBase is origin + "/api/v3/".
func (c *apiCall) apiBase() string { return c.origin() + apiPrefix }

func (c *apiCall) json(status int, v any) { writeJSON(c.w, status, v) }

func (c *apiCall) error(status int, message, doc string) {
	if doc == "" {
		doc = docsURL
	}
	writeJSON(c.w, status, errorBody{Message: message, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

func (c *apiCall) notFound(doc string) { c.error(http.StatusNotFound, "Not Found", doc) }

// apiRoute is one REST endpoint. pattern is relative to /api/v3/, with
// "{name}" segments captured into apiCall.params, e.g.
// "repos/{owner}/{repo}".
type apiRoute struct {
	method  string
	pattern []string
	handle  func(*apiCall)
}

// apiRoutes is the REST routing table. To add an endpoint, add a line here
// and write its handler (see api_repos.go).
var apiRoutes = []apiRoute{
	route("GET", "", getAPIRoot),
	route("GET", "rate_limit", getRateLimit),
	route("GET", "repos/{owner}/{repo}", getRepo),
	route("GET", "repositories/{id}", getRepoByID),
	route("GET", "user", getUser),
	route("GET", "user/repos", getUserRepos),
	route("GET", "user/orgs", getUserOrgs),
	route("GET", "user/memberships/orgs/{org}", getUserOrgMembership),
	route("GET", "orgs/{org}", getOrg),
	route("GET", "orgs/{org}/repos", getOrgRepos),
	route("GET", "app", getApp),
	route("GET", "app/installations", getAppInstallations),
	route("POST", "app/installations/{id}/access_tokens", refuseSuspended(postAccessToken)),
	route("GET", "app/hook/config", getAppHookConfig),
	route("PATCH", "app/hook/config", patchAppHookConfig),
	route("GET", "app/hook/deliveries", getAppHookDeliveries),
	route("GET", "app/hook/deliveries/{delivery_id}", getAppHookDelivery),
	route("POST", "app/hook/deliveries/{delivery_id}/attempts", postAppHookAttempt),
	route("GET", "orgs/{account}/installation", getAccountInstallation("Organization")),
	route("GET", "users/{account}/installation", getAccountInstallation("User")),
	route("GET", "repos/{owner}/{repo}/installation", getRepoInstallation),
	route("GET", "installation/repositories", getInstallationRepos),
	route("DELETE", "installation/token", deleteInstallationToken),
	route("POST", "repos/{owner}/{repo}/code-scanning/sarifs", postSARIF),
	route("GET", "repos/{owner}/{repo}/code-scanning/sarifs/{sarif_id}", getSARIF),
	route("GET", "repos/{owner}/{repo}/code-scanning/alerts", getCodeScanningAlerts),
}

func route(method, pattern string, h func(*apiCall)) apiRoute {
	var segs []string
	if pattern != "" {
		segs = strings.Split(pattern, "/")
	}
	return apiRoute{method: method, pattern: segs, handle: h}
}

// match reports whether segs fits the route and returns its parameters.
func (rt *apiRoute) match(segs []string) (map[string]string, bool) {
	if len(segs) != len(rt.pattern) {
		return nil, false
	}
	var params map[string]string
	for i, p := range rt.pattern {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// serveAPI authenticates, enforces the rate limit and routes. rs is the
// rate-limit state this request consumed (headers already set).
func (f *Forge) serveAPI(w http.ResponseWriter, r *http.Request, rs rateState) {
	w.Header().Set("X-GitHub-Request-Id", "FORGE:"+strconv.FormatInt(f.requestIDs.Add(1), 10))
	w.Header().Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	c := &apiCall{f: f, w: w, r: r}
	who, auth, why := f.checkAuthWhy(r)
	if auth == authBad {
		c.error(http.StatusUnauthorized, why, docsURL)
		return
	}
	c.who, c.authed = who, auth == authOK
	if rs.exceeded {
		f.writeRateLimited(w, r, API, http.StatusForbidden, rs.reset)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, apiPrefix)
	if !ok {
		if r.URL.Path != strings.TrimSuffix(apiPrefix, "/") {
			c.notFound("")
			return
		}
		rest = ""
	}
	rest = strings.TrimSuffix(rest, "/")
	var segs []string
	if rest != "" {
		segs = strings.Split(rest, "/")
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	for i := range apiRoutes {
		rt := &apiRoutes[i]
		if rt.method != method {
			continue
		}
		if params, ok := rt.match(segs); ok {
			c.params = params
			rt.handle(c)
			return
		}
	}
	c.notFound("")
}

type authResult int

const (
	authNone authResult = iota // no credentials (or no token configured)
	authOK
	authBad
)

// checkAuth looks at the Authorization header: "Bearer T", "token T" or
// Basic with the token as password (or as user name). A user's token acts as
// that user; Options.Token as an administrator who sees everything. With
// neither configured, credentials are ignored.
func (f *Forge) checkAuth(r *http.Request) (caller, authResult) {
	who, res, _ := f.checkAuthWhy(r)
	return who, res
}

// checkAuthWhy is checkAuth with the message a refusal is answered with.
// An App's JWT (Bearer) acts as the App, an installation token as its
// installation until it expires.
func (f *Forge) checkAuthWhy(r *http.Request) (caller, authResult, string) {
	if r.Header.Get("Authorization") == "" {
		return caller{}, authNone, ""
	}
	cred := credential(r)
	f.acct.mu.RLock()
	ac := f.acct.byToken[cred]
	users := len(f.acct.byToken) + len(f.acct.apps)
	f.acct.mu.RUnlock()
	switch {
	case ac != nil && cred != "":
		return caller{user: ac}, authOK, ""
	case f.opts.Token != "" && cred != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(f.opts.Token)) == 1:
		return caller{admin: true}, authOK, ""
	case f.opts.Token == "" && users == 0:
		return caller{}, authNone, ""
	case looksLikeJWT(cred):
		a, why := f.checkJWT(cred)
		if a == nil {
			return caller{}, authBad, why
		}
		return caller{app: a}, authOK, ""
	}
	if it := f.installationToken(cred); it != nil && !f.installationSuspended(it.inst) {
		return caller{inst: it.inst, tok: it}, authOK, ""
	}
	return caller{}, authBad, "Bad credentials"
}

func (f *Forge) authenticated(r *http.Request) bool {
	_, a := f.checkAuth(r)
	return a == authOK
}

type errorBody struct {
	Message          string `json:"message"`
	URL              string `json:"url,omitempty"`
	DocumentationURL string `json:"documentation_url,omitempty"`
	Status           string `json:"status,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func getAPIRoot(c *apiCall) {
	base := c.apiBase()
	c.json(http.StatusOK, map[string]string{
		"current_user_url":      base + "user",
		"rate_limit_url":        base + "rate_limit",
		"repository_url":        base + "repos/{owner}/{repo}",
		"user_repositories_url": base + "users/{user}/repos{?type,page,per_page,sort}",
	})
}

// getRateLimit serves GET /rate_limit (which does not count against it).
func getRateLimit(c *apiCall) {
	rs := c.f.rates.of(credential(c.r)).peek()
	core := map[string]int64{
		"limit":     int64(rs.limit),
		"remaining": int64(rs.remaining),
		"reset":     rs.reset.Unix(),
		"used":      int64(rs.used),
	}
	c.json(http.StatusOK, map[string]any{
		"resources": map[string]any{"core": core},
		"rate":      core,
	})
}
