package forge

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

// gzipBase64 is a SARIF log as the upload takes it.
func gzipBase64(t *testing.T, log string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(log)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

const testSARIF = `{"version":"2.1.0","$schema":"https://json.schemastore.org/sarif-2.1.0.json","runs":[{"tool":{"driver":{"name":"gitfleet","rules":[{"id":"aws-access-token"}]}},"results":[
{"ruleId":"aws-access-token","level":"error","message":{"text":"a key"},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"config/app.env"},"region":{"startLine":3}}}],"partialFingerprints":{"gitfleetSecret/v1":"aaa"}},
{"ruleId":"aws-access-token","level":"error","message":{"text":"another key"},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"test/key.txt"},"region":{"startLine":1}}}],"partialFingerprints":{"gitfleetSecret/v1":"bbb"},"suppressions":[{"kind":"external","status":"accepted","justification":"used_in_tests"}]}]}]}`

// TestCodeScanningAPI: go-github's CodeScanningService against the forge.
// An installation token needs security_events: write to upload (403 as
// GitHub answers otherwise); an upload is pending, then complete with its
// alerts (a suppressed result dismissed) or failed with the errors; a log
// that is not SARIF 2.1.0 fails its processing; FailSARIFProcessing fails
// the next one; alerts keep their numbers across uploads.
func TestCodeScanningAPI(t *testing.T) {
	f := newForge(t)
	if err := f.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	_, sha := seeded(t, f, "acme", "api")
	app, err := f.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := f.InstallApp(app.ID, "acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	jwt := ghClient(t, f, signJWT(t, app.Key, app.ID, now.Add(-time.Minute), now.Add(9*time.Minute)))
	mint := func(perms *github.InstallationPermissions) (*github.Client, error) {
		tok, _, err := jwt.Apps.CreateInstallationToken(ctx(t), inst.ID, &github.InstallationTokenOptions{Permissions: perms})
		if err != nil {
			return nil, err
		}
		return ghClient(t, f, tok.GetToken()), nil
	}
	upload := func(c *github.Client, log string) (*github.SarifID, error) {
		id, _, err := c.CodeScanning.UploadSarif(ctx(t), "acme", "api", &github.SarifAnalysis{
			CommitSHA: github.String(sha), Ref: github.String("refs/heads/main"), Sarif: github.String(gzipBase64(t, log)),
			ToolName: github.String("gitfleet")})
		return id, err
	}

	// The App lacks the permission: a token cannot even ask for it, and a
	// token without it is refused.
	if _, err := mint(&github.InstallationPermissions{SecurityEvents: github.String("write")}); err == nil {
		t.Fatal("a token with security_events: write minted for an App without it")
	}
	readOnly, err := mint(nil)
	if err != nil {
		t.Fatal(err)
	}
	var gerr *github.ErrorResponse
	if _, err := upload(readOnly, testSARIF); !errors.As(err, &gerr) || gerr.Response.StatusCode != http.StatusForbidden ||
		gerr.Message != "Resource not accessible by integration" {
		t.Fatalf("upload without security_events: %v, want 403 Resource not accessible by integration", err)
	}
	if got := f.SARIFUploads("acme", "api"); len(got) != 0 {
		t.Fatalf("refused upload recorded: %+v", got)
	}

	perms := DefaultAppPermissions()
	perms["security_events"] = "write"
	if err := f.SetAppPermissions(app.ID, perms); err != nil {
		t.Fatal(err)
	}
	c, err := mint(&github.InstallationPermissions{SecurityEvents: github.String("write"), Metadata: github.String("read")})
	if err != nil {
		t.Fatal(err)
	}
	// pending, then complete, with an open and a dismissed alert.
	id, err := upload(c, testSARIF)
	if err != nil || id.GetID() == "" || !strings.HasSuffix(id.GetURL(), "/code-scanning/sarifs/"+id.GetID()) {
		t.Fatalf("upload: %+v %v", id, err)
	}
	status := func(id string) string {
		t.Helper()
		s, _, err := c.CodeScanning.GetSARIF(ctx(t), "acme", "api", id)
		if err != nil {
			t.Fatal(err)
		}
		return s.GetProcessingStatus()
	}
	if got := status(id.GetID()); got != "pending" {
		t.Errorf("first look: %s, want pending", got)
	}
	if got := status(id.GetID()); got != "complete" {
		t.Errorf("second look: %s, want complete", got)
	}
	alerts, _, err := c.CodeScanning.ListAlertsForRepo(ctx(t), "acme", "api", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 2 || alerts[0].GetState() != "open" || alerts[0].GetMostRecentInstance().GetLocation().GetPath() != "config/app.env" ||
		alerts[0].GetMostRecentInstance().GetCommitSHA() != sha || alerts[1].GetState() != "dismissed" || alerts[1].GetDismissedReason() != "used in tests" {
		t.Fatalf("alerts: %s", github.Stringify(alerts))
	}
	open, _, _ := c.CodeScanning.ListAlertsForRepo(ctx(t), "acme", "api", &github.AlertListOptions{State: "open"})
	if len(open) != 1 || open[0].GetNumber() != alerts[0].GetNumber() {
		t.Errorf("open alerts: %s", github.Stringify(open))
	}

	// Not SARIF 2.1.0, and a forced failure: failed, with why; the alerts
	// stay those of the last complete upload.
	for name, tc := range map[string]struct {
		log, want string
		force     bool
	}{
		"not json":      {log: "{", want: "Unable to parse"},
		"version":       {log: `{"version":"2.0.0","runs":[]}`, want: "Unsupported SARIF version"},
		"no runs":       {log: `{"version":"2.1.0"}`, want: `requires property "runs"`},
		"absolute path": {log: strings.Replace(testSARIF, "config/app.env", "file:///etc/app.env", 1), want: "is not a path of the repository"},
		"forced":        {log: testSARIF, want: "forced by the forge", force: true},
		"schema":        {log: strings.Replace(testSARIF, `"level":"error"`, `"level":"fatal"`, 1), want: "does not match the SARIF 2.1.0 schema"},
	} {
		if tc.force {
			f.FailSARIFProcessing(1)
		}
		id, err := upload(c, tc.log)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		status(id.GetID())
		req, _ := c.NewRequest("GET", "repos/acme/api/code-scanning/sarifs/"+id.GetID(), nil)
		var got struct {
			Status string   `json:"processing_status"`
			Errors []string `json:"errors"`
		}
		if _, err := c.Do(ctx(t), req, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status != "failed" || len(got.Errors) == 0 || !strings.Contains(got.Errors[0], tc.want) {
			t.Errorf("%s: %+v, want failed with %q", name, got, tc.want)
		}
	}
	if got := f.CodeScanningAlerts("acme", "api"); len(got) != 2 {
		t.Errorf("alerts after failed uploads: %+v", got)
	}

	// The next upload dismisses the first alert, keeping its number.
	id, err = upload(c, strings.Replace(testSARIF, `"partialFingerprints":{"gitfleetSecret/v1":"aaa"}`,
		`"partialFingerprints":{"gitfleetSecret/v1":"aaa"},"suppressions":[{"kind":"external","status":"accepted","justification":"revoked"}]`, 1))
	if err != nil {
		t.Fatal(err)
	}
	status(id.GetID())
	got := f.CodeScanningAlerts("acme", "api")
	if len(got) != 2 || got[0].Number != alerts[0].GetNumber() || got[0].State != "dismissed" {
		t.Errorf("alerts after the dismissal: %+v", got)
	}
	if ups := f.SARIFUploads("acme", "api"); len(ups) != 8 || ups[0].CommitSHA != sha || ups[0].Ref != "refs/heads/main" {
		t.Errorf("uploads: %d, first %+v", len(ups), ups[0])
	}
	// The repository's page shows the alerts.
	resp, body := rawGet(t, f.URL()+"/acme/api", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "config/app.env:3") || !strings.Contains(body, "dismissed (used in tests)") {
		t.Errorf("page: %d\n%s", resp.StatusCode, body)
	}
}
