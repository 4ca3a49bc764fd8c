package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/actions"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
	"gitfleet/internal/infra/webhook"
	"gitfleet/workflows"
)

// Sizes of BenchmarkPushToFinding, overridable from the environment
// (issue 32 asks for 100 pushes/s to 1,000 repositories for a minute; the
// defaults fit a 2-core machine in about five minutes).
const (
	envPushSingle   = "GITFLEET_BENCH_PUSHES"       // sequential single pushes (20)
	envPushRepos    = "GITFLEET_BENCH_PUSH_REPOS"   // repositories of the bursts (50)
	envPushRate     = "GITFLEET_BENCH_PUSH_RATE"    // pushes per second in the bursts (20)
	envPushDuration = "GITFLEET_BENCH_PUSH_SECONDS" // length of the burst, seconds (30)
	envKillDuration = "GITFLEET_BENCH_KILL_SECONDS" // length of the burst the receiver is killed in (20)
)

const pushHookSecret = "push bench webhook secret"

// BenchmarkPushToFinding measures issue 32's push-time detection on the
// real stack: a forge of its own whose GitHub App delivers webhooks to a
// real worker process (the receiver), Temporal, PostgreSQL. Each push
// plants a distinct secret in a new file; a push is found when its
// commit's finding is in the store. Phases:
//
//   - single pushes, one after another: latency from the forge's commit to
//     the finding read the way `starter findings` reads it (the shard's
//     latest scope, store.Secrets), p50 and p99 beside the goal;
//     the Temporal actions per push, from the Collect runs' histories;
//   - a burst of pushes to many repositories: every pushed secret found
//     (no delivery lost), the burst's p50/p99, collections per repository;
//   - a burst during which the receiver is SIGKILLed and restarted on the
//     same address, then RecoverDeliveries: every secret found, no blob
//     scanned twice (the shards' receipts against the blobs pushed);
//   - forged, replayed and oversized deliveries sent to the receiver:
//     401, 200, 413, and no collection started.
//
// Invariants are asserted, times are printed, never asserted.
func BenchmarkPushToFinding(b *testing.B) {
	ctx := context.Background()
	singles := envInt(b, envPushSingle, 20)
	nRepos := envInt(b, envPushRepos, 50)
	rate := envInt(b, envPushRate, 20)
	burstFor := time.Duration(envInt(b, envPushDuration, 30)) * time.Second
	killFor := time.Duration(envInt(b, envKillDuration, 20)) * time.Second

	pf, err := forge.Start(forge.Options{Dir: filepath.Join(b.TempDir(), "forge"), Token: forgeToken})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pf.Close() })
	app, err := pf.CreateApp("gitfleet-push-bench")
	if err != nil {
		b.Fatal(err)
	}
	keyFile := filepath.Join(b.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, app.KeyPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	const owner = "pushbench"
	names := []string{"single"}
	for i := range nRepos {
		names = append(names, fmt.Sprintf("r%04d", i))
	}
	pb := &pushBench{b: b, fg: pf, owner: owner, pushedAt: map[string]time.Time{}, seenAt: map[string]time.Time{},
		pushes: map[string][]pushed{}}
	for _, n := range names {
		if _, err := pf.CreateRepo(owner, n); err != nil {
			b.Fatal(err)
		}
		if _, err := pf.Commit(owner, n, "main", map[string]string{"README": "bench " + n + "\n"}, "first"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pf.InstallApp(app.ID, owner); err != nil {
		b.Fatal(err)
	}

	addr := freeAddr(b)
	mirrors := filepath.Join(b.TempDir(), "mirrors")
	const workerID = "push-bench"
	start := func() *workerProc {
		w := startWorker(b, config.EnvWorkerID+"="+workerID, config.EnvMirrorDir+"="+mirrors, config.EnvLogLevel+"=info",
			vcs.EnvAPIURL+"="+pf.APIURL(), vcs.EnvAppID+"="+strconv.FormatInt(app.ID, 10), vcs.EnvAppKeyFile+"="+keyFile,
			config.EnvWebhookAddr+"="+addr, config.EnvWebhookSecret+"="+pushHookSecret)
		w.waitLog(b, 0, `"webhookAddr"`, time.Minute)
		return w
	}
	w := start()

	// Every repository is collected once before the App's webhook points
	// at the worker: a push is to a repository gitfleet collects.
	setupStart := time.Now()
	var runs []client.WorkflowRun
	for _, n := range names {
		run, err := env.Client.ExecuteWorkflow(ctx, workflows.CollectOptions(pb.repo(n)), workflows.Collect,
			workflows.CollectInput{Repo: pb.repo(n), Trigger: workflows.TriggerManual})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		var res workflows.CollectResult
		err := run.Get(wctx, &res)
		cancel()
		if err != nil || res.Scan == nil || res.Scan.Receipt == nil {
			b.Fatalf("first collection of %s: %+v, %v", run.GetID(), res, err)
		}
	}
	setupTook := time.Since(setupStart)
	if err := pf.SetAppWebhook(app.ID, "http://"+addr+"/webhook", pushHookSecret); err != nil {
		b.Fatal(err)
	}
	stopPoll := pb.pollFindings()
	defer stopPoll()
	b.ResetTimer()

	// Single pushes, one after another, each once the last is collected.
	single := pb.repo("single")
	singleStart := time.Now()
	var singleLat []time.Duration
	for i := range singles {
		sha := pb.push("single", fmt.Sprintf("S%04d", i))
		lat := pb.waitQueryable("single", sha, 2*time.Minute)
		singleLat = append(singleLat, lat)
		pb.waitIdle([]string{"single"}, 2*time.Minute)
	}
	singleRuns := pb.collectRuns(ctx, singleStart)[workflows.CollectWorkflowID(single)]
	var singleCost actions.Count
	for _, r := range singleRuns {
		c, err := runActions(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		singleCost = singleCost.Add(c)
	}

	// The burst: rate pushes a second, round robin over the repositories.
	// A delivery the receiver did not take (answered 503 under load) is
	// recovered as the schedule would, and counted.
	burst := names[1:]
	burstStart := time.Now()
	burstShas, achieved := pb.burst(burst, rate, burstFor)()
	if err := pf.WaitHooks(ctx); err != nil {
		b.Fatal(err)
	}
	burstFailed := pf.HookCounts().Failed
	burstRec := pb.recover(ctx)
	burstAll := pb.waitAllSeen(burstShas, 10*time.Minute)
	pb.waitIdle(burst, 10*time.Minute)
	burstRuns := pb.collectRuns(ctx, burstStart)
	pb.checkFound(ctx, burst)
	burstLat := pb.latencies(burstShas)

	// The burst the receiver is killed in: SIGKILLed a third of the way,
	// started again on the same address two thirds of the way (the pushes
	// go on meanwhile), then the deliveries it missed are recovered
	// through the App's deliveries API.
	failedBefore := pf.HookCounts().Failed
	killStart := time.Now()
	wait := pb.burst(burst, rate, killFor)
	// A benchmark's schedule, not a wait for work: the kill and the
	// restart fall at fixed points of the burst's wall time, whatever the
	// load; the invariants below hold wherever they fall.
	time.Sleep(time.Until(killStart.Add(killFor / 3)))
	w.signal(syscall.SIGKILL)
	<-w.proc.Done()
	killedAt := time.Since(killStart)
	time.Sleep(time.Until(killStart.Add(2 * killFor / 3)))
	w = start()
	backAt := time.Since(killStart)
	killShas, killRate := wait()
	if err := pf.WaitHooks(ctx); err != nil {
		b.Fatal(err)
	}
	failedDown := pf.HookCounts().Failed - failedBefore
	rec := pb.recover(ctx)
	killAll := pb.waitAllSeen(killShas, 10*time.Minute)
	pb.waitIdle(burst, 10*time.Minute)
	pb.checkFound(ctx, append([]string{"single"}, burst...))
	scanned, blobs, twice := pb.checkScannedOnce(ctx, append([]string{"single"}, burst...))
	killLat := pb.latencies(killShas)

	// Forged, replayed and oversized deliveries, sent to the receiver.
	refused := pb.refusals(ctx, "http://"+addr+"/webhook")
	b.StopTimer()

	fmt.Printf("\nBenchmarkPushToFinding: a real worker receiving the forge's GitHub App webhooks (%s)\n", startSettings(w.logs()))
	fmt.Printf("  setup: %d repositories created and collected once in %s\n", len(names), setupTook.Round(100*time.Millisecond))
	fmt.Printf("  single push, %d one after another (%s): push to finding queryable p50 %s (goal ≤ 5 s), p99 %s (goal ≤ 30 s), max %s\n",
		singles, envPushSingle, secs(pct(singleLat, 50)), secs(pct(singleLat, 99)), secs(pct(singleLat, 100)))
	fmt.Printf("    Temporal per push: %d Collect runs for %d pushes; %.1f actions, %.1f workflows, %.1f activities, %.1f history events per push (heartbeats not counted)\n",
		len(singleRuns), singles, per(singleCost.Billable(), singles), per(int64(singleCost.Workflows), singles),
		per(int64(singleCost.Activities+singleCost.LocalActivities), singles), per(int64(singleCost.Events), singles))
	fmt.Printf("  burst: %d pushes to %d repositories in %s (%.1f/s, %d/s asked; %s, %s, %s): all %d secrets found %s after the burst began;\n",
		len(burstShas), len(burst), burstFor, achieved, rate, envPushRepos, envPushRate, envPushDuration, len(burstShas), burstAll.Sub(burstStart).Round(100*time.Millisecond))
	fmt.Printf("    %d deliveries not taken (answered other than 2xx), recovered by RecoverDeliveries: %s\n", burstFailed, burstRec)
	fmt.Printf("    push to finding p50 %s, p99 %s, max %s; %s\n", secs(pct(burstLat, 50)), secs(pct(burstLat, 99)), secs(pct(burstLat, 100)),
		collectionsPerRepo(burstRuns, burst, pb, burstShas))
	fmt.Printf("  receiver SIGKILLed during a burst of %d pushes in %s (%.1f/s; %s), at %s, listening again at %s:\n",
		len(killShas), killFor, killRate, envKillDuration, killedAt.Round(100*time.Millisecond), backAt.Round(100*time.Millisecond))
	fmt.Printf("    %d deliveries failed; recovered by RecoverDeliveries: %s\n", failedDown, rec)
	fmt.Printf("    all %d secrets found %s after that burst began (p50 %s, p99 %s); blobs scanned %d for %d blobs pushed (%d repositories scanned a blob twice)\n",
		len(killShas), killAll.Sub(killStart).Round(100*time.Millisecond), secs(pct(killLat, 50)), secs(pct(killLat, 99)), scanned, blobs, twice)
	fmt.Printf("  refused: %s\n\n", refused)
	b.ReportMetric(pct(singleLat, 50).Seconds(), "single-p50-s")
	b.ReportMetric(pct(singleLat, 99).Seconds(), "single-p99-s")
	b.ReportMetric(pct(burstLat, 50).Seconds(), "burst-p50-s")
	b.ReportMetric(pct(burstLat, 99).Seconds(), "burst-p99-s")
}

// pushBench is the state of BenchmarkPushToFinding.
type pushBench struct {
	b     *testing.B
	fg    *forge.Forge
	owner string

	mu       sync.Mutex
	pushedAt map[string]time.Time // by commit: when the forge had made it
	seenAt   map[string]time.Time // by commit: its finding first read
	pushes   map[string][]pushed  // by repository name
}

type pushed struct{ sha, path string }

func (pb *pushBench) repo(name string) repoid.ID {
	return repoid.ID{Host: pb.fg.Host(), Owner: pb.owner, Name: name}
}

// push commits a new file holding a distinct fake token to the
// repository's main branch; the forge's App delivers the push.
func (pb *pushBench) push(name, tag string) string {
	path := "push/" + tag + ".env"
	sha, err := pb.fg.Commit(pb.owner, name, "main", map[string]string{path: "GITHUB_TOKEN=" + gittest.FakePAT(tag) + "\n"}, "push "+tag)
	if err != nil {
		pb.b.Error(err)
		return ""
	}
	// From the push landed: the forge's own time writing the commit
	// (git processes, on a loaded machine) is not gitfleet's.
	t0 := time.Now()
	pb.mu.Lock()
	pb.pushedAt[sha] = t0
	pb.pushes[name] = append(pb.pushes[name], pushed{sha, path})
	pb.mu.Unlock()
	return sha
}

// waitQueryable polls, every 50 ms, the query `starter findings <repo>`
// reads (the shard's latest scope, store.Secrets) until the commit's
// secret is listed, and returns how long after the push that was.
func (pb *pushBench) waitQueryable(name, sha string, within time.Duration) time.Duration {
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		if found, err := pb.listed(ctx, name, map[string]bool{sha: true}); err != nil {
			pb.b.Fatal(err)
		} else if found[sha] {
			now := time.Now()
			pb.mu.Lock()
			defer pb.mu.Unlock()
			return now.Sub(pb.pushedAt[sha])
		}
		if time.Now().After(deadline) {
			pb.b.Fatalf("%s: the secret pushed in %s not found within %s", name, sha, within)
		}
		// Polling is the measurement: "queryable by starter findings" has
		// no event to wait on, and 50 ms is the latency's resolution.
		time.Sleep(50 * time.Millisecond)
	}
}

// listed reads a repository's secrets as `starter findings` does and says
// which of the commits first hold one.
func (pb *pushBench) listed(ctx context.Context, name string, want map[string]bool) (map[string]bool, error) {
	found := map[string]bool{}
	cb, err := env.Store.FindCodebase(ctx, pb.repo(name))
	if err != nil || cb == nil {
		return found, err
	}
	sh, err := env.Store.ShardByKey(ctx, shard.CodebaseKey(cb.ID))
	if err != nil || sh == nil {
		return found, err
	}
	l, err := listFindingsOf(ctx, sh.ID)
	if err != nil {
		return found, err
	}
	for _, s := range l {
		if want[s] {
			found[s] = true
		}
	}
	return found, nil
}

// listFindingsOf is every secret's first commit in the shard's latest
// scope, read a page at a time as `starter findings --all` reads them.
func listFindingsOf(ctx context.Context, shardID int64) ([]string, error) {
	scope, err := env.Store.LatestScope(ctx, shardID)
	if err != nil || scope == 0 {
		return nil, err
	}
	var out []string
	var after int64
	for {
		p, err := env.Store.Secrets(ctx, scope, store.Page{After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, s := range p.Secrets {
			out = append(out, s.Commit)
		}
		if len(p.Secrets) < 1000 {
			return out, nil
		}
		after = p.Secrets[len(p.Secrets)-1].Cursor
	}
}

// pollFindings notes, every 100 ms, when each pushed commit's first
// finding is in the findings table: the burst's latencies (reading every
// repository the way `starter findings` does that often would load the
// machine it measures; checkFound reads them that way in the end). It
// asks for the commits not seen yet by name: findings' ids are not
// committed in their order, so a watermark on them would miss some.
func (pb *pushBench) pollFindings() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			pb.mu.Lock()
			var pending []string
			for sha := range pb.pushedAt {
				if _, ok := pb.seenAt[sha]; !ok {
					pending = append(pending, sha)
				}
			}
			pb.mu.Unlock()
			if len(pending) > 0 {
				rows, err := env.Store.Pool().Query(ctx, `SELECT DISTINCT commit_id FROM findings WHERE commit_id = ANY($1)`, pending)
				if err == nil {
					now := time.Now()
					for rows.Next() {
						var sha string
						if rows.Scan(&sha) == nil {
							pb.mu.Lock()
							pb.seenAt[sha] = now
							pb.mu.Unlock()
						}
					}
					rows.Close()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// burst pushes rate commits a second for d, round robin over names, each
// from its own goroutine (at most 64 at once), in the background. wait
// returns the commits made and the rate achieved once every push ended.
func (pb *pushBench) burst(names []string, rate int, d time.Duration) (wait func() ([]string, float64)) {
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var shas []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem := make(chan struct{}, 64)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for seq := 0; ; seq++ {
			now := <-tick.C
			if now.Sub(start) >= d {
				return
			}
			name, tag := names[seq%len(names)], fmt.Sprintf("B%06d%05d", start.UnixNano()/1e3%1e6, seq)
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if sha := pb.push(name, tag); sha != "" {
					mu.Lock()
					shas = append(shas, sha)
					mu.Unlock()
				}
			}()
		}
	}()
	return func() ([]string, float64) {
		wg.Wait()
		return shas, float64(len(shas)) / time.Since(start).Seconds()
	}
}

// recover runs RecoverDeliveries (deliveries settle at once) until a run
// redelivers nothing, waiting for the redeliveries between runs, and says
// what it recovered.
func (pb *pushBench) recover(ctx context.Context) string {
	var total workflows.RecoverDeliveriesResult
	runs := 0
	for {
		runs++
		run, err := env.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("push-bench-recovery-%d-%d", time.Now().UnixNano(), runs), TaskQueue: workflows.TaskQueue},
			workflows.RecoverDeliveries, workflows.RecoverDeliveriesInput{Settle: time.Nanosecond})
		if err != nil {
			pb.b.Fatal(err)
		}
		var r workflows.RecoverDeliveriesResult
		if err := run.Get(ctx, &r); err != nil {
			pb.b.Fatal(err)
		}
		if err := pb.fg.WaitHooks(ctx); err != nil {
			pb.b.Fatal(err)
		}
		if runs == 1 {
			total = r
		}
		if runs > 1 {
			total.Redelivered += r.Redelivered
		}
		if r.Redelivered == 0 || runs >= 30 {
			total.Pending, total.GaveUp = r.Pending, r.GaveUp
			if total.Pending > 0 || total.GaveUp > 0 {
				pb.b.Errorf("recovery left deliveries behind: %+v", r)
			}
			return fmt.Sprintf("%d runs, %d events listed (%d taken at first), %d redelivered, %d pending, %d given up",
				runs, total.Events, total.Delivered, total.Redelivered, total.Pending, total.GaveUp)
		}
	}
}

// waitAllSeen waits until every commit's finding has been noted and
// returns when the last one was.
func (pb *pushBench) waitAllSeen(shas []string, within time.Duration) time.Time {
	deadline := time.Now().Add(within)
	for {
		pb.mu.Lock()
		var missing []string
		var last time.Time
		for _, s := range shas {
			if t, ok := pb.seenAt[s]; !ok {
				missing = append(missing, s)
			} else if t.After(last) {
				last = t
			}
		}
		pb.mu.Unlock()
		if len(missing) == 0 {
			return last
		}
		if time.Now().After(deadline) {
			pb.b.Fatalf("%d of %d pushed secrets not found within %s (a delivery lost?), e.g. %s", len(missing), len(shas), within, missing[0])
		}
		// Polled as starter findings reads (no event to wait on); the
		// deadline, not the interval, decides failure.
		time.Sleep(200 * time.Millisecond)
	}
}

// latencies are the pushes' times from push to finding.
func (pb *pushBench) latencies(shas []string) []time.Duration {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	var out []time.Duration
	for _, s := range shas {
		out = append(out, pb.seenAt[s].Sub(pb.pushedAt[s]))
	}
	return out
}

// waitIdle waits until no collection of the repositories runs.
func (pb *pushBench) waitIdle(names []string, within time.Duration) {
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for _, n := range names {
		for {
			d, err := env.Client.DescribeWorkflowExecution(ctx, workflows.CollectWorkflowID(pb.repo(n)), "")
			if err != nil {
				pb.b.Fatal(err)
			}
			st := d.GetWorkflowExecutionInfo().GetStatus()
			if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				if st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
					pb.b.Errorf("%s: the latest collection ended %s", n, st)
				}
				break
			}
			if time.Now().After(deadline) {
				pb.b.Fatalf("%s: still collecting after %s", n, within)
			}
			// The poll's interval only; the deadline decides failure.
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// checkFound reads every repository's secrets the way `starter findings`
// does: each pushed commit's secret is listed.
func (pb *pushBench) checkFound(ctx context.Context, names []string) {
	for _, n := range names {
		pb.mu.Lock()
		want := map[string]bool{}
		for _, p := range pb.pushes[n] {
			want[p.sha] = true
		}
		pb.mu.Unlock()
		found, err := pb.listed(ctx, n, want)
		if err != nil {
			pb.b.Fatal(err)
		}
		if len(found) != len(want) {
			pb.b.Errorf("%s: %d of the %d pushed secrets listed by starter findings' query", n, len(found), len(want))
		}
	}
}

// checkScannedOnce compares, per repository, the blobs its scans report
// (the shard's receipts) with the blobs pushed to it (its first commit's
// README and one file per push): more would be a blob scanned twice.
func (pb *pushBench) checkScannedOnce(ctx context.Context, names []string) (scanned, blobs int64, twice int) {
	for _, n := range names {
		cb, err := env.Store.FindCodebase(ctx, pb.repo(n))
		if err != nil || cb == nil {
			pb.b.Fatalf("%s: codebase %v, %v", n, cb, err)
		}
		var got int64
		if err := env.Store.Pool().QueryRow(ctx, `SELECT coalesce(sum(r.blobs_scanned), 0)::bigint FROM shard_receipts r
			JOIN shards s ON s.id = r.shard_id WHERE s.key = $1`, shard.CodebaseKey(cb.ID)).Scan(&got); err != nil {
			pb.b.Fatal(err)
		}
		pb.mu.Lock()
		want := int64(1 + len(pb.pushes[n]))
		pb.mu.Unlock()
		scanned += got
		blobs += want
		if got > want {
			twice++
			pb.b.Errorf("%s: %d blobs scanned for %d pushed: scanned twice", n, got, want)
		}
	}
	return scanned, blobs, twice
}

// collectRuns lists the Collect runs started since from, by workflow id.
func (pb *pushBench) collectRuns(ctx context.Context, from time.Time) map[string][]actions.Run {
	out := map[string][]actions.Run{}
	q := fmt.Sprintf("WorkflowType = 'Collect' AND StartTime >= '%s'", from.UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: 1000})
		if err != nil {
			pb.b.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			x := e.GetExecution()
			out[x.GetWorkflowId()] = append(out[x.GetWorkflowId()], actions.Run{WorkflowID: x.GetWorkflowId(), RunID: x.GetRunId()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out
		}
	}
}

// runActions counts one run's history and its children's (not the runs
// it continued as, which are listed on their own).
func runActions(ctx context.Context, r actions.Run) (actions.Count, error) {
	var events []*historypb.HistoryEvent
	it := env.Client.GetWorkflowHistory(ctx, r.WorkflowID, r.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return actions.Count{}, err
		}
		events = append(events, e)
	}
	c, children, _ := actions.Tally(events)
	for _, ch := range children {
		cc, err := actions.Of(ctx, env.Client, ch.WorkflowID, ch.RunID)
		if err != nil {
			return c, err
		}
		c = c.Add(cc)
	}
	return c, nil
}

// collectionsPerRepo says how the burst's pushes were coalesced.
func collectionsPerRepo(runs map[string][]actions.Run, names []string, pb *pushBench, shas []string) string {
	in := map[string]bool{}
	for _, s := range shas {
		in[s] = true
	}
	var counts []int
	total, pushes := 0, 0
	for _, n := range names {
		c := len(runs[workflows.CollectWorkflowID(pb.repo(n))])
		counts = append(counts, c)
		total += c
		pb.mu.Lock()
		for _, p := range pb.pushes[n] {
			if in[p.sha] {
				pushes++
			}
		}
		pb.mu.Unlock()
	}
	slices.Sort(counts)
	return fmt.Sprintf("%d collections for %d pushes (per repository: min %d, median %d, max %d; %.1f pushes a repository)",
		total, pushes, counts[0], counts[len(counts)/2], counts[len(counts)-1], float64(pushes)/float64(len(names)))
}

// refusals sends the receiver a forged delivery (401), a replay of one it
// took (200) and an oversized one (413), and checks each status and that
// no collection started meanwhile.
func (pb *pushBench) refusals(ctx context.Context, url string) string {
	var taken *forge.HookDelivery
	for _, d := range pb.fg.HookDeliveries() {
		if d.Event == "push" && d.OK() && d.RepositoryID != 0 {
			taken = &d
		}
	}
	if taken == nil {
		pb.b.Fatal("no push delivery was taken")
	}
	countCollects := func() int64 {
		resp, err := env.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowType = 'Collect'"})
		if err != nil {
			pb.b.Fatal(err)
		}
		return resp.GetCount()
	}
	before := countCollects()
	var full struct {
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(taken.Payload, &full)
	name := strings.TrimPrefix(full.Repository.FullName, pb.owner+"/")
	runBefore := lastCollectRun(pb.b, pb.repo(name))
	big := append([]byte(`{"pad":"`), make([]byte, webhook.MaxBody)...)
	for i := range big[8:] {
		big[8+i] = 'x'
	}
	big = append(big, `"}`...)
	var out []string
	for _, tc := range []struct {
		what, guid string
		body       []byte
		signature  string
		want       int
	}{
		{"forged", "push-bench-forged", taken.Payload, webhook.Sign([]byte("not the secret"), taken.Payload), http.StatusUnauthorized},
		{"replayed", taken.GUID, taken.Payload, webhook.Sign([]byte(pushHookSecret), taken.Payload), http.StatusOK},
		{"oversized", "push-bench-oversized", big, webhook.Sign([]byte(pushHookSecret), big), http.StatusRequestEntityTooLarge},
	} {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(tc.body)))
		if err != nil {
			pb.b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", tc.guid)
		req.Header.Set("X-Hub-Signature-256", tc.signature)
		resp, err := http.DefaultClient.Do(req)
		code := 0
		if err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		if code != tc.want {
			pb.b.Errorf("%s delivery: answered %d (%v), want %d", tc.what, code, err, tc.want)
		}
		out = append(out, fmt.Sprintf("%s %d", tc.what, code))
	}
	after := countCollects()
	if after != before {
		pb.b.Errorf("%d collections started by refused or replayed deliveries", after-before)
	}
	if now := lastCollectRun(pb.b, pb.repo(name)); now != runBefore {
		pb.b.Errorf("%s: a refused or replayed delivery started collection run %s", name, now)
	}
	return strings.Join(out, ", ") + fmt.Sprintf(" (%d-byte body); collections started: %d", len(big), after-before)
}

// freeAddr is a loopback address nothing listens on now, for a receiver
// that must come back where the App delivers.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func lastCollectRun(b *testing.B, r repoid.ID) string {
	d, err := env.Client.DescribeWorkflowExecution(context.Background(), workflows.CollectWorkflowID(r), "")
	if err != nil {
		b.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i, 1)-1]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func per(n int64, of int) float64 { return float64(n) / float64(of) }
