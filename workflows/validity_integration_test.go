package workflows_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"gitfleet/activities"
	"gitfleet/internal/devstack/provideremu"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/domain/validity"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/validate"
	"gitfleet/workflows"
)

// The providers' emulator, and the worker's validity activities: off, as
// a worker without GITFLEET_VALIDATE is, but for the tests that turn them
// on (withValidation).
var (
	providers     = provideremu.Start()
	validityActs  = &activities.Validity{}
	validityWaits = &waits{}
)

// setUpValidity gives the harness's worker its validity activities.
func setUpValidity(st *store.Store, mirrors *mirror.Mirrors, scanner *scan.Scanner, log *zap.Logger) *activities.Validity {
	validityActs.Store, validityActs.Mirrors, validityActs.Scanner, validityActs.Log = st, mirrors, scanner, log
	validityActs.Checker = checkerFrom(nil)
	return validityActs
}

// checkerFrom is a checker of the environment env (plus the emulator's
// endpoints, which alone turn nothing on).
func checkerFrom(env map[string]string) *validate.Checker {
	s, err := validate.FromEnv(func(k string) string {
		if strings.HasPrefix(k, validate.EnvEndpointPrefix) {
			return providers.URL()
		}
		return env[k]
	})
	if err != nil {
		panic(err)
	}
	s.Timeout, s.PerMinute = 200*time.Millisecond, 6000
	c, err := validate.New(s)
	if err != nil {
		panic(err)
	}
	c.Sleep = validityWaits.sleep
	return c
}

// withValidation turns the checks on for a test, as GITFLEET_VALIDATE=on
// does for a worker.
func withValidation(t *testing.T) {
	validityActs.Checker = checkerFrom(map[string]string{validate.EnvValidate: "on"})
	workflows.SetValidateAfterScan(true)
	t.Cleanup(func() {
		workflows.SetValidateAfterScan(false)
		validityActs.Checker = checkerFrom(nil)
	})
}

// waits records the waits the checker asks for (Retry-After, backoff,
// pacing) without waiting.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func (w *waits) has(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.d, d)
}

func randomOf(t *testing.T, alphabet string, n int) string {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

const (
	alnum  = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	lowers = "abcdefghijklmnopqrstuvwxyz0123456789"
	digits = "0123456789"
)

// leak is a secret planted in a repository, what the emulator does with
// it, and what its check must record.
type leak struct {
	rule, file, secret, pair string
	valid                    bool
	faults                   []provideremu.Fault
	state                    validity.State
	class                    validity.Class
}

// kinds are the secrets of each validator the emulator answers for (not
// Twilio: its key's secret has no rule, so it stays needs-pair).
var kinds = []struct {
	rule string
	gen  func(t *testing.T) (secret, pair string)
}{
	{"github-pat", func(t *testing.T) (string, string) { return "ghp_" + randomOf(t, alnum, 36), "" }},
	{"gitlab-pat", func(t *testing.T) (string, string) { return "glpat-" + randomOf(t, alnum, 20), "" }},
	{"slack-bot-token", func(t *testing.T) (string, string) {
		return "xoxb-" + randomOf(t, digits, 12) + "-" + randomOf(t, digits, 12) + "-" + randomOf(t, alnum, 24), ""
	}},
	{"stripe-access-token", func(t *testing.T) (string, string) { return "sk_test_" + randomOf(t, alnum, 24), "" }},
	{"npm-access-token", func(t *testing.T) (string, string) { return "npm_" + randomOf(t, lowers, 36), "" }},
	{"openai-api-key", func(t *testing.T) (string, string) {
		return "sk-" + randomOf(t, alnum, 20) + "T3BlbkFJ" + randomOf(t, alnum, 20), ""
	}},
	{"anthropic-api-key", func(t *testing.T) (string, string) { return "sk-ant-api03-" + randomOf(t, alnum, 93) + "AA", "" }},
	{"sendgrid-api-token", func(t *testing.T) (string, string) {
		return "SG." + randomOf(t, lowers, 22) + "." + randomOf(t, lowers, 43), ""
	}},
	{"aws-access-token", func(t *testing.T) (string, string) {
		return "AKIA" + randomOf(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), randomOf(t, alnum+"/+", 40)
	}},
}

// scenarios are what the emulator does with a secret, and what its check
// must record.
var scenarios = []struct {
	name   string
	valid  bool
	faults []provideremu.Fault
	state  validity.State
	class  validity.Class
}{
	{"valid", true, nil, validity.Valid, ""},
	{"invalid", false, nil, validity.Invalid, ""},
	{"rate-limited", true, []provideremu.Fault{provideremu.RateLimited}, validity.Valid, ""},
	{"5xx-then-valid", true, []provideremu.Fault{provideremu.ServerError, provideremu.ServerError}, validity.Valid, ""},
	{"timeout-then-valid", true, []provideremu.Fault{provideremu.Hang}, validity.Valid, ""},
	{"timeouts", true, []provideremu.Fault{provideremu.Hang, provideremu.Hang, provideremu.Hang, provideremu.Hang}, validity.Unknown, validity.ClassTimeout},
	{"redirect", true, []provideremu.Fault{provideremu.Redirect}, validity.Unknown, validity.ClassRedirect},
	{"malformed", true, []provideremu.Fault{provideremu.Malformed}, validity.Unknown, validity.ClassMalformed},
}

// everyScenario is a secret of every kind in every scenario, each in a
// file of its own (<rule>-<scenario>.env).
func everyScenario(t *testing.T) []leak {
	var out []leak
	for _, k := range kinds {
		for _, sc := range scenarios {
			secret, pair := k.gen(t)
			out = append(out, leak{rule: k.rule, file: k.rule + "-" + sc.name + ".env", secret: secret, pair: pair, valid: sc.valid,
				faults: sc.faults, state: sc.state, class: sc.class})
		}
	}
	return out
}

// validitiesByPath are the recorded checks of subject's secrets, by the
// file they were first found in.
func validitiesByPath(t *testing.T, subject string) map[string]checked {
	t.Helper()
	rows, err := env.Store.Pool().Query(context.Background(), `SELECT DISTINCT f.path, v.state, v.error_class, v.facts::text, v.revoked_at IS NOT NULL
		FROM secret_validity v JOIN shards sh ON sh.key = v.subject JOIN scan_scopes sc ON sc.shard_id = sh.id
			JOIN findings f ON f.scope_id = sc.id AND f.rule_id = v.rule_id AND f.secret_hash = v.secret_hash
		WHERE v.subject = $1`, subject)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]checked{}
	for rows.Next() {
		var path string
		var c checked
		if err := rows.Scan(&path, &c.state, &c.class, &c.facts, &c.revoked); err != nil {
			t.Fatal(err)
		}
		out[path] = c
	}
	return out
}

// plant writes a repository holding the leaks and scans it through the
// real ExecuteShard.
func plant(t *testing.T, ls []leak) (target.Target, workflows.ExecuteShardResult, client.WorkflowRun) {
	t.Helper()
	var secrets []repogen.Secret
	for _, l := range ls {
		content := strings.ToUpper(strings.TrimSuffix(l.file, ".env")) + "_TOKEN = \"" + l.secret + "\"\n"
		if l.pair != "" {
			content = "aws_access_key_id = " + l.secret + "\naws_secret_access_key = " + l.pair + "\n"
		}
		secrets = append(secrets, repogen.Secret{Commit: 1, Path: "conf/" + l.file, Content: content})
		if l.valid {
			providers.Valid(l.secret, "alice")
		}
		providers.Script(l.secret, l.faults...)
	}
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 3, FilesPerCommit: 1, BlobSize: 100, Seed: 3, Secrets: secrets}); err != nil {
		t.Fatal(err)
	}
	tg := normalized(t, target.Request{Location: dir})[0]
	res, run := scanToEnd(t, tg)
	if res.Status != shard.Done {
		t.Fatalf("scan: %+v", res)
	}
	return tg, res, run
}

type checked struct {
	state, class, facts string
	revoked             bool
}

// A scan that finds new secrets starts their check, which asks each
// provider (here its emulator) through the real workflow and records
// what it answered, for a secret of every validator (AWS key ids with the
// secret key beside them) in every scenario: valid; invalid; a 429 waited
// out as Retry-After asks;
// 5xx and a timeout asked again; a redirect to another host refused
// (nothing reaches it); a malformed answer and timeouts to the end
// unknown. Then the schedule's run sees a key made invalid: revoked, and resolved so. No
// secret is anywhere: histories, logs, metrics, tables.
func TestValidateSecretsAfterScanAndOnSchedule(t *testing.T) {
	withValidation(t)
	ls := everyScenario(t)
	tg, res, scanRun := plant(t, ls)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vrun := env.Client.GetWorkflow(ctx, workflows.ValidateSecretsWorkflowID(res.ShardID), "")
	var out workflows.ValidateSecretsResult
	if err := vrun.Get(ctx, &out); err != nil {
		t.Fatalf("ValidateSecrets after the scan: %v", err)
	}
	recordHistory(t, "validate-secrets-after-scan", vrun.GetID(), vrun.GetRunID())
	recordHistory(t, "execute-shard-validates", scanRun.GetID(), scanRun.GetRunID())
	got := validitiesByPath(t, tg.Key())
	want := workflows.ValidateSecretsResult{}
	for _, l := range ls {
		c, ok := got["conf/"+l.file]
		switch {
		case !ok:
			t.Errorf("%s: not checked", l.file)
		case c.state != string(l.state) || c.class != string(l.class):
			t.Errorf("%s: %s %s, want %s %s", l.file, c.state, c.class, l.state, l.class)
		}
		switch l.state {
		case validity.Valid:
			want.Valid++
		case validity.Invalid:
			want.Invalid++
		default:
			want.Unknown++
		}
	}
	if out.Checked != len(ls) || out.Valid != want.Valid || out.Invalid != want.Invalid || out.Unknown != want.Unknown {
		t.Errorf("result %+v, want %d checked, %d valid, %d invalid, %d unknown", out, len(ls), want.Valid, want.Invalid, want.Unknown)
	}
	if f := got["conf/github-pat-valid.env"].facts; !strings.Contains(f, `"account": "alice"`) || !strings.Contains(f, "read:org") {
		t.Errorf("github facts %s", f)
	}
	if !validityWaits.has(provideremu.RetryAfterSeconds * time.Second) {
		t.Errorf("Retry-After not honoured: waits %v", validityWaits.d)
	}
	if providers.Elsewhere() != 0 {
		t.Errorf("%d requests followed the redirect to another host", providers.Elsewhere())
	}

	// The key is revoked at the provider; the daily schedule's run sees it.
	providers.Revoke(ls[0].secret) // github-pat-valid.env
	if err := workflows.EnsureSchedules(ctx, env.Client, workflows.ScheduleConfig{SweepEvery: 240 * time.Hour, CleanupEvery: 240 * time.Hour,
		RevalidateEvery: 240 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	trigger(t, workflows.SecretRevalidationScheduleID)
	got = validitiesByPath(t, tg.Key())
	if c := got["conf/github-pat-valid.env"]; c.state != "invalid" || !c.revoked {
		t.Errorf("after revocation: %+v, want invalid and revoked", c)
	}
	if c := got["conf/aws-access-token-valid.env"]; c.state != "valid" || c.revoked {
		t.Errorf("aws after the schedule: %+v", c)
	}
	if c := got["conf/github-pat-invalid.env"]; c.state != "invalid" || c.revoked {
		t.Errorf("a key never valid: %+v, want invalid, not revoked", c)
	}
	var state, actor, comment string
	if err := env.Store.Pool().QueryRow(ctx, `SELECT state, actor, comment FROM secret_states WHERE subject = $1 AND rule_id = 'github-pat'
		AND secret_hash = (SELECT secret_hash FROM findings f JOIN scan_scopes sc ON sc.id = f.scope_id JOIN shards sh ON sh.id = sc.shard_id
			WHERE sh.key = $1 AND f.path = 'conf/github-pat-valid.env')`,
		tg.Key()).Scan(&state, &actor, &comment); err != nil {
		t.Fatalf("triage of the revoked key: %v", err)
	}
	if state != store.StateRevoked || actor != store.ValidityActor || !strings.Contains(comment, "resolved automatically") {
		t.Errorf("triage %s by %s: %s", state, actor, comment)
	}

	var secrets []string
	for _, l := range ls {
		secrets = append(secrets, l.secret)
		if l.pair != "" {
			secrets = append(secrets, l.pair)
		}
	}
	assertNoSecrets(t, secrets, scanRun.GetID(), vrun.GetID())
}

// assertNoSecrets fails when a secret is in the histories of the runs of
// workflow ids (and of every ValidateSecrets run), the worker's logs, the
// metrics, or any column of any table.
func assertNoSecrets(t *testing.T, secrets []string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	check := func(where, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds a secret (%s…)", where, s[:4])
			}
		}
	}
	runs := map[string][]string{}
	for _, id := range ids {
		runs[id] = []string{""}
	}
	list, err := env.Client.ListWorkflow(ctx, listValidateRuns())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.GetExecutions() {
		runs[e.GetExecution().GetWorkflowId()] = append(runs[e.GetExecution().GetWorkflowId()], e.GetExecution().GetRunId())
	}
	histories := 0
	for id, rs := range runs {
		for _, r := range rs {
			it := env.Client.GetWorkflowHistory(ctx, id, r, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			var all strings.Builder
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				all.WriteString(e.String())
			}
			histories++
			check("history of "+id+"/"+r, all.String())
		}
	}
	if histories < 3 {
		t.Errorf("only %d histories searched", histories)
	}
	logs := workerLogs.String()
	check("worker logs", logs)
	if !strings.Contains(logs, "secrets checked") {
		t.Error("the worker logs do not show the checks: not the logs searched")
	}
	var m strings.Builder
	if err := metrics.WriteText(&m); err != nil {
		t.Fatal(err)
	}
	check("metrics", m.String())
	if !strings.Contains(m.String(), "gitfleet_validity_requests_total") {
		t.Error("the metrics do not count the checks")
	}
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
	if !slices.Contains(tables, "secret_validity") {
		t.Fatalf("tables %v", tables)
	}
	for _, tb := range tables {
		for _, s := range secrets {
			var n int
			if err := env.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM "`+tb+`" t WHERE strpos(t::text, $1) > 0`, s).Scan(&n); err != nil {
				t.Fatalf("table %s: %v", tb, err)
			}
			if n > 0 {
				t.Errorf("table %s: %d rows hold a secret (%s…)", tb, n, s[:4])
			}
		}
	}
}

func listValidateRuns() *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: env.Namespace, Query: "WorkflowType = 'ValidateSecrets'", PageSize: 1000}
}

// Off by default: a scan finding a secret its provider would take starts
// no check, a check asked for sends nothing, and the emulator hears no
// request.
func TestValidationOffSendsNothing(t *testing.T) {
	before := providers.Requests()
	l := everyScenario(t)[0]
	tg, res, scanRun := plant(t, []leak{l})
	ctx := context.Background()
	if _, err := env.Client.DescribeWorkflowExecution(ctx, workflows.ValidateSecretsWorkflowID(res.ShardID), ""); err == nil {
		t.Error("the scan started a check while checks are off")
	}
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("validate-off-%d", res.ShardID), TaskQueue: workflows.TaskQueue},
		workflows.ValidateSecrets, workflows.ValidateSecretsInput{ShardID: res.ShardID, Trigger: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.ValidateSecretsResult
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Enabled || out.Checked != 0 {
		t.Errorf("result %+v, want off and nothing checked", out)
	}
	if n := providers.Requests() - before; n != 0 {
		t.Errorf("%d requests reached the providers' emulator while off", n)
	}
	if got := validitiesByPath(t, tg.Key()); len(got) != 0 {
		t.Errorf("checks recorded while off: %v", got)
	}
	it := env.Client.GetWorkflowHistory(ctx, scanRun.GetID(), scanRun.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil {
			t.Error("the scan started a child while checks are off")
		}
	}
}

// The schedule's run over 100,000 secrets stays bounded: it continues as
// new after its pages (here a page of one secret, one page a run), and
// the chain's result counts every run.
func TestValidateSecretsContinuesAsNew(t *testing.T) {
	withValidation(t)
	ls := everyScenario(t)[:3]
	_, res, _ := plant(t, ls)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Client.GetWorkflow(ctx, workflows.ValidateSecretsWorkflowID(res.ShardID), "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("validate-chain-%d", res.ShardID), TaskQueue: workflows.TaskQueue},
		workflows.ValidateSecrets, workflows.ValidateSecretsInput{ShardID: res.ShardID, Trigger: "manual", PageSize: 1, PagesPerRun: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.ValidateSecretsResult
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Checked != 3 || out.Runs != 4 {
		t.Errorf("result %+v, want 3 checked over 4 runs (the last finds the page empty)", out)
	}
}
