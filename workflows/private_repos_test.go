package workflows_test

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/domain/ghaccount"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// Private repositories on the real stack (Temporal, PostgreSQL, the forge,
// the worker's activities): the worker reads them through the GitHub App
// installed on their organization (ghApp) or through a token configured
// for their owner (tokensFile), never through a user's token; what it
// cannot read any more is inaccessible, never deleted.

// privateOrg creates an organization with the App installed on it (every
// repository, or the named ones once they exist: see grant) and moves the
// credentials' clock past their trust in the App's last listing of its
// installations, as time would.
func privateOrg(t *testing.T) (string, forge.Installation) {
	t.Helper()
	org := owner(t)
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	inst, err := fg.InstallApp(ghApp.ID, org)
	if err != nil {
		t.Fatal(err)
	}
	appClock.Add(time.Minute)
	return org, inst
}

// privateRepo creates org/name, private, with a GitHub token committed in
// config/ci.env, and returns its first commit.
func privateRepo(t *testing.T, org, name string) (forge.Repo, string) {
	t.Helper()
	r, _ := createRepo(t, org, name, "README.md")
	sha := commitFiles(t, org, name, map[string]string{"config/ci.env": "GITHUB_TOKEN=" + ghToken + "\n"})
	if err := fg.SetPrivate(org, name, true); err != nil {
		t.Fatal(err)
	}
	return r, sha
}

// mustScanSecret checks that a collection scanned the repository and found
// the committed token.
func mustScanSecret(t *testing.T, res workflows.CollectResult) {
	t.Helper()
	if res.Scan == nil || res.Scan.Status != shard.Done {
		t.Fatalf("scan after collect: %+v", res.Scan)
	}
	for _, f := range findings(t, shard.CodebaseKey(res.CodebaseID)) {
		if f.RuleID == "github-pat" && f.Path == "config/ci.env" {
			return
		}
	}
	t.Fatalf("no github-pat finding in config/ci.env of codebase %d", res.CodebaseID)
}

// An organization's private repository is collected and scanned through
// the App's installation; the next collection proves identity with the
// token and no API request (case B); the sweep's check reads it too.
func TestPrivateRepositoryThroughApp(t *testing.T) {
	org, _ := privateOrg(t)
	_, first := privateRepo(t, org, "vault")
	res, run, err := collectRun(t, id(org, "vault"))
	if err != nil || res.Case != identity.CaseNew {
		t.Fatalf("collect: %+v, %v", res, err)
	}
	recordHistory(t, "collect-private-through-app", run.GetID(), run.GetRunID())
	if res.Commit != first {
		t.Fatalf("collected %s, want %s", res.Commit, first)
	}
	mustScanSecret(t, res)

	second := commit(t, org, "vault", "more.txt")
	apiBefore, minted, mark := apiRequestsFor(org), fg.InstallationTokensMinted(), len(fg.Requests())
	again := mustCollect(t, id(org, "vault"), identity.CaseSame)
	if again.CodebaseID != res.CodebaseID || again.Commit != second {
		t.Fatalf("second collection: %+v", again)
	}
	if n := apiRequestsFor(org) - apiBefore; n != 0 {
		t.Errorf("case B on a private repository made %d API requests naming it, want 0", n)
	}
	// The token and the listing of installations are reused: the second
	// collection asks the App's endpoints nothing.
	appCalls := 0
	for _, r := range fg.Requests()[mark:] {
		if r.Kind == forge.API && strings.HasPrefix(r.Path, "/api/v3/app/") {
			appCalls++
		}
	}
	if n := fg.InstallationTokensMinted() - minted; n != 0 || appCalls != 0 {
		t.Errorf("the second collection minted %d tokens and made %d App requests, want none", n, appCalls)
	}
	digest, err := heads.RefsDigest(context.Background(), hosts.Default()+"x") // not a clone URL: anonymous, refused
	if err == nil {
		t.Errorf("a check of a URL of no host succeeded: %q", digest)
	}
	h, _ := hosts.Lookup(hosts.Default())
	if _, err := heads.RefsDigest(context.Background(), h.CloneURL(org, "vault")); err != nil {
		t.Errorf("the sweep's check of a private repository: %v", err)
	}
}

// Renamed, transferred to another organization the App is installed on,
// deleted and re-created: private repositories resolve by id as public
// ones do (D, D, E).
func TestPrivateRepositoryIdentity(t *testing.T) {
	org, _ := privateOrg(t)
	repo, _ := privateRepo(t, org, "app")
	first := mustCollect(t, id(org, "app"), identity.CaseNew)

	if err := fg.Rename(org, "app", "service"); err != nil {
		t.Fatal(err)
	}
	renamed := mustCollect(t, id(org, "app"), identity.CaseMoved)
	if renamed.CodebaseID != first.CodebaseID || renamed.Repository != id(org, "service") {
		t.Fatalf("rename: %+v", renamed)
	}

	other, _ := privateOrg(t)
	if err := fg.Transfer(org, "service", other); err != nil {
		t.Fatal(err)
	}
	moved := mustCollect(t, id(org, "service"), identity.CaseMoved)
	if moved.CodebaseID != first.CodebaseID || moved.Repository != id(other, "service") {
		t.Fatalf("transfer: %+v", moved)
	}
	if cb := codebase(t, first.CodebaseID); cb.Owner != other || cb.ExternalID != strconv.FormatInt(repo.ID, 10) {
		t.Fatalf("codebase after the transfer: %+v", cb)
	}

	if err := fg.Delete(other, "service"); err != nil {
		t.Fatal(err)
	}
	createRepo(t, other, "service", "another.txt") // other commits: the proof by SHA fails
	if err := fg.SetPrivate(other, "service", true); err != nil {
		t.Fatal(err)
	}
	recreated := mustCollect(t, id(other, "service"), identity.CaseReplaced)
	if recreated.CodebaseID == first.CodebaseID || recreated.RetiredCodebaseID != first.CodebaseID {
		t.Fatalf("delete and re-create: %+v", recreated)
	}
}

// A public repository made private while the App reads its organization
// stays collected; one the installation no longer grants is inaccessible
// (live, kept, not stale), and readable again once it is granted again.
// An organization without the App is told so.
func TestPrivateRepositoryAccessRevokedAndRestored(t *testing.T) {
	org, inst := privateOrg(t)
	createRepo(t, org, "leaked", "a.txt")
	createRepo(t, org, "other", "a.txt")
	first := mustCollect(t, id(org, "leaked"), identity.CaseNew)
	if err := fg.SetPrivate(org, "leaked", true); err != nil {
		t.Fatal(err)
	}
	commit(t, org, "leaked", "b.txt")
	mustCollect(t, id(org, "leaked"), identity.CaseSame)

	if err := fg.SetInstallationRepos(inst.ID, "other"); err != nil {
		t.Fatal(err)
	}
	_, err := collect(t, id(org, "leaked"))
	// The site administrator's GITHUB_TOKEN sees it: private, here.
	mustFailPermanent(t, err, "is private and the GitHub App (id "+strconv.FormatInt(ghApp.ID, 10)+")")
	cb := codebase(t, first.CodebaseID)
	if cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("codebase the App no longer reads: %+v, want live and inaccessible", cb)
	}

	if err := fg.SetInstallationRepos(inst.ID, "other", "leaked"); err != nil {
		t.Fatal(err)
	}
	mustCollect(t, id(org, "leaked"), identity.CaseSame)
	if cb := codebase(t, first.CodebaseID); cb.InaccessibleSince != nil || cb.StaleSince != nil {
		t.Fatalf("granted again: %+v, want readable", cb)
	}

	// Uninstalled: anonymous again, and the message says why.
	if err := fg.Uninstall(inst.ID); err != nil {
		t.Fatal(err)
	}
	appClock.Add(time.Hour) // past the token's renewal and the listing's trust
	_, err = collect(t, id(org, "leaked"))
	mustFailPermanent(t, err, "is not installed on "+org)
	if cb := codebase(t, first.CodebaseID); cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("App uninstalled: %+v, want live and inaccessible", cb)
	}
}

// Without an App, a token configured for the owner reads its private
// repositories: collected and scanned.
func TestPrivateRepositoryThroughConfiguredToken(t *testing.T) {
	org := owner(t)
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	machine, err := fg.AddUser(org + "-bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(org, machine.Login); err != nil {
		t.Fatal(err)
	}
	privateRepo(t, org, "vault")
	_, err = collect(t, id(org, "vault"))
	mustFailPermanent(t, err, "the token file has no token for "+org)

	tokFile := filepath.Join(filepath.Dir(tokensFile), org+".token")
	if err := os.WriteFile(tokFile, []byte(machine.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appendLine(t, tokensFile, org+" "+filepath.Base(tokFile))
	res := mustCollect(t, id(org, "vault"), identity.CaseNew)
	mustScanSecret(t, res)
	assertNoCredentials(t, []string{machine.Token}, res)
}

var tokensMu sync.Mutex

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	tokensMu.Lock()
	defer tokensMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// Every installation token ends while a collection is under way (the
// forge answers the next Git request 401): the worker renews it and the
// collection goes through; and no token, nor the App's key, is anywhere a
// test can look.
func TestInstallationTokenExpiresMidCollection(t *testing.T) {
	org, _ := privateOrg(t)
	privateRepo(t, org, "vault")
	mustCollect(t, id(org, "vault"), identity.CaseNew)
	commitFiles(t, org, "vault", map[string]string{"deploy/aws.txt": "id " + awsKey + "\n"})

	minted := fg.InstallationTokensMinted()
	appClock.Add(2 * time.Minute) // a token ends early, not as soon as minted
	var once sync.Once
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, PathRE: regexp.MustCompile(`^/` + org + `/vault(\.git)?/`),
		Before: func(*http.Request) { once.Do(fg.ExpireInstallationTokens) }})
	defer remove()
	res := mustCollect(t, id(org, "vault"), identity.CaseSame)
	if res.Scan == nil || res.Scan.Receipt == nil || res.Scan.Receipt.Findings != 1 {
		t.Fatalf("collection across the expiry: %+v", res.Scan)
	}
	if fg.InstallationTokensMinted() == minted {
		t.Fatalf("no token minted after the expiry")
	}
	refused := false
	for _, r := range fg.Requests() {
		if r.Kind == forge.Git && strings.HasPrefix(r.Path, "/"+org+"/vault") && r.Status == http.StatusUnauthorized {
			refused = true
		}
	}
	if !refused {
		t.Fatalf("the forge never refused the expired token: the test did not expire it mid-collection")
	}
	key := string(ghApp.KeyPEM)
	keyBody := strings.Split(key, "\n")[5] // a line of the key's base64
	assertNoCredentials(t, append(fg.InstallationTokens(), keyBody), res)
}

// assertNoCredentials fails when a secret is in the histories of the
// collection's workflows, the worker's logs, any column of gitfleet's
// tables, a file under the mirrors (their Git config included), or the
// arguments of any process on the machine (the worker fetches in-process,
// with go-git: no git child is ever given one).
func assertNoCredentials(t *testing.T, secrets []string, res workflows.CollectResult) {
	t.Helper()
	check := func(where, text string) {
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				t.Errorf("%s holds a credential (%s…)", where, s[:4])
			}
		}
	}
	// Controls: each place searched holds the repository's owner, so the
	// search looks where the collection left its traces.
	control := res.Requested.Owner
	wid := workflows.CollectOptions(res.Requested).ID
	for _, w := range []string{wid, wid + "/identity", wid + "/scan"} {
		it := env.Client.GetWorkflowHistory(context.Background(), w, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var all strings.Builder
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				break // a child this collection did not start
			}
			all.WriteString(e.String())
		}
		check("history of "+w, all.String())
		if w == wid && !strings.Contains(all.String(), control) {
			t.Errorf("history of %s does not name %s: not the collection's", w, control)
		}
	}
	logs := workerLogs.String()
	check("worker logs", logs)
	if !strings.Contains(logs, control) {
		t.Errorf("worker logs do not name %s", control)
	}

	ctx := context.Background()
	rows, err := env.Store.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	named := 0
	for _, tb := range tables {
		var n int
		if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM "`+tb+`" t WHERE strpos(t::text, $1) > 0`, control).Scan(&n); err != nil {
			t.Fatalf("table %s: %v", tb, err)
		}
		named += n
		for _, s := range secrets {
			var n int
			if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM "`+tb+`" t WHERE strpos(t::text, $1) > 0`, s).Scan(&n); err != nil {
				t.Fatalf("table %s: %v", tb, err)
			}
			if n > 0 {
				t.Errorf("table %s: %d rows hold a credential (%s…)", tb, n, s[:4])
			}
		}
	}
	if named == 0 || len(tables) < 10 {
		t.Errorf("%d rows of %d tables name %s: not gitfleet's tables", named, len(tables), control)
	}
	files := 0
	err = filepath.WalkDir(filepath.Join(env.Dir, "mirrors"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		if fi, _ := d.Info(); fi != nil && fi.Size() > 64<<20 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // gone meanwhile
		}
		for _, s := range secrets {
			if s != "" && bytes.Contains(b, []byte(s)) {
				t.Errorf("mirror file %s holds a credential (%s…)", p, s[:4])
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("mirrors: %d files, %v", files, err)
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	if len(cmdlines) == 0 {
		t.Fatal("no process arguments to look at (/proc)")
	}
	for _, p := range cmdlines {
		if b, err := os.ReadFile(p); err == nil {
			check("process arguments "+p, string(b))
		}
	}
}

// collect --org ORG --user NAME lists through the user's cache and
// collects through the App: the private repositories the installation was
// granted are collected and scanned; the one it was not is reported as
// such (not found to the App), where the user's own token would have read
// it — users' tokens never clone.
func TestCollectOrgPrivateThroughApp(t *testing.T) {
	ctx := context.Background()
	org, inst := privateOrg(t)
	u := addGitHubUser(t, org+"-admin")
	if err := fg.AddMember(org, u.gh.Login); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"api", "web", "hidden"} {
		privateRepo(t, org, n)
	}
	if err := fg.SetInstallationRepos(inst.ID, "api", "web"); err != nil {
		t.Fatal(err)
	}
	// The user sees all three (a member): the cache lists them.
	if l, err := ghCache().Repos(ctx, u.Name, ghaccount.Filter{Org: org}, false); err != nil || len(l.Repos) != 3 {
		t.Fatalf("cache: %d repositories, %v", len(l.Repos), err)
	}
	run, err := env.Client.ExecuteWorkflow(ctx, orgOptions(u.Name, org), workflows.CollectOrg,
		workflows.CollectOrgInput{UserID: u.ID, Org: org, Window: 5})
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.CollectOrgProgress
	if err := run.Get(ctxTimeout(t, 2*time.Minute), &p); err != nil || !p.Done || p.Listed != 3 || p.Started != 3 {
		t.Fatalf("CollectOrg: %+v, %v", p, err)
	}
	for _, n := range []string{"api", "web"} {
		var res workflows.CollectResult
		if err := env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(id(org, n)), "").Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
			t.Fatalf("collect %s: %v", n, err)
		}
		mustScanSecret(t, res)
	}
	err = env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(id(org, "hidden")), "").Get(ctxTimeout(t, 2*time.Minute), nil)
	mustFailPermanent(t, err, "not granted to the GitHub App")
}

// A snapshot of a private repository's commit: the repository's worker
// builds it from the mirror its collection fetched through the App.
func TestBuildOfAPrivateRepository(t *testing.T) {
	reg := startRegistry(t, ociregistry.Options{})
	builder := startRunner(t, "build-private", runnerOpts{registry: reg.Addr() + "/gitfleet"})
	org, _ := privateOrg(t)
	startOwnerWorker(t, org+"-w", reg.Addr()+"/gitfleet")
	privateRepo(t, org, "vault")
	res := mustCollect(t, id(org, "vault"), identity.CaseNew)
	cb := codebase(t, res.CodebaseID)
	appClock.Add(2 * time.Minute)
	fg.ExpireInstallationTokens() // the build renews the token too
	name := snapName("private")
	out, err := propagate(t, snapshot.Snapshot{Name: name, Kind: snapshot.KindRepo, Repo: cb.Repo().String(), CodebaseID: cb.ID,
		ExternalID: cb.ExternalID, Commit: res.Commit}, fast)
	if err != nil {
		t.Fatalf("build of a private repository: %v", err)
	}
	requireReady(t, name, out.Digest, builder)
}

// The sweep's change check reads private repositories through the App as
// collections do: the one pushed to since its collection is collected
// again, the other is unchanged, and neither check fails.
func TestSweepKeepsPrivateRepositoriesFresh(t *testing.T) {
	now := sweepClock()
	org, _ := privateOrg(t)
	ids := map[string]int64{}
	for _, n := range []string{"pushed", "quiet"} {
		privateRepo(t, org, n)
		res := mustCollect(t, id(org, n), identity.CaseNew)
		ids[n] = res.CodebaseID
		if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET last_viewed_at = $2,
			last_completed_at = $3 WHERE id = $1`, res.CodebaseID, now.Add(-day), now.Add(-7*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, org, "pushed", "b.txt")
	before := time.Now()
	res := runSweep(t, workflows.RecollectionSweepInput{Now: now})
	if res.Due != 2 || res.Started != 1 || res.Unchanged != 1 || res.Failed != 0 || res.Halted {
		t.Fatalf("sweep = %+v, want 2 due, 1 started, 1 unchanged, no failure", res)
	}
	waitCompleted(t, ids["pushed"], before)
	if collectedSince(t, ids["quiet"], before) {
		t.Errorf("the unchanged private repository was collected again")
	}
}

// Force-pushed, then deleted (proven gone: the installation was granted
// every repository of the organization, so its 404 for the id is proof),
// then back: a private repository goes through F, stale and R as a public
// one does.
func TestPrivateRepositoryForcePushGoneAndBack(t *testing.T) {
	org, _ := privateOrg(t)
	repo, _ := privateRepo(t, org, "app")
	first := mustCollect(t, id(org, "app"), identity.CaseNew)
	if _, err := fg.ForcePush(org, "app", "main", map[string]string{"rewritten.txt": "history rewritten\n"}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	if fp := mustCollect(t, id(org, "app"), identity.CaseForcePush); fp.CodebaseID != first.CodebaseID {
		t.Fatalf("force push: %+v", fp)
	}
	restore := deleteByFaults(t, org, "app", repo.ID)
	_, err := collect(t, id(org, "app"))
	mustFailPermanent(t, err, "no longer exists since")
	if cb := codebase(t, first.CodebaseID); cb.StaleSince == nil {
		t.Fatalf("deleted, proven by the installation: %+v, want stale", cb)
	}
	restore()
	if back := mustCollect(t, id(org, "app"), identity.CaseReturned); back.CodebaseID != first.CodebaseID {
		t.Fatalf("back: %+v", back)
	}
}

// A private repository transferred to an account gitfleet cannot read is
// inaccessible, never stale: the 404 by id of the old owner's installation
// (granted every repository of it) or of a member's token (the token
// file's) proves nothing, as the repository may have gone anywhere. The
// test worker's GITHUB_TOKEN, a site administrator's, finds it where it
// went and the failure says so. (Before, the installation's or the
// member's 404 was taken as proof of deletion: the codebase went stale and
// the daily cleanup deleted it with its findings 30 days later.)
func TestPrivateRepositoryTransferredOutOfSightIsKept(t *testing.T) {
	// Through the App.
	org, _ := privateOrg(t)
	privateRepo(t, org, "vault")
	first := mustCollect(t, id(org, "vault"), identity.CaseNew)
	away := owner(t)
	if err := fg.CreateOrg(away); err != nil {
		t.Fatal(err)
	}
	if err := fg.Transfer(org, "vault", away); err != nil {
		t.Fatal(err)
	}
	_, err := collect(t, id(org, "vault"))
	mustFailPermanent(t, err, "is now "+id(away, "vault").String()+", private")
	if cb := codebase(t, first.CodebaseID); cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("transferred out of the App's sight: %+v, want live and inaccessible", cb)
	}

	// Through a member's token in the token file.
	team := owner(t)
	if err := fg.CreateOrg(team); err != nil {
		t.Fatal(err)
	}
	machine, err := fg.AddUser(team + "-bot")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(team, machine.Login); err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(filepath.Dir(tokensFile), team+".token")
	if err := os.WriteFile(tokFile, []byte(machine.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appendLine(t, tokensFile, team+" "+filepath.Base(tokFile))
	privateRepo(t, team, "keys")
	second := mustCollect(t, id(team, "keys"), identity.CaseNew)
	if err := fg.Transfer(team, "keys", away); err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, id(team, "keys"))
	mustFailPermanent(t, err, "is now "+id(away, "keys").String()+", private")
	if cb := codebase(t, second.CodebaseID); cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("transferred out of the member's sight: %+v, want live and inaccessible", cb)
	}
}

// A worker whose GITHUB_TOKEN is a member's, not a site administrator's,
// reads an organization through the App: a private repository transferred
// where neither sees it is inaccessible (kept), and the failure says that
// only a site administrator's token proves a deletion. (Before: stale.)
func TestTransferOutOfSightWithoutSiteAdministrator(t *testing.T) {
	org, _ := privateOrg(t)
	member, err := fg.AddUser(org + "-member")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.AddMember(org, member.Login); err != nil {
		t.Fatal(err)
	}
	queue := appWorker(t, "member-token", member.Token)
	privateRepo(t, org, "vault")
	// Collected (and scanned) by the tests' worker; the member's worker
	// collects it next, on its own queue.
	first := mustCollect(t, id(org, "vault"), identity.CaseNew)
	collectOn := func() error {
		o := workflows.CollectOptions(id(org, "vault"))
		o.TaskQueue = queue
		run, err := env.Client.ExecuteWorkflow(context.Background(), o, workflows.Collect, workflows.CollectInput{Repo: id(org, "vault"), Trigger: "sweep"})
		if err != nil {
			t.Fatal(err)
		}
		return run.Get(ctxTimeout(t, 2*time.Minute), nil)
	}
	away := owner(t)
	if err := fg.CreateOrg(away); err != nil {
		t.Fatal(err)
	}
	if err := fg.Transfer(org, "vault", away); err != nil {
		t.Fatal(err)
	}
	app := mustFailPermanent(t, collectOn(), "can no longer be read")
	if !strings.Contains(app.Error(), "only a site administrator's GITHUB_TOKEN proves a deletion") {
		t.Errorf("the failure does not say what would prove a deletion: %v", app)
	}
	if cb := codebase(t, first.CodebaseID); cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("transferred where neither the App nor a member sees it: %+v, want live and inaccessible", cb)
	}
}

// appWorker runs collections on a task queue of its own, reading private
// repositories through the tests' App and token file (creds), with token
// as its GITHUB_TOKEN.
func appWorker(t *testing.T, name, token string) string {
	t.Helper()
	queue := "gitfleet-" + name
	hs, err := vcs.NewHosts(vcs.Host{Name: fg.Host(), GitURL: fg.URL(), APIURL: fg.APIURL(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := mirror.New(filepath.Join(env.Dir, "mirrors-"+name), nil)
	if err != nil {
		t.Fatal(err)
	}
	mirrors.SetCredentials(creds)
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivity(&activities.Activities{Store: env.Store, Mirrors: mirrors, Hosts: hs, Creds: creds})
	}, workflows.GitTaskQueue(queue))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return queue
}

// An installation token that ends just before an identity lookup (the
// API answers it 401) is renewed for the lookup as for Git requests: the
// collection goes through. (Before, the lookup failed "401 Bad
// credentials" and so did the collection.)
func TestInstallationTokenRefusedByTheAPIIsRenewed(t *testing.T) {
	org, _ := privateOrg(t)
	privateRepo(t, org, "vault")
	var once sync.Once
	path := regexp.MustCompile(`^/api/v3/repos/` + org + `/vault$`)
	remove := fg.AddFault(forge.Fault{Kind: forge.API, PathRE: path,
		Before: func(*http.Request) { once.Do(fg.ExpireInstallationTokens) }})
	defer remove()
	minted := fg.InstallationTokensMinted()
	mustCollect(t, id(org, "vault"), identity.CaseNew)
	refused := false
	for _, r := range fg.Requests() {
		if r.Kind == forge.API && path.MatchString(r.Path) && r.Status == http.StatusUnauthorized {
			refused = true
		}
	}
	if !refused {
		t.Fatal("the API never refused the expired token: the test did not expire it before the lookup")
	}
	if fg.InstallationTokensMinted()-minted < 2 {
		t.Errorf("%d tokens minted, want the first and its renewal", fg.InstallationTokensMinted()-minted)
	}
}

// Right after the App is uninstalled the next collection is explained:
// its refused token is dropped at once, the owner read anonymously, and
// the explanation names the missing installation and keeps the codebase
// inaccessible. (Before, a token less than a minute old was kept: the
// explanation lookup reused it, and for that minute collections failed
// "authentication required", nothing recorded on the codebase.)
func TestUninstallIsExplainedAtOnce(t *testing.T) {
	org, inst := privateOrg(t)
	privateRepo(t, org, "vault")
	first := mustCollect(t, id(org, "vault"), identity.CaseNew)
	if err := fg.Uninstall(inst.ID); err != nil {
		t.Fatal(err)
	}
	_, err := collect(t, id(org, "vault"))
	mustFailPermanent(t, err, "is not installed on "+org)
	if cb := codebase(t, first.CodebaseID); cb.StaleSince != nil || cb.InaccessibleSince == nil {
		t.Fatalf("collected right after the uninstall: %+v, want live and inaccessible", cb)
	}
}
