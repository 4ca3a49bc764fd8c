// Package forge is a GitHub-compatible test forge: an HTTP server that
// serves real bare Git repositories over smart HTTP together with the parts
// of the GitHub REST API that gitfleet uses, reproducing GitHub's behaviour
// where gitfleet depends on it. Integration tests and the offline demo run
// gitfleet against it instead of github.com or a GitHub Enterprise Server.
//
// # Layout
//
// Like GitHub Enterprise Server, everything lives on one origin (URL):
//
//   - /{owner}/{name}.git/... and /{owner}/{name}/... serve git smart HTTP
//     (upload-pack only: clone and fetch) by running `git http-backend` as a
//     CGI program over bare repositories kept on disk under Options.Dir as
//     repos/<id>.git, so renames never move directories.
//   - /api/v3/... serves the REST API: GET /repos/{owner}/{repo},
//     GET /repositories/{id}, GET /rate_limit, GET /api/v3/, and the
//     account endpoints GET /user, /user/repos, /user/orgs, /orgs/{org} and
//     /orgs/{org}/repos (api_accounts.go; users and organizations in
//     accounts.go).
//     Routes are listed in one table (apiRoutes in api.go); repository
//     endpoints live in api_repos.go and share its redirect and visibility
//     handling (apiCall.resolveRepo).
//
// The code is split by concern: forge.go (options, lifecycle, the entry
// handler), registry.go (names, ids, redirects, owners), gitops.go (commits
// and imports through git plumbing), githttp.go (smart HTTP through
// git http-backend), api.go and api_repos.go (REST), ratelimit.go, faults.go
// and stats.go (counters and the request log).
//
// Repositories are created and changed only through the Go API (CreateRepo,
// Commit, ForcePush, Import, Rename, Transfer, SetPrivate, SetDefaultBranch,
// Delete); pushing over HTTP is refused. Commits are written with git
// plumbing (a temporary index, hash-object, update-index, write-tree,
// commit-tree, update-ref) by a fixed identity with dates derived from a
// per-repository counter, so the same operations give the same commit ids.
// In Commit's files map, the value DeleteFile removes a path and "" writes an
// empty file; a new branch starts from the default branch.
//
// # GitHub behaviour reproduced
//
//   - Names: owners are 1–39 letters, digits and single inner hyphens;
//     repository names are 1–100 of [A-Za-z0-9._-], not "." or "..". Names
//     are matched case-insensitively and answered in their canonical case.
//   - Ids: repositories get monotonic ids (from 1000) that survive renames
//     and transfers; a repository re-created under a deleted one's name gets
//     a new id.
//   - Renames and transfers leave redirects from the old name (chains
//     collapse, since a redirect points at the id): the API answers
//     301 Moved Permanently with Location /api/v3/repositories/{id} and a
//     {"message":"Moved Permanently","url":...} body, which go-github
//     follows; git requests get a 301 to the same path under the new name,
//     which git and go-git follow for the initial /info/refs request. A new
//     repository created at an old name replaces the redirect; deleting a
//     repository drops the redirects to it.
//   - Private repositories are invisible (API 404 {"message":"Not Found"})
//     unless the request carries Options.Token (when no token is configured,
//     credentials are ignored and nobody sees private repositories): API "Authorization: Bearer
//     <token>" or "token <token>", git Basic auth with the token as password
//     (any user name). A wrong token gets 401 "Bad credentials" from the
//     API. Git, like GitHub, answers anonymous requests for unknown or
//     hidden repositories with 401 and a Basic challenge (so clients ask for
//     credentials) and authenticated ones with 404.
//   - Fetching a commit by id works when it is reachable from a ref
//     (uploadpack.allowReachableSHA1InWant); an unknown or unreachable id
//     fails with git's "not our ref <sha>". ForcePush prunes the objects it
//     made unreachable, so this holds for protocol v2 clients too.
//   - Users (AddUser, RotateToken) have tokens of their own that act as
//     them, in the API and over git; Options.Token stays an administrator
//     that sees everything. Organizations (CreateOrg) have members
//     (AddMember, RemoveMember) who see its private repositories, unless
//     SetRepoAccess restricts one to named users (collaborators). What a
//     user does not see answers 404 everywhere.
//   - GitHub Apps (apps.go: CreateApp, InstallApp, SetInstallationRepos,
//     Uninstall): an App authenticates with a JWT signed by its RSA key
//     (RS256, iss its id, exp at most 10 minutes after iat, checked on
//     Options.Now), finds its installations (GET /app/installations,
//     /orgs/{org}/installation, /users/{user}/installation,
//     /repos/{owner}/{repo}/installation) and mints installation access
//     tokens (POST /app/installations/{id}/access_tokens) that last
//     Options.TokenLifetime (an hour). A token sees public repositories and
//     those of its installation's account it was granted (all or a
//     selection, changed live), in the API and over git, narrowed to the
//     repositories and permissions its request asked for (each at most
//     the App's, SetAppPermissions: 422 beyond; without "contents" it
//     clones no private repository); OverGrant makes the forge grant more
//     than asked, InstallationTokenGrant reports what a token got, DELETE
//     /installation/token revokes one; once expired
//     (ExpireInstallationTokens ends them all) it gets 401 "Bad
//     credentials"; GET /user answers it 403 "Resource not accessible by
//     integration".
//   - Lists paginate as GitHub does: per_page (default 30, at most 100) and
//     page, with a Link header (next, last, first, prev; absolute URLs that
//     keep the other parameters). /user/repos takes type, affiliation,
//     visibility, sort (full_name by default) and direction;
//     /orgs/{org}/repos takes type and sort (created by default).
//   - Account responses carry a strong ETag (a digest of the body),
//     Last-Modified and Vary; If-None-Match (or, without it,
//     If-Modified-Since) that matches answers 304 with no body, and a 304
//     costs no rate-limit quota, as on GitHub.
//   - Primary rate limits are per credential (each token its own window;
//     anonymous requests share one, where GitHub counts per client IP);
//     RateRemaining(token) reports one.
//   - Every API response carries X-RateLimit-Limit/-Remaining/-Reset/-Used
//     and X-RateLimit-Resource: core, counting down from Options.RateLimit
//     per one-hour window; once it is used up the API answers with GitHub's
//     primary rate-limit 403 until the window resets (see ResetRateLimit).
//
// # Test hooks
//
// Requests are counted per kind (APIRequests, GitRequests, ResetCounts) and
// the most recent ones are logged (Requests). Faults (AddFault) inject
// latency, forced statuses, GitHub's primary and secondary rate-limit
// responses, or a hook run before serving, for matching requests (the zero
// Kind is Any, so a Fault with only Status set hits everything); go-github
// turns the rate-limit ones into *github.RateLimitError and
// *github.AbuseRateLimitError.
//
// All methods are safe for concurrent use. Repository mutations hold locks;
// git serving holds none while the git child runs, so a clone in flight
// never blocks a rename (and may see it).
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package forge
