package workflows_test

import (
	"context"
	"testing"
	"time"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/report"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// reportRules are the scanner's rules as a report lists them.
func reportRules(s *scan.Scanner) []report.Rule {
	var rules []report.Rule
	for _, r := range s.Rules().Rules() {
		rules = append(rules, report.Rule{ID: r.ID, Description: r.Description, Tags: r.Tags})
	}
	return rules
}

// A collection with code scanning on (and the App granted Code scanning
// alerts: write) starts UploadCodeScanning, which uploads the repository's
// SARIF for the collected commit and waits for its processing: the
// forge's alert is open. Both histories are recorded for the replay test
// (collect-code-scanning, upload-code-scanning).
func TestCollectUploadsToCodeScanning(t *testing.T) {
	workflows.SetCodeScanning(true)
	t.Cleanup(func() { workflows.SetCodeScanning(false) })
	perms := forge.DefaultAppPermissions()
	perms["security_events"] = "write"
	if err := fg.SetAppPermissions(ghApp.ID, perms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fg.SetAppPermissions(ghApp.ID, forge.DefaultAppPermissions()) })
	org, _ := privateOrg(t)
	_, sha := privateRepo(t, org, "scanned")
	res, run, err := collectRun(t, id(org, "scanned"))
	if err != nil {
		t.Fatalf("collect: %+v, %v", res, err)
	}
	recordHistory(t, "collect-code-scanning", run.GetID(), run.GetRunID())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	up := env.Client.GetWorkflow(ctx, workflows.CodeScanningWorkflowID(res.CodebaseID), "")
	var got workflows.UploadCodeScanningResult
	if err := up.Get(ctx, &got); err != nil || got.State != store.UploadComplete {
		t.Fatalf("upload: %+v, %v", got, err)
	}
	recordHistory(t, "upload-code-scanning", up.GetID(), up.GetRunID())
	ups := fg.SARIFUploads(org, "scanned")
	if len(ups) != 1 || ups[0].CommitSHA != sha || ups[0].Status != "complete" {
		t.Fatalf("uploads: %+v", ups)
	}
	if alerts := fg.CodeScanningAlerts(org, "scanned"); len(alerts) != 1 || alerts[0].State != "open" ||
		alerts[0].RuleID != "github-pat" || alerts[0].Path != "config/ci.env" {
		t.Errorf("alerts: %+v", alerts)
	}
}
