package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitfleet/internal/infra/secrets"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"gitfleet/workflows"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/vcs"
)

var (
	env *testenv.Env
	fg  *forge.Forge
	// buildRegistry receives the worker's snapshot builds.
	buildRegistry *ociregistry.Registry
	vars          map[string]string
	// ghApp is the forge's GitHub App the worker reads private
	// repositories with; appKeyFile holds its key. The starter's own
	// configuration names it only in the tests that set it.
	ghApp      forge.App
	appKeyFile string
	// appClock is the clock of the forge's App and the worker's
	// credentials: a test that installs the App moves it past the
	// credentials' trust in their last listing of installations.
	appOffset atomic.Int64
)

// scanSlots bound the blobs the worker's scans read at once (as many as
// it has processors, as without them); a test holding them all stops
// every scan before it reads a blob, while the walk goes on.
var scanSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

func appNow() time.Time { return time.Now().Add(time.Duration(appOffset.Load())) }

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		var err error
		if fg, err = forge.Start(forge.Options{Dir: filepath.Join(e.Dir, "forge"), Now: appNow}); err != nil {
			return nil, err
		}
		// The registry the worker pushes snapshot builds to, as
		// GITFLEET_REGISTRY names one for 'starter dev''s worker.
		if buildRegistry, err = ociregistry.Start(ociregistry.Options{}); err != nil {
			return nil, err
		}
		vars = map[string]string{
			config.EnvTemporalAddress: e.Temporal.Address(),
			config.EnvDatabaseURL:     e.DatabaseURL,
			config.EnvTemporalUI:      "http://ui.test",
			vcs.EnvAPIURL:             fg.APIURL(),
			config.EnvTokenKey:        secrets.NewKey(),
		}
		cfg, err := config.Load(getenv)
		if err != nil {
			return nil, err
		}
		mirrors, err := mirror.New(filepath.Join(e.Dir, "mirrors"), nil)
		if err != nil {
			return nil, err
		}
		if ghApp, err = fg.CreateApp("gitfleet"); err != nil {
			return nil, err
		}
		appKeyFile = filepath.Join(e.Dir, "app.pem")
		if err := os.WriteFile(appKeyFile, ghApp.KeyPEM, 0o600); err != nil {
			return nil, err
		}
		appHosts, err := vcs.HostsFromEnv(func(k string) string {
			return map[string]string{vcs.EnvAPIURL: fg.APIURL(), vcs.EnvAppID: strconv.FormatInt(ghApp.ID, 10), vcs.EnvAppKeyFile: appKeyFile}[k]
		})
		if err != nil {
			return nil, err
		}
		creds, err := gitcreds.FromHosts(appHosts, gitcreds.AppOptions{Now: appNow})
		if err != nil {
			return nil, err
		}
		mirrors.SetCredentials(creds)
		scanner, err := activities.NewScanner("", testenv.FindingKey)
		if err != nil {
			return nil, err
		}
		if err := workflows.EnsureSearchAttributes(context.Background(), e.Client, e.Namespace); err != nil {
			return nil, err
		}
		stop, err := e.StartWorker(workflows.TaskQueue, func(w worker.Registry) {
			workflows.Register(w)
			w.RegisterActivity(&activities.Activities{Store: e.Store, Mirrors: mirrors, Hosts: cfg.Hosts, Log: e.Log})
			w.RegisterActivity(&activities.Cleanup{Store: e.Store, Log: e.Log})
			w.RegisterActivity(&activities.Shards{Store: e.Store, Mirrors: mirrors, Scanner: scanner, Log: e.Log,
				UnreachableWaits: unreachableWaits, ScanSlots: scanSlots})
			w.RegisterActivity(&activities.GitHub{Store: e.Store, Box: cfg.TokenBox, Hosts: cfg.Hosts, Log: e.Log})
			w.RegisterActivity(&activities.Sweeps{Store: e.Store, Client: e.Client, Hosts: cfg.Hosts, Log: e.Log}) // collect --org starts Collects
			w.RegisterActivity(&activities.Snapshots{Store: e.Store, Client: e.Client, Log: e.Log})
			w.RegisterActivity(setUpValidity(e.Store, mirrors, scanner, e.Log))
			w.RegisterActivity(&activities.Builds{Worker: "starter-test", Mirrors: mirrors, Hosts: cfg.Hosts,
				Registry: buildRegistry.Addr() + "/gitfleet", Log: e.Log})
		}, workflows.GitTaskQueue(workflows.TaskQueue))
		if err != nil {
			return nil, err
		}
		return func() { stop(); fg.Close(); buildRegistry.Close() }, nil
	}))
}

func getenv(k string) string { return vars[k] }

// starter runs the command line in-process and returns its output and exit code.
func starter(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return starterIn(t, "", args...)
}

// starterIn is starter with standard input.
func starterIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut, getenv)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(&errOut, "starter:", errorLine(err, args))
	}
	return out.String(), errOut.String(), exitCode(err)
}

var seq atomic.Int64

func newRepo(t *testing.T) (owner string, head string) {
	t.Helper()
	owner = fmt.Sprintf("cli%d-%d", time.Now().Unix()%100000, seq.Add(1))
	if _, err := fg.CreateRepo(owner, "app"); err != nil {
		t.Fatal(err)
	}
	head, err := fg.Commit(owner, "app", "main", map[string]string{"README.md": "hi\n"}, "init")
	if err != nil {
		t.Fatal(err)
	}
	return owner, head
}

func TestCollectPrintsTheOutcome(t *testing.T) {
	o, head := newRepo(t)
	repo := fg.Host() + "/" + o + "/app"
	out, errOut, code := starter(t, "collect", repo)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	wid := workflows.CollectWorkflowID(mustParse(t, repo))
	for _, want := range []string{"case      A (new repository)", "codebase  ", head + " (main)", "workflow  " + wid,
		"http://ui.test/namespaces/default/workflows/collect:" + strings.ReplaceAll(strings.ToLower(repo), "/", "%2F")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// owner/name on the default host, JSON output, and a re-collection (B).
	out, errOut, code = starter(t, "collect", "--json", o+"/app")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var outcomes []collectOutcome
	if err := json.Unmarshal([]byte(out), &outcomes); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out)
	}
	if len(outcomes) != 1 || outcomes[0].Result == nil || outcomes[0].Result.Case != "B" || outcomes[0].Result.Commit != head {
		t.Fatalf("JSON outcome = %+v", outcomes)
	}
}

func TestCollectNoWait(t *testing.T) {
	o, _ := newRepo(t)
	out, errOut, code := starter(t, "collect", "--no-wait", o+"/app")
	if code != 0 || !strings.Contains(out, "workflow  collect:") || strings.Contains(out, "case") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	run := env.Client.GetWorkflow(context.Background(), workflows.CollectWorkflowID(mustParse(t, o+"/app")), "")
	var res workflows.CollectResult
	if err := run.Get(context.Background(), &res); err != nil || res.Case != "A" {
		t.Fatalf("the started collection: %+v, %v", res, err)
	}
}

func TestCollectRejectsBadInputBeforeStarting(t *testing.T) {
	o, _ := newRepo(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"malformed", []string{"collect", "not a repo"}, "invalid repository"},
		{"path trick", []string{"collect", fg.Host() + "/../app"}, "path trick"},
		{"credentials", []string{"collect", "https://user:hunter2@" + fg.Host() + "/" + o + "/app"}, "credentials"},
		{"unknown host", []string{"collect", "gitlab.example.com/" + o + "/app"}, "unknown host"},
		{"over-long", []string{"collect", o + "/" + strings.Repeat("x", 101)}, "limit 100"},
		{"one bad among good", []string{"collect", o + "/app", "bad//name"}, "invalid repository"},
		{"no argument", []string{"collect"}, "requires at least 1 arg"},
		{"unknown flag", []string{"collect", "--frobnicate", o + "/app"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := starter(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr lacks %q: %s", tt.want, errOut)
			}
			if strings.Contains(out+errOut, "hunter2") {
				t.Errorf("a credential was echoed: %s%s", out, errOut)
			}
			if strings.Contains(out, "Collecting") {
				t.Errorf("a workflow was started: %s", out)
			}
		})
	}
	// Nothing was started for the good name either.
	if _, err := env.Client.DescribeWorkflowExecution(context.Background(), workflows.CollectWorkflowID(mustParse(t, o+"/app")), ""); err == nil {
		t.Error("a collection was started although the request held a bad name")
	}
}

func TestCollectFailureExitsNonZero(t *testing.T) {
	o, _ := newRepo(t)
	if err := fg.SetPrivate(o, "app", true); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := starter(t, "collect", o+"/app")
	if code != exitFailed || !strings.Contains(out, "FAILED") || !strings.Contains(out, "Permanent") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestShowRecordsAViewAndTellsStaleRepositories(t *testing.T) {
	o, head := newRepo(t)
	if _, _, code := starter(t, "collect", o+"/app"); code != 0 {
		t.Fatal("collect failed")
	}
	out, errOut, code := starter(t, "show", o+"/app")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{o + "/app", "status          live", "last commit     " + head, "History (newest first)", "succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	cb, err := env.Store.FindCodebase(context.Background(), mustParse(t, o+"/app"))
	if err != nil || cb == nil || cb.LastViewedAt == nil {
		t.Fatalf("show did not record a view: %+v, %v", cb, err)
	}

	if err := env.Store.MarkStale(context.Background(), cb.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	out, _, _ = starter(t, "show", o+"/app")
	if !strings.Contains(out, "repository no longer exists") {
		t.Errorf("show of a stale codebase:\n%s", out)
	}
	out, _, _ = starter(t, "show", "--json", o+"/app")
	if !strings.Contains(out, `"status": "repository no longer exists"`) {
		t.Errorf("show --json of a stale codebase:\n%s", out)
	}

	_, errOut, code = starter(t, "show", o+"/never-collected")
	if code != exitUsage || !strings.Contains(errOut, "has not been collected") {
		t.Errorf("show of an unknown repository: exit %d, %s", code, errOut)
	}
}

func TestShowByAnOldNameAfterARename(t *testing.T) {
	o, _ := newRepo(t)
	if _, _, code := starter(t, "collect", o+"/app"); code != 0 {
		t.Fatal("collect failed")
	}
	if err := fg.Rename(o, "app", "renamed"); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := starter(t, "collect", o+"/renamed"); code != 0 || !strings.Contains(out, "case      D") {
		t.Fatalf("collect after rename: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := starter(t, "show", o+"/app")
	if code != 0 {
		t.Fatalf("show by the old name: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{o + "/app was renamed or transferred: it is now " + fg.Host() + "/" + o + "/renamed",
		"status          live", "formerly        " + fg.Host() + "/" + o + "/app"} {
		if !strings.Contains(out, want) {
			t.Errorf("show by the old name lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = starter(t, "show", "--json", o+"/app")
	if !strings.Contains(out, `"renamedFrom": "`+fg.Host()+"/"+o+`/app"`) {
		t.Errorf("show --json by the old name:\n%s", out)
	}
}

// Without a GITHUB_TOKEN (this worker has none) the API cannot tell a
// deleted repository from a private one: the codebase is inaccessible, not
// stale, show says so, and stale-cleanup leaves it. (Before, it was stale,
// and deleted with its findings 30 days later.)
func TestDeletedRepositoryWithoutATokenIsInaccessibleAndShowSaysSo(t *testing.T) {
	o, _ := newRepo(t)
	if _, _, code := starter(t, "collect", o+"/app"); code != 0 {
		t.Fatal("collect failed")
	}
	if err := fg.Delete(o, "app"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := starter(t, "collect", o+"/app")
	if code != exitFailed || !strings.Contains(out, "can no longer be read") || !strings.Contains(out, "the worker has no GITHUB_TOKEN") {
		t.Fatalf("collect of a deleted repository: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = starter(t, "show", o+"/app")
	if !strings.Contains(out, "inaccessible since") || !strings.Contains(out, "never deleted automatically") {
		t.Errorf("show of an inaccessible repository:\n%s", out)
	}
	out, _, _ = starter(t, "show", "--json", o+"/app")
	if !strings.Contains(out, `"status": "inaccessible"`) || !strings.Contains(out, `"inaccessibleSince"`) {
		t.Errorf("show --json of an inaccessible repository:\n%s", out)
	}
	cb, _ := env.Store.FindCodebase(context.Background(), mustParse(t, o+"/app"))
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET inaccessible_since = now() - interval '40 days'
		WHERE id = $1`, cb.ID); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := starter(t, "cleanup-stale"); code != 0 {
		t.Fatalf("cleanup-stale: exit %d\n%s%s", code, out, errOut)
	}
	if kept, _ := env.Store.CodebaseByID(context.Background(), cb.ID); kept == nil || kept.StaleSince != nil {
		t.Fatalf("cleanup-stale removed an inaccessible codebase: %+v", kept)
	}
}

func TestCollectUnknownRepositorySaysNotFound(t *testing.T) {
	o, _ := newRepo(t)
	out, errOut, code := starter(t, "collect", o+"/no-such-repo")
	if code != exitFailed || !strings.Contains(out, "not found (or private: set GITHUB_TOKEN)") || strings.Contains(out, "authentication required") {
		t.Fatalf("collect of an unknown repository: exit %d\n%s%s", code, out, errOut)
	}
}

func TestMigrateAndCleanup(t *testing.T) {
	out, errOut, code := starter(t, "migrate")
	if code != 0 || !strings.Contains(out, "schema is at version") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	o, _ := newRepo(t)
	if _, _, code := starter(t, "collect", o+"/app"); code != 0 {
		t.Fatal("collect failed")
	}
	cb, _ := env.Store.FindCodebase(context.Background(), mustParse(t, o+"/app"))
	if err := env.Store.MarkStale(context.Background(), cb.ID, time.Now().Add(-40*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = starter(t, "cleanup-stale")
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("cleanup-stale: exit %d\n%s%s", code, out, errOut)
	}
	if gone, _ := env.Store.CodebaseByID(context.Background(), cb.ID); gone != nil {
		t.Fatal("cleanup-stale left a codebase stale for 40 days")
	}
	if _, _, code := starter(t, "cleanup-stale", "--older-than", "-1h"); code != exitUsage {
		t.Errorf("negative --older-than: exit %d, want %d", code, exitUsage)
	}
}

func TestHelp(t *testing.T) {
	out, _, code := starter(t, "--help")
	for _, cmd := range []string{"collect", "show", "migrate", "cleanup-stale", "dev"} {
		if !strings.Contains(out, cmd) {
			t.Errorf("help lacks %s:\n%s", cmd, out)
		}
	}
	if code != 0 {
		t.Errorf("--help exit %d", code)
	}
}

func mustParse(t *testing.T, s string) repoid.ID {
	t.Helper()
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Hosts.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestScanAndFindings(t *testing.T) {
	o, _ := newRepo(t)
	token := gittest.FakePAT("Qx9")
	if _, err := fg.Commit(o, "app", "main", map[string]string{"ci/secrets.env": "GH=" + token + "\n"}, "oops"); err != nil {
		t.Fatal(err)
	}
	url := fg.URL() + "/" + o + "/app"
	out, errOut, code := starter(t, "scan", url+".git", "http://x:hunter2@"+fg.Host()+"/"+o+"/app/")
	if code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Count(out, "Scanning ") != 1 || !strings.Contains(out, "shard ") || !strings.Contains(out, ": Done") ||
		!strings.Contains(out, "findings  ") || !strings.Contains(errOut, "credentials in URLs were dropped") {
		t.Fatalf("scan output (the two spellings are one target):\n%s%s", out, errOut)
	}
	if strings.Contains(out+errOut, "hunter2") || strings.Contains(out+errOut, token) {
		t.Fatalf("scan output echoes a credential or the secret:\n%s%s", out, errOut)
	}
	out, errOut, code = starter(t, "findings", url)
	if code != 0 || !strings.Contains(out, "github-pat") || !strings.Contains(out, "ci/secrets.env:1") || strings.Contains(out, token) {
		t.Fatalf("findings: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = starter(t, "findings", "--json", url)
	var listed struct {
		Findings []struct {
			Rule, Path, Preview string
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Findings) == 0 || listed.Findings[0].Rule != "github-pat" {
		t.Fatalf("findings --json: %v\n%s", err, out)
	}

	// A collected repository's findings, by name; a view is recorded.
	if _, _, code := starter(t, "collect", o+"/app"); code != 0 {
		t.Fatal("collect failed")
	}
	out, errOut, code = starter(t, "findings", o+"/app")
	if code != 0 || !strings.Contains(out, "github-pat") {
		t.Fatalf("findings of a collected repository: exit %d\n%s%s", code, out, errOut)
	}

	for _, bad := range [][]string{
		{"scan", url, "--commit", "abc123"},
		{"scan", "ftp://example.com/x"},
		{"findings", o + "/app", "--ref", "main"},
	} {
		if _, errOut, code := starter(t, bad...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", bad, code, exitUsage, errOut)
		}
	}
}

func TestSchedulesCommands(t *testing.T) {
	vars[config.EnvSweepEvery] = "240h"
	defer delete(vars, config.EnvSweepEvery)
	out, errOut, code := starter(t, "schedules", "apply")
	if code != 0 || !strings.Contains(out, "recollection-sweep every 240h") || !strings.Contains(out, "runner-reconcile every 5m") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	waitSchedules(t, workflows.SweepScheduleID, "240h0m0s", false) // the update before the pause
	out, _, code = starter(t, "schedules", "pause", "recollection-sweep", "--note", "maintenance")
	if code != 0 {
		t.Fatalf("pause: exit %d %s", code, out)
	}
	out, errOut, code = starter(t, "schedules", "list")
	if code != 0 || !strings.Contains(out, "paused (maintenance)") || !strings.Contains(out, "stale-cleanup") ||
		!strings.Contains(out, "runner-reconcile") || !strings.Contains(out, "240h0m0s") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code = starter(t, "schedules", "unpause", "recollection-sweep"); code != 0 {
		t.Fatal("unpause failed")
	}
	out, _, code = starter(t, "schedules", "trigger", "stale-cleanup")
	if code != 0 || !strings.Contains(out, "trigger done") {
		t.Fatalf("trigger: exit %d %s", code, out)
	}
	out, _, _ = starter(t, "schedules", "list", "--json")
	var listed []scheduleInfo
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	// Every schedule a worker creates is listed (secret-revalidation and
	// webhook-redelivery were left out while the starter kept its own list).
	var got []string
	for _, s := range listed {
		got = append(got, s.ID)
	}
	want := slices.Sorted(maps.Keys(workflows.Schedules(workflows.ScheduleConfig{})))
	if !slices.Equal(got, want) || !slices.Contains(got, workflows.SecretRevalidationScheduleID) ||
		!slices.Contains(got, workflows.DeliveryRecoveryScheduleID) {
		t.Fatalf("list --json lists %v, want %v", got, want)
	}
	for _, s := range listed {
		if s.Paused {
			t.Errorf("%s is still paused", s.ID)
		}
	}
	if _, errOut, code := starter(t, "schedules", "trigger", "nope"); code != exitUsage || !strings.Contains(errOut, "unknown schedule") {
		t.Fatalf("unknown schedule: exit %d %s", code, errOut)
	}
}

// A private repository's URL: the starter, which asks anonymously, refuses
// it unless the host's private repositories are read by the workers (a
// GitHub App is configured); then the workers scan it through the App.
func TestScanPrivateRepositoryThroughApp(t *testing.T) {
	org, _ := newRepo(t)
	if err := fg.CreateOrg(org); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit(org, "app", "main", map[string]string{"ci.env": "AWS_ACCESS_KEY_ID=" + "AKIA" + "QYLPMN5HJKZ4T7XW" + "\n"}, "ci"); err != nil {
		t.Fatal(err)
	}
	if err := fg.SetPrivate(org, "app", true); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.InstallApp(ghApp.ID, org); err != nil {
		t.Fatal(err)
	}
	appOffset.Add(int64(time.Minute))
	url := fg.URL() + "/" + org + "/app"
	if _, errOut, code := starter(t, "scan", url); code != exitUsage || !strings.Contains(errOut, "not found (or private") {
		t.Fatalf("scan of a private repository without an App: exit %d\n%s", code, errOut)
	}
	vars[vcs.EnvAppID], vars[vcs.EnvAppKeyFile] = strconv.FormatInt(ghApp.ID, 10), appKeyFile
	defer func() { delete(vars, vcs.EnvAppID); delete(vars, vcs.EnvAppKeyFile) }()
	out, errOut, code := starter(t, "scan", url)
	if code != 0 || !strings.Contains(errOut, "the workers read it with") || !strings.Contains(out, "Scanned") {
		t.Fatalf("scan of a private repository through the App: exit %d\n%q\n%q", code, out, errOut)
	}
	if out, _, _ := starter(t, "findings", url); !strings.Contains(out, "aws") {
		t.Errorf("findings of the private repository:\n%s", out)
	}
}

func TestScanChecksTargetsBeforeStarting(t *testing.T) {
	o, _ := newRepo(t)
	plain := t.TempDir()
	for _, tc := range []struct {
		target, want string
	}{
		{"/no/such/path", "/no/such/path: no such directory"},
		{plain, "is not a Git repository"},
		{fg.URL() + "/" + o + "/no-such-repo", "not found (or private: set GITHUB_TOKEN)"},
	} {
		out, errOut, code := starter(t, "scan", tc.target)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Contains(out, "Scanning") {
			t.Errorf("scan %s: exit %d, want %d saying %q and starting nothing\n%s%s", tc.target, code, exitUsage, tc.want, out, errOut)
		}
	}

	// With GITFLEET_LOCAL_ROOT set, a repository the workers would refuse
	// is refused here, naming the setting: one outside the root, and a
	// work tree inside whose .git file names one outside.
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root, outside, escape := filepath.Join(base, "repos"), filepath.Join(base, "outside"), filepath.Join(base, "repos", "escape")
	for _, d := range []string{filepath.Join(outside, ".git"), escape} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(escape, ".git"), []byte("gitdir: "+filepath.Join(outside, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars[config.EnvLocalRoot] = root
	defer delete(vars, config.EnvLocalRoot)
	for _, dir := range []string{outside, escape} {
		out, errOut, code := starter(t, "scan", dir)
		if code != exitUsage || !strings.Contains(errOut, "not under GITFLEET_LOCAL_ROOT") || strings.Contains(out, "Scanning") {
			t.Errorf("scan %s: exit %d, want %d naming GITFLEET_LOCAL_ROOT and starting nothing\n%s%s", dir, code, exitUsage, out, errOut)
		}
	}
}

// A scan whose shard parks exits non-zero, and its run says "parked" in the
// Web UI's list (search attribute) and memo, with a readable workflow id.
func TestScanThatParksSaysSo(t *testing.T) {
	o, _ := newRepo(t)
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, Method: "POST", Path: "/" + o + "/app", Status: 404})
	defer remove()
	out, errOut, code := starter(t, "scan", fg.URL()+"/"+o+"/app")
	if code != exitFailed || !strings.Contains(out, "Parked") || !strings.Contains(errOut, "parked") {
		t.Fatalf("scan that parks: exit %d\n%s%s", code, out, errOut)
	}
	wantID := "scan:" + fg.Host() + "/" + o + "/app:"
	var id string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "workflow" {
			id = f[1]
		}
	}
	if !strings.HasPrefix(id, wantID) || len(id) != len(wantID)+12 {
		t.Fatalf("workflow id %q, want %s<12 hex digits>", id, wantID)
	}
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	attrs := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	var outcome string
	if p := attrs[workflows.SAOutcome.GetName()]; p == nil || converter.GetDefaultDataConverter().FromPayload(p, &outcome) != nil || outcome != workflows.OutcomeParked {
		t.Errorf("search attribute %s = %q, want %q", workflows.SAOutcome.GetName(), outcome, workflows.OutcomeParked)
	}
	memo := d.GetWorkflowExecutionInfo().GetMemo().GetFields()
	var target, memoOutcome string
	_ = converter.GetDefaultDataConverter().FromPayload(memo["target"], &target)
	_ = converter.GetDefaultDataConverter().FromPayload(memo["outcome"], &memoOutcome)
	if target != fg.URL()+"/"+o+"/app" || memoOutcome != workflows.OutcomeParked {
		t.Errorf("memo target %q outcome %q", target, memoOutcome)
	}
}
