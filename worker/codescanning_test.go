package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// GitHub code scanning on the real stack (issue 33): a worker with
// GITFLEET_CODE_SCANNING=on and the forge's App. Without Code scanning
// alerts: write nothing is sent and `starter show` says why; with it, a
// collection that finds a secret uploads the repository's SARIF for its
// default branch's head and the alert is open; a secret resolved with
// `starter findings resolve` is a dismissed alert after the next
// collection; a processing that fails is sent again, then reported when
// it fails again.
func TestCodeScanningUploads(t *testing.T) {
	ctx := context.Background()
	fg := startForge(t)
	app, err := fg.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, app.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fg.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.InstallApp(app.ID, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.CreateRepo("acme", "api"); err != nil {
		t.Fatal(err)
	}
	first, err := fg.Commit("acme", "api", "main", map[string]string{"config/ci.env": "GITHUB_TOKEN=" + gittest.FakePAT("Scan1") + "\n"}, "ci")
	if err != nil {
		t.Fatal(err)
	}
	const id = "code-scanning-test"
	t.Cleanup(func() { forgetWorkers(t, id) })
	startWorker(t, config.EnvWorkerID+"="+id, vcs.EnvAPIURL+"="+fg.APIURL(),
		vcs.EnvAppID+"="+strconv.FormatInt(app.ID, 10), vcs.EnvAppKeyFile+"="+keyFile,
		config.EnvCodeScanning+"=on").waitLine(t, "Started Worker")
	repo := repoid.ID{Host: fg.Host(), Owner: "acme", Name: "api"}

	collect := func(sha string) workflows.CollectResult {
		t.Helper()
		run, err := env.Client.ExecuteWorkflow(ctx, workflows.CollectOptions(repo), workflows.Collect,
			workflows.CollectInput{Repo: repo, Trigger: workflows.TriggerManual})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var res workflows.CollectResult
		if err := run.Get(wctx, &res); err != nil || res.Commit != sha {
			t.Fatalf("collect: %+v, %v (want commit %s)", res, err, sha)
		}
		return res
	}
	// upload waits for the codebase's latest upload workflow.
	upload := func(codebase int64) (workflows.UploadCodeScanningResult, error) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var res workflows.UploadCodeScanningResult
		err := env.Client.GetWorkflow(wctx, workflows.CodeScanningWorkflowID(codebase), "").Get(wctx, &res)
		return res, err
	}
	starter := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(starterBin, args...)
		cmd.Env = append(baseEnv(t, env.DatabaseURL), vcs.EnvAPIURL+"="+fg.APIURL())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("starter %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	latest := func(codebase int64) *store.CodeScanningUpload {
		t.Helper()
		u, err := env.Store.LatestUpload(ctx, codebase)
		if err != nil || u == nil {
			t.Fatalf("latest upload: %+v, %v", u, err)
		}
		return u
	}

	// Without the permission: nothing sent, and show says why.
	res := collect(first)
	got, err := upload(res.CodebaseID)
	if err != nil || got.State != store.UploadNotSent {
		t.Fatalf("upload without the permission: %+v, %v", got, err)
	}
	if ups := fg.SARIFUploads("acme", "api"); len(ups) != 0 {
		t.Fatalf("uploads without the permission: %+v", ups)
	}
	if out := starter("show", repo.String()); !regexp.MustCompile(`code scanning +not sent — the App lacks Code scanning alerts: write`).MatchString(out) {
		t.Errorf("show without the permission:\n%s", out)
	}

	// Granted: the next collection that changes the results uploads them
	// for the default branch's head; both secrets are open alerts.
	perms := forge.DefaultAppPermissions()
	perms["security_events"] = "write"
	if err := fg.SetAppPermissions(app.ID, perms); err != nil {
		t.Fatal(err)
	}
	second, err := fg.Commit("acme", "api", "main", map[string]string{"deploy/prod.env": "GITHUB_TOKEN=" + gittest.FakePAT("Scan2") + "\n"}, "prod")
	if err != nil {
		t.Fatal(err)
	}
	res = collect(second)
	if got, err = upload(res.CodebaseID); err != nil || got.State != store.UploadComplete || got.Attempts != 1 {
		t.Fatalf("upload: %+v, %v", got, err)
	}
	ups := fg.SARIFUploads("acme", "api")
	if len(ups) != 1 || ups[0].CommitSHA != second || ups[0].Ref != "refs/heads/main" || ups[0].ToolName != "gitfleet" ||
		!strings.Contains(string(ups[0].SARIF), `"version": "2.1.0"`) || ups[0].Status != "complete" ||
		!strings.Contains(string(ups[0].SARIF), `"repositoryUri":"`+fg.URL()+`/acme/api"`) ||
		!strings.Contains(string(ups[0].SARIF), `"revisionId":"`+second+`"`) {
		t.Fatalf("uploads: %+v", ups)
	}
	alerts := fg.CodeScanningAlerts("acme", "api")
	if len(alerts) != 2 || alerts[0].State != "open" || alerts[1].State != "open" {
		t.Fatalf("alerts: %+v", alerts)
	}
	if u := latest(res.CodebaseID); u.State != store.UploadComplete || u.SarifID != ups[0].ID || u.Commit != second || u.Open != 2 {
		t.Errorf("recorded upload: %+v", u)
	}
	if out := starter("show", repo.String()); !strings.Contains(out, "2 open, 0 dismissed (upload "+ups[0].ID+")") {
		t.Errorf("show after the upload:\n%s", out)
	}
	// A collection that changes nothing sends nothing.
	collect(second)
	if n := len(fg.SARIFUploads("acme", "api")); n != 1 {
		t.Errorf("an unchanged collection uploaded: %d uploads", n)
	}

	// Resolved in gitfleet: dismissed at the next collection's upload.
	secrets, err := env.Store.FleetSecrets(ctx, store.FleetFilter{Repo: repo.String()}, store.Page{Limit: 10})
	if err != nil || len(secrets) != 2 {
		t.Fatalf("secrets: %+v, %v", secrets, err)
	}
	var ci store.FleetSecret
	for _, s := range secrets {
		if s.Path == "config/ci.env" {
			ci = s
		}
	}
	starter("findings", "resolve", repo.String(), ci.SecretHash[:12], "--reason", "false_positive", "--as", "test")
	res = collect(second)
	if got, err = upload(res.CodebaseID); err != nil || got.State != store.UploadComplete {
		t.Fatalf("upload after the resolution: %+v, %v", got, err)
	}
	byPath := map[string]forge.CodeScanningAlert{}
	for _, a := range fg.CodeScanningAlerts("acme", "api") {
		byPath[a.Path] = a
	}
	if a := byPath["config/ci.env"]; a.State != "dismissed" || a.DismissedReason != "false positive" || a.Number != alerts[0].Number && a.Number != alerts[1].Number {
		t.Errorf("the resolved secret's alert: %+v", a)
	}
	if a := byPath["deploy/prod.env"]; a.State != "open" {
		t.Errorf("the open secret's alert: %+v", a)
	}

	// GitHub fails to process it twice: sent twice, then reported.
	fg.FailSARIFProcessing(2)
	starter("findings", "reopen", repo.String(), ci.SecretHash[:12], "--as", "test")
	before := len(fg.SARIFUploads("acme", "api"))
	res = collect(second)
	got, err = upload(res.CodebaseID)
	var app2 *temporal.ApplicationError
	if !errors.As(err, &app2) || !strings.Contains(app2.Message(), "forced by the forge") {
		t.Fatalf("a processing that failed twice: %+v, %v", got, err)
	}
	ups = fg.SARIFUploads("acme", "api")
	if len(ups)-before != 2 || ups[len(ups)-1].Status != "failed" || ups[len(ups)-2].Status != "failed" {
		t.Errorf("uploads after the failures: %d new, %+v", len(ups)-before, ups[len(ups)-1])
	}
	if u := latest(res.CodebaseID); u.State != store.UploadFailed || u.Attempt != 2 {
		t.Errorf("recorded upload: %+v", u)
	}
	if out := starter("show", repo.String()); !strings.Contains(out, "GitHub could not process the upload of") ||
		!strings.Contains(out, "(attempt 2): An error occurred while processing the SARIF file (forced by the forge)") {
		t.Errorf("show after the failures:\n%s", out)
	}
	// One failure: the second attempt goes through.
	fg.FailSARIFProcessing(1)
	starter("findings", "resolve", repo.String(), ci.SecretHash[:12], "--reason", "used_in_tests", "--as", "test")
	res = collect(second)
	if got, err = upload(res.CodebaseID); err != nil || got.State != store.UploadComplete || got.Attempts != 2 {
		t.Fatalf("a processing that failed once: %+v, %v", got, err)
	}
	if u := latest(res.CodebaseID); u.State != store.UploadComplete || u.Attempt != 2 || u.Dismissed != 1 {
		t.Errorf("recorded upload after one failure: %+v", u)
	}
	// No token in the worker's records of it: the uploads' rows.
	for _, tok := range fg.InstallationTokens() {
		var n int
		if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM code_scanning_uploads WHERE message LIKE '%' || $1 || '%'`, tok).Scan(&n); err != nil || n != 0 {
			t.Errorf("a token in the uploads' rows (%d, %v)", n, err)
		}
	}
}
