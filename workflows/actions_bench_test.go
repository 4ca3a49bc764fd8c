package workflows_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/devstack/actions"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// heartbeatRPCs are the frontend methods a heartbeat is sent with.
var heartbeatRPCs = []string{"RecordActivityTaskHeartbeat", "RecordActivityTaskHeartbeatById"}

// heartbeats is how many heartbeats the test process's workers have sent.
func heartbeats() int64 {
	var n int64
	for _, m := range heartbeatRPCs {
		n += env.RPCs(m)
	}
	return n
}

// measured is an operation's cost: the actions of its runs' real
// histories (children and continued runs included), with the heartbeats
// the workers sent meanwhile, which no history holds.
func measured(b *testing.B, run actions.Run, beatsBefore int64) actions.Count {
	b.Helper()
	c, err := actions.Of(context.Background(), env.Client, run.WorkflowID, run.RunID)
	if err != nil {
		b.Fatal(err)
	}
	c.Heartbeats = heartbeats() - beatsBefore
	return c
}

type actionRow struct {
	op string
	c  actions.Count
	// api and git are the forge's requests meanwhile: the Git host's load
	// (-1: not measured).
	api, git int64
}

// printActions prints a table of what each operation cost.
func printActions(title string, rows []actionRow) {
	fmt.Printf("\n%s\n", title)
	fmt.Printf("  %-40s %8s %9s %10s %10s %6s %7s %7s %5s %8s %7s %7s %7s\n", "", "actions", "workflows", "activities", "heartbeats",
		"timers", "signals", "upserts", "memos", "versions", "events", "API req", "Git req")
	for _, r := range rows {
		c := r.c
		fmt.Printf("  %-40s %8d %9d %10d %10d %6d %7d %7d %5d %8d %7d %7s %7s\n", r.op, c.Billable(), c.Workflows, c.Activities+c.LocalActivities,
			c.Heartbeats, c.Timers, c.SignalsReceived+c.SignalsSent, c.Upserts, c.Memos, c.Versions, c.Events, count(r.api), count(r.git))
	}
	fmt.Printf("  actions: what Temporal Cloud bills (starts of workflows, children and continued runs; activity attempts;\n" +
		"  heartbeats; timers; signals; search-attribute and memo upserts; side effects); versions are stored, not billed;\n" +
		"  events: the history a self-hosted cluster stores.\n\n")
}

func count(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// BenchmarkActions prints the Temporal actions of the operations a fleet
// repeats — a repository's first collection, an unchanged re-collection,
// a re-collection with one new commit, a snapshot propagated to 10
// runners — counted from their real histories (architecture, "Capacity").
// The sweep's are printed by BenchmarkSweep.
func BenchmarkActions(b *testing.B) {
	ctx := context.Background()
	owner := benchRepo(b, 10)
	r := id(owner, "app")
	queue := productionWorker(b, "gitfleet-actions-"+owner)
	// trigger: "manual" is a `starter collect`; the sweep starts only
	// repositories whose refs moved.
	collectOnce := func(op, trigger string, want identity.Case) actionRow {
		before, api, git := heartbeats(), fg.APIRequests(), fg.GitRequests()
		opts := workflows.CollectOptions(r)
		opts.TaskQueue = queue
		run, err := env.Client.ExecuteWorkflow(ctx, opts, workflows.Collect, workflows.CollectInput{Repo: r, Trigger: trigger})
		if err != nil {
			b.Fatal(err)
		}
		first := actions.Run{WorkflowID: run.GetID(), RunID: run.GetRunID()}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var res workflows.CollectResult
		if err := run.Get(wctx, &res); err != nil || res.Case != want {
			b.Fatalf("collect: %+v, %v; want case %s", res, err, want)
		}
		return actionRow{op, measured(b, first, before), fg.APIRequests() - api, fg.GitRequests() - git}
	}
	var rows []actionRow
	b.ResetTimer()
	rows = append(rows, collectOnce("first collection (case A)", "manual", identity.CaseNew))
	rows = append(rows, collectOnce("unchanged re-collection (starter collect)", "manual", identity.CaseSame))
	if _, err := fg.Commit(owner, "app", "main", map[string]string{"new.txt": "one more\n"}, "one more"); err != nil {
		b.Fatal(err)
	}
	rows = append(rows, collectOnce("re-collection, one new commit (sweep)", "sweep", identity.CaseSame))
	rows = append(rows, actionRow{"snapshot to 10 runners", snapshotActions(b, 10), -1, -1})
	b.StopTimer()
	printActions(fmt.Sprintf("Temporal actions per operation (one repository of %d commits; real histories, children included)", 10), rows)
	for _, row := range rows {
		b.ReportMetric(float64(row.c.Billable()), "actions/"+metricName(row.op))
	}
}

// productionWorker starts a worker on queue (and its Git queue) as the
// worker binary registers it: the scanner's rules named (Policy), so that
// a re-collection whose refs and rules are unchanged skips its scan. The
// main harness leaves Policy unset, and its tests see every scan.
func productionWorker(b *testing.B, queue string) string {
	b.Helper()
	scanner, err := activities.NewScanner("", testenv.FindingKey)
	if err != nil {
		b.Fatal(err)
	}
	mirrors, err := mirror.New(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	mirrors.SetCredentials(creds)
	stop, err := env.StartWorker(queue, func(w worker.Registry) {
		workflows.Register(w)
		w.RegisterActivity(&activities.Activities{Store: env.Store, Hosts: hosts, Mirrors: mirrors, Creds: creds, Policy: scanner.Policy()})
		w.RegisterActivity(&activities.Shards{Store: env.Store, Mirrors: mirrors, Scanner: scanner})
	}, workflows.GitTaskQueue(queue))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	return queue
}

// snapshotActions propagates a 3-layer image to n runners of the test
// process and returns what the propagation cost.
func snapshotActions(b *testing.B, n int) actions.Count {
	b.Helper()
	reg := startRegistry(b, ociregistry.Options{})
	ref, _, _ := pushRandom(b, reg, "bench/actions", 7, 3, 1<<20)
	for i := range n {
		startRunner(b, fmt.Sprintf("actions-%d-%d", os.Getpid(), i), runnerOpts{})
	}
	name := snapName("actions")
	before := heartbeats()
	res, err := propagate(b, snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: ref}, fast)
	if err != nil || res.Ready != n {
		b.Fatalf("propagation to %d runners: %+v, %v", n, res, err)
	}
	c, err := actions.Of(context.Background(), env.Client, workflows.PropagateSnapshotWorkflowID(name), "")
	if err != nil {
		b.Fatal(err)
	}
	c.Heartbeats = heartbeats() - before
	return c
}

// metricName makes an operation's name a benchmark unit: no spaces.
func metricName(op string) string {
	out := []rune{}
	for _, r := range strings.ToLower(op) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			out = append(out, r)
		case len(out) > 0 && out[len(out)-1] != '-':
			out = append(out, '-')
		}
	}
	for len(out) > 0 && out[len(out)-1] == '-' {
		out = out[:len(out)-1]
	}
	return string(out)
}
