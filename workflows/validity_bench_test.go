package workflows_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/validate"
	"gitfleet/workflows"
)

// BenchmarkValidateSecrets checks 150 secrets of three providers (20
// each) through the real workflow against the emulator, under the
// limits a worker has (2 in flight, 120 a minute per provider), with real
// waits: the checks per second per provider (at most PerMinute/60), and
// the Temporal actions per checked secret (workflow starts and
// continuations, activities scheduled, markers).
func BenchmarkValidateSecrets(b *testing.B) {
	const perProvider = 20
	t := &testing.T{}
	kinds := []struct {
		provider, prefix, alphabet string
		n                          int
	}{
		{"github", "ghp_", alnum, 36}, {"gitlab", "glpat-", alnum, 20}, {"npm", "npm_", lowers, 36},
	}
	var secrets []repogen.Secret
	for _, k := range kinds {
		for i := range perProvider {
			s := k.prefix + randomOf(t, k.alphabet, k.n)
			providers.Valid(s, "bench")
			secrets = append(secrets, repogen.Secret{Commit: 1, Path: fmt.Sprintf("%s/%d.env", k.provider, i), Content: "TOKEN = \"" + s + "\"\n"})
		}
	}
	dir := filepath.Join(b.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 3, FilesPerCommit: 1, BlobSize: 100, Seed: 5, Secrets: secrets}); err != nil {
		b.Fatal(err)
	}
	tg := normalized(t, target.Request{Location: dir})[0]
	res, _ := scanToEnd(t, tg)

	const perMinute = 120
	s, err := validate.FromEnv(func(k string) string {
		if k == validate.EnvValidate {
			return "on"
		}
		if len(k) > len(validate.EnvEndpointPrefix) && k[:len(validate.EnvEndpointPrefix)] == validate.EnvEndpointPrefix {
			return providers.URL()
		}
		return ""
	})
	if err != nil {
		b.Fatal(err)
	}
	s.PerMinute, s.InFlight = perMinute, 2
	c, err := validate.New(s)
	if err != nil {
		b.Fatal(err)
	}
	old := validityActs.Checker
	validityActs.Checker = c
	defer func() { validityActs.Checker = old }()

	before := map[string]int{}
	for _, k := range kinds {
		before[k.provider] = providers.Requests()
	}
	ctx := context.Background()
	start := time.Now()
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("validate-bench-%d", res.ShardID), TaskQueue: workflows.TaskQueue},
		workflows.ValidateSecrets, workflows.ValidateSecretsInput{ShardID: res.ShardID, Trigger: "manual", PageSize: 100})
	if err != nil {
		b.Fatal(err)
	}
	var out workflows.ValidateSecretsResult
	if err := run.Get(ctx, &out); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if out.Checked != perProvider*len(kinds) || out.Valid != out.Checked {
		b.Fatalf("result %+v", out)
	}
	// Every run of the chain: follow the continuations from the first.
	actions, runs := 0, 0
	for id, runID := run.GetID(), run.GetRunID(); runID != ""; runs++ {
		it := env.Client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_MARKER_RECORDED:
				actions++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				next = e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
		}
		runID = next
	}
	rate := float64(perProvider) / took.Seconds()
	b.ReportMetric(rate, "checks/s/provider")
	b.ReportMetric(float64(actions)/float64(out.Checked), "actions/secret")
	fmt.Printf("VALIDITY_BENCH_FIGURES: %d secrets of %d providers in %s over %d runs: %.2f checks/s per provider (limit %d/min = %.2f/s, 2 in flight); %d actions, %.3f per checked secret\n",
		out.Checked, len(kinds), took.Round(time.Millisecond), runs, rate, perMinute, float64(perMinute)/60, actions, float64(actions)/float64(out.Checked))
	if rate > float64(perMinute)/60*1.05 {
		b.Errorf("%.2f checks/s per provider, over the limit %d/min", rate, perMinute)
	}
}
