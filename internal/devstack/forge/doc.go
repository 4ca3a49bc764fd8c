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
//     The App endpoints (apps.go) and the App webhook's deliveries
//     (api_hooks.go) are there too, and code scanning (codescanning.go:
//     SARIF uploads, their processing status, the alerts they make).
//     Routes are listed in one table (apiRoutes in api.go); repository
//     endpoints live in api_repos.go and share its redirect and visibility
//     handling (apiCall.resolveRepo).
//
// The code is split by concern: forge.go (options, lifecycle, the entry
// handler), registry.go (names, ids, redirects, owners), gitops.go (commits
// and imports through git plumbing), githttp.go (smart HTTP through
// git http-backend), api.go and api_repos.go (REST), ratelimit.go, faults.go
// and stats.go (counters and the request log), webhooks.go (App webhooks:
// events, queue, delivery record), refs.go (branch and tag deletion, tags).
//
// Repositories are created and changed only through the Go API (CreateRepo,
// Commit, ForcePush, DeleteBranch, CreateTag, DeleteTag, Import, Rename,
// Transfer, SetPrivate, SetArchived, SetDefaultBranch, Delete); pushing over
// HTTP is refused. Commits are written with git
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
//   - App webhooks (webhooks.go, api_hooks.go): SetAppWebhook gives an
//     App its one webhook (URL and secret). The App is sent the events of
//     the repositories one of its installations covers (not suspended) and
//     those of its installations: push (ref, before, after, created,
//     deleted, forced, commits, head_commit, the repository with GitHub's
//     Unix-seconds created_at/pushed_at, pusher, sender, installation)
//     from Commit, ForcePush, DeleteBranch, CreateTag, DeleteTag and
//     Import (one per ref it changed; commits holds the head commit only);
//     create and delete (ref_type branch or tag) when a ref appears or
//     goes; repository created (CreateRepo, where an installation has
//     every repository of the account), renamed
//     (changes.repository.name.from),
//     transferred (changes.owner.from; sent to the new account's
//     installation, else the old one's), deleted, privatized, publicized,
//     archived, unarchived (only on a real change) and edited (default
//     branch); installation_repositories added/removed
//     (SetInstallationRepos); installation created, deleted, suspend and
//     unsuspend (InstallApp, Uninstall, SuspendInstallation, which also
//     makes its tokens answer 401 and refuses new ones with 403).
//     go-github's ParseWebHook reads every payload. Delivery is
//     asynchronous, in order per repository (per installation for
//     installation events) and concurrent across them: a POST with
//     Content-Type application/json, X-GitHub-Event, X-GitHub-Delivery (a
//     GUID), X-GitHub-Hook-ID, X-GitHub-Hook-Installation-Target-Type
//     integration and -Target-ID (the App's id), X-Hub-Signature-256
//     (HMAC-SHA256 of the body with the secret) and X-Hub-Signature
//     (SHA-1), none without a secret, User-Agent GitHub-Hookshot/…; 10 s
//     timeout, redirects not followed, no automatic retry. Every attempt
//     is recorded: status "OK" (2xx), "Invalid HTTP Response: <code>",
//     "failed to connect to host" or "timed out" (status_code 0). With the
//     App's JWT, GET and PATCH /app/hook/config (url, secret; the secret
//     reads "********"), GET /app/hook/deliveries (newest first,
//     per_page, cursor pagination with a Link rel="next",
//     status=success|failure), GET /app/hook/deliveries/{id} (with the
//     request's headers and payload and the response's headers and body)
//     and POST /app/hook/deliveries/{id}/attempts (202 {}; the same GUID
//     and payload sent again, signed with the current secret, redelivery
//     true, recorded as a new delivery) serve the deliveries of the last
//     three days by Options.Now; older ones are gone (404), as GitHub
//     keeps three days. A closed forge sends nothing more.
//     GitHub promises no order at all: the forge's per-repository order
//     is for deterministic tests, not something a receiver may rely on.
//     Not reproduced: per-event subscriptions (every event is sent), the
//     ping event, repository and organization webhooks, the 25 MB payload
//     cap, a push's commits beyond its head commit, an acting user (sender
//     is the repository's or the installation's account), suspended_at in
//     GET /app/installations, throttling (throttled_at is always null),
//     and GitHub's exact answer to an expired delivery (404 here).
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
// Webhook deliveries are observable without sleeping: WaitHooks(ctx)
// returns once none is queued or in flight, HookDeliveries is a snapshot
// of every attempt (oldest first, retention aside) and HookCounts counts
// them (queued, delivered, failed, redelivered, dropped, in flight).
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
