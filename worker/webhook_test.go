package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/vcs"
	"gitfleet/internal/infra/webhook"
	"gitfleet/workflows"
)

const webhookSecret = "a webhook secret of some length"

// A push delivered to a worker's webhook address is collected and its
// secret found, on the real stack: the delivery is answered 202 once the
// collection is with Temporal; its redelivery is answered 200 and starts
// nothing; a forged one is refused 401; a repository gitfleet does not
// collect is acknowledged and not collected.
func TestPushDeliveryIsCollected(t *testing.T) {
	ctx := context.Background()
	fg := startForge(t)
	const id = "webhook-test"
	t.Cleanup(func() { forgetWorkers(t, id) })
	w := startWorker(t, config.EnvWorkerID+"="+id, vcs.EnvAPIURL+"="+fg.APIURL(),
		config.EnvWebhookAddr+"=127.0.0.1:0", config.EnvWebhookSecret+"="+webhookSecret)
	var l struct {
		Addr string `json:"webhookAddr"`
	}
	if err := json.Unmarshal([]byte(w.waitLine(t, `"webhookAddr"`)), &l); err != nil || l.Addr == "" {
		t.Fatalf("no webhook address in the log: %v", err)
	}
	hook := "http://" + l.Addr + "/webhook"

	repo, app := collectedRepo(t, fg, "acme", "app")
	first := lastRun(t, repo)

	sha, err := fg.Commit("acme", "app", "main", map[string]string{"ci.env": "GITHUB_TOKEN=" + gittest.FakePAT("Hook1") + "\n"}, "ci")
	if err != nil {
		t.Fatal(err)
	}
	push := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"id":%d,"full_name":"acme/app"}}`, sha, app.ID)
	if code := deliver(t, hook, "push", "delivery-1", push, webhook.Sign([]byte(webhookSecret), []byte(push))); code != http.StatusAccepted {
		t.Fatalf("push delivery answered %d, want 202", code)
	}
	latestCollection(t, repo, sha, 1)
	var evented bool
	if err := env.Store.Pool().QueryRow(ctx, `SELECT last_event_at IS NOT NULL FROM codebases WHERE host = $1 AND external_repo_id = $2`,
		fg.Host(), fmt.Sprint(app.ID)).Scan(&evented); err != nil || !evented {
		t.Errorf("the push's repository has no event noted (%t, %v): the sweep would check it as often as before", evented, err)
	}
	pushed := lastRun(t, repo)
	if pushed == first {
		t.Fatal("the delivery started no collection")
	}

	for _, tc := range []struct {
		name, guid, body, signature string
		want                        int
	}{
		{"a redelivery", "delivery-1", push, webhook.Sign([]byte(webhookSecret), []byte(push)), http.StatusOK},
		{"a forged delivery", "delivery-2", push, webhook.Sign([]byte("not the secret"), []byte(push)), http.StatusUnauthorized},
		{"a repository not collected", "delivery-3", `{"repository":{"id":999999,"full_name":"acme/other"}}`,
			webhook.Sign([]byte(webhookSecret), []byte(`{"repository":{"id":999999,"full_name":"acme/other"}}`)), http.StatusAccepted},
	} {
		if code := deliver(t, hook, "push", tc.guid, tc.body, tc.signature); code != tc.want {
			t.Errorf("%s: answered %d, want %d", tc.name, code, tc.want)
		}
	}
	if now := lastRun(t, repo); now != pushed {
		t.Errorf("a delivery after the push started collection run %s", now)
	}
	other := repoid.ID{Host: fg.Host(), Owner: "acme", Name: "other"}
	if _, err := env.Client.DescribeWorkflowExecution(ctx, workflows.CollectWorkflowID(other), ""); err == nil {
		t.Error("a repository gitfleet does not collect was collected")
	}
}

// deliver posts a delivery as GitHub does and returns the status.
func deliver(t *testing.T, url, event, guid, body, signature string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-Hub-Signature-256", signature)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// lastRun is the run id of a repository's latest collection.
func lastRun(t *testing.T, repo repoid.ID) string {
	t.Helper()
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), workflows.CollectWorkflowID(repo), "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// freePort is a loopback address nothing listens on now, for a receiver
// that must come back where GitHub delivers.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The forge's App delivers a push to the worker, which collects it; with
// the receiver killed, the next push's delivery fails (GitHub records it,
// and retries nothing); once a worker listens again, RecoverDeliveries
// finds the failed delivery in the App's deliveries and redelivers it,
// and the push is collected: nothing missed while the receiver was down,
// and the delivery handled before is not delivered again.
func TestDeliveriesMissedWhileDownAreRecovered(t *testing.T) {
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
	addr := freePort(t)
	if err := fg.SetAppWebhook(app.ID, "http://"+addr+"/webhook", webhookSecret); err != nil {
		t.Fatal(err)
	}
	const id = "webhook-recovery"
	t.Cleanup(func() { forgetWorkers(t, id) })
	mirrors := filepath.Join(t.TempDir(), "mirrors")
	start := func() *proc {
		w := startWorker(t, config.EnvWorkerID+"="+id, config.EnvMirrorDir+"="+mirrors, vcs.EnvAPIURL+"="+fg.APIURL(),
			vcs.EnvAppID+"="+strconv.FormatInt(app.ID, 10), vcs.EnvAppKeyFile+"="+keyFile,
			config.EnvWebhookAddr+"="+addr, config.EnvWebhookSecret+"="+webhookSecret)
		w.waitLine(t, `"webhookAddr"`)
		return w
	}
	w := start()
	repo, _ := collectedRepo(t, fg, "acme", "svc")

	// Pushed while the receiver listens: delivered, collected.
	sha1, err := fg.Commit("acme", "svc", "main", map[string]string{"a.env": "GITHUB_TOKEN=" + gittest.FakePAT("Rcv01") + "\n"}, "one")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.WaitHooks(ctx); err != nil {
		t.Fatal(err)
	}
	latestCollection(t, repo, sha1, 1)

	// Pushed while it is down: the delivery fails.
	_ = w.p.Cmd.Process.Kill()
	<-w.p.Done()
	sha2, err := fg.Commit("acme", "svc", "main", map[string]string{"b.env": "GITHUB_TOKEN=" + gittest.FakePAT("Rcv02") + "\n"}, "two")
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.WaitHooks(ctx); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, d := range fg.HookDeliveries() {
		if d.Event == "push" && (d.StatusCode < 200 || d.StatusCode > 299) {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d failed push deliveries while the receiver was down, want 1: %+v", failed, fg.HookDeliveries())
	}

	start()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "test-" + workflows.DeliveryRecoveryScheduleID, TaskQueue: workflows.TaskQueue},
		workflows.RecoverDeliveries, workflows.RecoverDeliveriesInput{Settle: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	var rec workflows.RecoverDeliveriesResult
	if err := run.Get(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Apps != 1 || rec.Redelivered != 1 {
		t.Fatalf("recovery: %+v, want the one failed delivery redelivered", rec)
	}
	if err := fg.WaitHooks(ctx); err != nil {
		t.Fatal(err)
	}
	latestCollection(t, repo, sha2, 1)
}

func startForge(t *testing.T) *forge.Forge {
	t.Helper()
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fg.Close() })
	return fg
}

// collectedRepo creates owner/name on the forge with one commit and
// collects it, as a user would, once a worker runs.
func collectedRepo(t *testing.T, fg *forge.Forge, owner, name string) (repoid.ID, forge.Repo) {
	t.Helper()
	r, err := fg.CreateRepo(owner, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit(owner, name, "main", map[string]string{"README": "hello\n"}, "first"); err != nil {
		t.Fatal(err)
	}
	repo := repoid.ID{Host: fg.Host(), Owner: owner, Name: name}
	if _, err := env.Client.ExecuteWorkflow(context.Background(), workflows.CollectOptions(repo), workflows.Collect,
		workflows.CollectInput{Repo: repo, Trigger: workflows.TriggerManual}); err != nil {
		t.Fatal(err)
	}
	latestCollection(t, repo, "", 0)
	return repo, r
}

// latestCollection waits for repo's latest collection (following the
// runs it continued as) and checks that it collected sha ("": any) and
// found fresh new secrets.
func latestCollection(t *testing.T, repo repoid.ID, sha string, fresh int64) workflows.CollectResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.CollectResult
	if err := env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(repo), "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Scan == nil || res.Scan.Receipt == nil || (sha != "" && res.Commit != sha) || res.Scan.Receipt.Findings != fresh {
		t.Fatalf("collection of %s, want %s with %d new findings: %+v", repo, sha, fresh, res)
	}
	return res
}
