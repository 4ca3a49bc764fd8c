package workflows_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/activities"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/notify"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/workflows"
)

// notifyActs are the worker's alert activities: no receiver, as a worker
// without GITFLEET_NOTIFY_URL has, but for the tests that name one
// (withAlerts).
var notifyActs = &activities.Notifications{}

// withAlerts points the worker's alerts at setting's receivers for a
// test, as GITFLEET_NOTIFY_URL does.
func withAlerts(t *testing.T, setting string) {
	t.Helper()
	targets, err := notify.ParseTargets(setting)
	if err != nil {
		t.Fatal(err)
	}
	notifyActs.Targets, notifyActs.PerMinute = targets, 1000
	workflows.SetNotify(true)
	t.Cleanup(func() {
		workflows.SetNotify(false)
		notifyActs.Targets = nil
	})
}

// receiver is a local webhook receiver: it answers the statuses it is
// told to (then 200), records every request, and can go down (its port
// refuses connections) and come back on the same address.
type receiver struct {
	addr string
	mu   sync.Mutex
	srv  *http.Server
	fail []int
	got  []delivery
}

type delivery struct {
	path, id string
	status   int
	body     []byte
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{addr: ln.Addr().String()}
	r.serve(ln)
	t.Cleanup(func() { r.down() })
	return r
}

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down closes the listener: connections are refused until up.
func (r *receiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	_ = srv.Close()
}

func (r *receiver) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	r.serve(ln)
}

func (r *receiver) failNext(statuses ...int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = append(r.fail, statuses...)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	status := http.StatusOK
	if len(r.fail) > 0 {
		status, r.fail = r.fail[0], r.fail[1:]
	}
	r.got = append(r.got, delivery{path: req.URL.Path, id: req.Header.Get("X-Gitfleet-Delivery"), status: status, body: body})
	r.mu.Unlock()
	w.WriteHeader(status)
}

// deliveries are the requests received; accepted those answered 200.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *receiver) accepted(pathPrefix string) []delivery {
	var out []delivery
	for _, d := range r.deliveries() {
		if d.status == http.StatusOK && strings.HasPrefix(d.path, pathPrefix) {
			out = append(out, d)
		}
	}
	return out
}

// jsonMessage is the generic receiver's document as a receiver reads it.
type jsonMessage struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	Repository string `json:"repository"`
	Summary    string `json:"summary"`
	Total      int    `json:"total"`
	Link       string `json:"link"`
	Alerts     []struct {
		Rule, Path, Commit, Preview, Validity, Link string
		Line                                        int
	} `json:"alerts"`
}

func decodeMessage(t *testing.T, d delivery) jsonMessage {
	t.Helper()
	var m jsonMessage
	if err := json.Unmarshal(d.body, &m); err != nil {
		t.Fatalf("a message that is not JSON: %v: %s", err, d.body)
	}
	return m
}

// notifyRunOf waits for the alerts the run parentRunID started
// (of kind) to end, and returns their result and run.
func notifyRunOf(t *testing.T, kind, parentRunID string) (workflows.NotifySecretsResult, client.WorkflowRun) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := workflows.NotifyWorkflowID(kind, parentRunID)
	run := env.Client.GetWorkflow(ctx, id, "")
	var res workflows.NotifySecretsResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("alerts %s: %v", id, err)
	}
	desc, err := env.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return res, env.Client.GetWorkflow(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
}

// latestRun is the run id of workflow id's latest run.
func latestRun(t *testing.T, id string) string {
	t.Helper()
	desc, err := env.Client.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// notifyAgain runs NotifySecrets for shards as a restarted or repeated
// run would (every secret since the beginning), and returns its result.
func notifyAgain(t *testing.T, kind string, shards ...int64) workflows.NotifySecretsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "notify-again:" + owner(t), TaskQueue: workflows.TaskQueue},
		workflows.NotifySecrets, workflows.NotifySecretsInput{Kind: kind, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.NotifySecretsResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// assertNowhere fails when one of needles (secrets, receivers' tokens) is
// in the history of one of runs (workflow id, run id), the worker's logs,
// or a row of the alerts' tables.
func assertNowhere(t *testing.T, needles []string, runs ...client.WorkflowRun) {
	t.Helper()
	ctx := context.Background()
	for _, run := range runs {
		it := env.Client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var all strings.Builder
		events := 0
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			all.WriteString(e.String())
		}
		if events == 0 {
			t.Errorf("no history of %s/%s searched", run.GetID(), run.GetRunID())
		}
		for _, n := range needles {
			if strings.Contains(all.String(), n) {
				t.Errorf("the history of %s holds %s…", run.GetID(), n[:6])
			}
		}
	}
	logs := workerLogs.String()
	if !strings.Contains(logs, "alert sent") {
		t.Error("the worker logs do not show the alerts: not the logs searched")
	}
	for _, n := range needles {
		if strings.Contains(logs, n) {
			t.Errorf("the worker logs hold %s…", n[:6])
		}
		for _, table := range []string{"notification_messages", "notification_alerts", "notification_sends"} {
			var rows int
			if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table+` t WHERE strpos(t::text, $1) > 0`, n).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows > 0 {
				t.Errorf("table %s: %d rows hold %s…", table, rows, n[:6])
			}
		}
	}
}

// A collection whose scan finds secrets new to the fleet announces them:
// one message per repository to each receiver — gitfleet's JSON to a
// webhook, Slack's {"text","blocks"} to a Slack URL — carrying rule,
// path, commit, preview, validity and a link, and no secret. A later scan
// announces only what it found new; a run started again for the same
// repositories (a restart, a repeat) sends nothing. No secret and no
// receiver's URL is in a history, the logs or the alerts' tables.
func TestAlertsAnnounceNewSecretsOncePerRepository(t *testing.T) {
	rcv := startReceiver(t)
	hookToken, slackToken := randomOf(t, alnum, 24), randomOf(t, alnum, 24)
	withAlerts(t, "http://"+rcv.addr+"/hook/"+hookToken+", slack+http://"+rcv.addr+"/services/T0/B0/"+slackToken)

	o := owner(t)
	planted := map[string]map[string]string{ // repository name → path → secret
		"api": {"conf/github.env": "ghp_" + randomOf(t, alnum, 36), "conf/gitlab.env": "glpat-" + randomOf(t, alnum, 20),
			"deploy/ci.env": "ghp_" + randomOf(t, alnum, 36)},
		"web": {"settings/npm.env": "npm_" + randomOf(t, lowers, 36), "settings/token.env": "ghp_" + randomOf(t, alnum, 36)},
	}
	var secrets []string
	heads := map[string]string{}
	var runs []client.WorkflowRun
	shards := map[string]int64{}
	results := map[string]workflows.NotifySecretsResult{}
	for name, files := range planted {
		if _, err := fg.CreateRepo(o, name); err != nil {
			t.Fatal(err)
		}
		content := map[string]string{}
		for path, s := range files {
			content[path] = "TOKEN=" + s + "\n"
			secrets = append(secrets, s)
		}
		sha, err := fg.Commit(o, name, "main", content, "add settings")
		if err != nil {
			t.Fatal(err)
		}
		heads[name] = sha
		res, crun, err := collectRun(t, id(o, name))
		if err != nil || res.Case != identity.CaseNew || res.Scan == nil {
			t.Fatalf("collect %s: %+v, %v", name, res, err)
		}
		shards[name] = res.Scan.ShardID
		scanID := workflows.CollectWorkflowID(id(o, name)) + "/scan"
		scanRun := env.Client.GetWorkflow(context.Background(), scanID, latestRun(t, scanID))
		nres, nrun := notifyRunOf(t, workflows.NotifyNew, scanRun.GetRunID())
		results[name] = nres
		runs = append(runs, crun, scanRun, nrun)
		if name == "api" {
			recordHistory(t, "execute-shard-notifies", scanRun.GetID(), scanRun.GetRunID())
			recordHistory(t, "notify-secrets-new", nrun.GetID(), nrun.GetRunID())
		}
	}

	for name, files := range planted {
		if r := results[name]; r.Messages != 2 || r.Alerts != 2*len(files) || r.Failed != 0 {
			t.Errorf("%s: alerts %+v, want 2 messages announcing %d secrets", name, r, 2*len(files))
		}
		repo := fg.Host() + "/" + o + "/" + name
		var generic, slack []delivery
		for _, d := range rcv.accepted("/hook/" + hookToken) {
			if decodeMessage(t, d).Repository == repo {
				generic = append(generic, d)
			}
		}
		for _, d := range rcv.accepted("/services/T0/B0/" + slackToken) {
			if strings.Contains(string(d.body), o+"/"+name) {
				slack = append(slack, d)
			}
		}
		if len(generic) != 1 || len(slack) != 1 {
			t.Fatalf("%s: %d JSON and %d Slack messages, want one each", name, len(generic), len(slack))
		}
		m := decodeMessage(t, generic[0])
		if m.Kind != "new" || m.Total != len(files) || len(m.Alerts) != len(files) || m.ID != generic[0].id || m.Link != "https://"+repo {
			t.Errorf("%s: message %+v", name, m)
		}
		for _, a := range m.Alerts {
			secret, ok := files[a.Path]
			wantRule := map[string]string{"ghp_": "github-pat", "glpa": "gitlab-pat", "npm_": "npm-access-token"}[secret[:4]]
			switch {
			case !ok:
				t.Errorf("%s: an alert for %s, which holds no planted secret", name, a.Path)
			case a.Rule != wantRule || a.Commit != heads[name] || a.Validity != "unchecked" || a.Line != 1 ||
				a.Preview == "" || strings.Contains(secret, a.Preview) ||
				a.Link != "https://"+repo+"/blob/"+heads[name]+"/"+a.Path+"#L1":
				t.Errorf("%s: alert %+v (want rule %s, commit %s)", name, a, wantRule, heads[name])
			}
		}
		var s struct {
			Text   string            `json:"text"`
			Blocks []json.RawMessage `json:"blocks"`
			Alerts json.RawMessage   `json:"alerts"`
		}
		if err := json.Unmarshal(slack[0].body, &s); err != nil || !strings.Contains(s.Text, repo) || len(s.Blocks) != 1+len(files) || s.Alerts != nil {
			t.Errorf("%s: Slack message %s (%v)", name, slack[0].body, err)
		}
	}
	for _, d := range rcv.deliveries() {
		for _, s := range secrets {
			if strings.Contains(string(d.body), s) {
				t.Errorf("a message to %s holds a secret (%s…)", d.path[:6], s[:6])
			}
		}
	}

	// A new secret in api: the next collection's scan announces it alone.
	fresh := "ghp_" + randomOf(t, alnum, 36)
	secrets = append(secrets, fresh)
	sha, err := fg.Commit(o, "api", "main", map[string]string{"conf/new.env": "KEY=" + fresh + "\n"}, "one more")
	if err != nil {
		t.Fatal(err)
	}
	before := len(rcv.deliveries())
	if res, crun, err := collectRun(t, id(o, "api")); err != nil || res.Scan == nil {
		t.Fatalf("collect api again: %+v, %v", res, err)
	} else {
		runs = append(runs, crun)
	}
	scanID := workflows.CollectWorkflowID(id(o, "api")) + "/scan"
	nres, nrun := notifyRunOf(t, workflows.NotifyNew, latestRun(t, scanID))
	runs = append(runs, nrun)
	if nres.Messages != 2 || nres.Alerts != 2 {
		t.Errorf("the second scan's alerts: %+v, want 2 messages of one secret", nres)
	}
	after := rcv.deliveries()[before:]
	if len(after) != 2 {
		t.Fatalf("%d deliveries after the second scan, want 2", len(after))
	}
	for _, d := range after {
		if strings.HasPrefix(d.path, "/hook/") {
			m := decodeMessage(t, d)
			if len(m.Alerts) != 1 || m.Alerts[0].Path != "conf/new.env" || m.Alerts[0].Commit != sha {
				t.Errorf("the second scan's message: %+v", m)
			}
		}
	}

	// Run again for both repositories, from the beginning of time: every
	// secret was announced to each receiver; nothing is sent.
	before = len(rcv.deliveries())
	if again := notifyAgain(t, workflows.NotifyNew, shards["api"], shards["web"]); again.Messages != 0 || again.Alerts != 0 {
		t.Errorf("a repeated run sent %+v", again)
	}
	if n := len(rcv.deliveries()); n != before {
		t.Errorf("a repeated run made %d deliveries", n-before)
	}
	// A collection whose scan finds nothing new (a commit without
	// secrets) starts no alerts.
	if _, err := fg.Commit(o, "web", "main", map[string]string{"README.md": "nothing secret\n"}, "docs"); err != nil {
		t.Fatal(err)
	}
	res, err := collect(t, id(o, "web"))
	if err != nil || res.Scan == nil || res.Scan.Receipt == nil || res.Scan.Receipt.Findings != 0 {
		t.Fatalf("collect web again: %+v, %v", res, err)
	}
	webScan := workflows.CollectWorkflowID(id(o, "web")) + "/scan"
	if _, err := env.Client.DescribeWorkflowExecution(context.Background(),
		workflows.NotifyWorkflowID(workflows.NotifyNew, latestRun(t, webScan)), ""); err == nil {
		t.Error("a scan that found nothing new started alerts")
	}
	if n := len(rcv.deliveries()); n != before {
		t.Errorf("a collection that found nothing new made %d deliveries", n-before)
	}

	assertNowhere(t, append(secrets, hookToken, slackToken), runs...)
}

// plantLocal writes a repository of n secrets (one file each) and returns
// its target and the secrets by path.
func plantLocal(t *testing.T, n int) (target.Target, map[string]string) {
	t.Helper()
	files := map[string]string{}
	var planted []repogen.Secret
	for i := range n {
		s := "ghp_" + randomOf(t, alnum, 36)
		path := "conf/key" + string(rune('a'+i)) + ".env"
		files[path] = s
		planted = append(planted, repogen.Secret{Commit: 1, Path: path, Content: "KEY=" + s + "\n"})
	}
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 3, FilesPerCommit: 1, BlobSize: 100, Seed: 7, Secrets: planted}); err != nil {
		t.Fatal(err)
	}
	return normalized(t, target.Request{Location: dir})[0], files
}

// A receiver that answers 500 three times, then 200, gets each alert once
// (the same message, under the same delivery id, until it took it); a
// receiver down (connection refused) while a scan's message is tried
// again and again, then back, gets every alert once. The retries run on
// the workflow's retry policy, made short for the test.
func TestAlertsReachAReceiverOnceThroughErrorsAndAnOutage(t *testing.T) {
	defer workflows.SetNotifyRetry(50*time.Millisecond, 200*time.Millisecond)()
	rcv := startReceiver(t)
	token := randomOf(t, alnum, 24)
	withAlerts(t, "http://"+rcv.addr+"/hook/"+token)

	rcv.failNext(500, 500, 500)
	tg, files := plantLocal(t, 3)
	if res, run := scanToEnd(t, tg); res.Status != shard.Done {
		t.Fatalf("scan: %+v", res)
	} else if n, _ := notifyRunOf(t, workflows.NotifyNew, run.GetRunID()); n.Messages != 1 || n.Alerts != 3 {
		t.Errorf("alerts %+v, want one message of 3 secrets", n)
	}
	got := rcv.deliveries()
	if len(got) != 4 || got[0].status != 500 || got[3].status != 200 {
		t.Fatalf("deliveries %d, want 3 answered 500 and one 200", len(got))
	}
	for _, d := range got {
		if d.id == "" || d.id != got[0].id || string(d.body) != string(got[0].body) {
			t.Errorf("attempts differ: %q %q", d.id, got[0].id)
		}
	}

	// Down: the next scan's message meets a refused connection, attempt
	// after attempt; back, it is delivered, once.
	rcv.down()
	tg2, files2 := plantLocal(t, 2)
	res2, run2 := scanToEnd(t, tg2)
	var attempts int
	poll.Until(t, "the message tried against the receiver down", time.Minute, func() (bool, string) {
		err := env.Store.Pool().QueryRow(context.Background(), `SELECT coalesce(max(attempts), 0) FROM notification_messages
			WHERE shard_id = $1`, res2.ShardID).Scan(&attempts)
		return err == nil && attempts >= 3, "attempts so far"
	})
	rcv.up(t)
	if n, _ := notifyRunOf(t, workflows.NotifyNew, run2.GetRunID()); n.Messages != 1 || n.Alerts != 2 {
		t.Errorf("alerts after the outage %+v, want one message of 2 secrets", n)
	}

	seen := map[string]int{}
	for _, d := range rcv.accepted("/hook/") {
		m := decodeMessage(t, d)
		for _, a := range m.Alerts {
			seen[m.Repository+"|"+a.Path]++
		}
	}
	want := 0
	for tgt, fs := range map[string]map[string]string{tg.Location: files, tg2.Location: files2} {
		for path := range fs {
			want++
			if seen[tgt+"|"+path] != 1 {
				t.Errorf("%s %s announced %d times, want once", filepath.Base(filepath.Dir(tgt)), path, seen[tgt+"|"+path])
			}
		}
	}
	if len(seen) != want {
		t.Errorf("%d alerts announced, want %d: %v", len(seen), want, seen)
	}
	if again := notifyAgain(t, workflows.NotifyNew, res2.ShardID); again.Messages != 0 {
		t.Errorf("a repeated run sent %+v", again)
	}
}

// A validity check that finds a secret valid announces it (kind valid,
// validity valid) — the invalid one not — once; no secret is in a
// history, the logs, the metrics or a table.
func TestAlertsAnnounceSecretsFoundValid(t *testing.T) {
	withValidation(t)
	rcv := startReceiver(t)
	token := randomOf(t, alnum, 24)
	withAlerts(t, "http://"+rcv.addr+"/hook/"+token)
	ls := []leak{
		{rule: "github-pat", file: "valid.env", secret: "ghp_" + randomOf(t, alnum, 36), valid: true, state: "valid"},
		{rule: "github-pat", file: "invalid.env", secret: "ghp_" + randomOf(t, alnum, 36), state: "invalid"},
	}
	_, res, scanRun := plant(t, ls)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vid := workflows.ValidateSecretsWorkflowID(res.ShardID)
	vrun := env.Client.GetWorkflow(ctx, vid, "")
	if err := vrun.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	nres, nrun := notifyRunOf(t, workflows.NotifyValid, latestRun(t, vid))
	if nres.Messages != 1 || nres.Alerts != 1 {
		t.Errorf("alerts of valid secrets %+v, want one message of one", nres)
	}
	recordHistory(t, "validate-secrets-notifies", vid, latestRun(t, vid))
	recordHistory(t, "notify-secrets-valid", nrun.GetID(), nrun.GetRunID())
	var valid []jsonMessage
	for _, d := range rcv.accepted("/hook/") {
		if m := decodeMessage(t, d); m.Kind == "valid" {
			valid = append(valid, m)
		}
	}
	if len(valid) != 1 || len(valid[0].Alerts) != 1 || valid[0].Alerts[0].Path != "conf/valid.env" || valid[0].Alerts[0].Validity != "valid" {
		t.Fatalf("valid messages %+v", valid)
	}
	if again := notifyAgain(t, workflows.NotifyValid, res.ShardID); again.Messages != 0 {
		t.Errorf("a repeated run sent %+v", again)
	}
	// The scan's own alerts ended too (kind new: both secrets).
	if n, _ := notifyRunOf(t, workflows.NotifyNew, scanRun.GetRunID()); n.Alerts != 2 {
		t.Errorf("the scan's alerts %+v", n)
	}
	secrets := []string{ls[0].secret, ls[1].secret, token}
	assertNoSecrets(t, secrets, scanRun.GetID(), vid, nrun.GetID())
}
