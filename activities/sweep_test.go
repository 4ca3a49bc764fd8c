package activities_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"gitfleet/activities"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

const sweepHost = "sweep.test"

// remotes answers change checks by repository name: "hang" never answers
// (until its context ends), "gone…" is not found, "private…" refuses
// authentication, "tls…" speaks no TLS, "same…" has the recorded refs, any
// other has moved on. down makes the whole host refuse everything (a proxy
// in trouble). It counts the checks and notes how each hanging check ended.
type remotes struct {
	mu     sync.Mutex
	calls  map[string]int
	hungUp []error // the context errors the hanging checks ended with
	down   bool
}

func (r *remotes) RefsDigest(ctx context.Context, url string) (string, error) {
	name := strings.TrimSuffix(url[strings.LastIndex(url, "/")+1:], ".git")
	r.mu.Lock()
	r.calls[name]++
	down := r.down
	r.mu.Unlock()
	switch {
	case down:
		return "", errclass.Permanentf(errclass.ReasonPermissionDenied, "403 from the proxy")
	case name == "hang":
		<-ctx.Done()
		r.mu.Lock()
		r.hungUp = append(r.hungUp, ctx.Err())
		r.mu.Unlock()
		return "", ctx.Err()
	case strings.HasPrefix(name, "gone"):
		return "", errclass.Permanentf(errclass.ReasonNotFound, "repository not found")
	case strings.HasPrefix(name, "private"), strings.HasPrefix(name, "sso"):
		return "", errclass.Permanentf(errclass.ReasonPermissionDenied, "authentication required")
	case strings.HasPrefix(name, "tls"):
		return "", errclass.Permanentf(errclass.ReasonUnsupported, "http: server gave HTTP response to HTTPS client")
	case strings.HasPrefix(name, "same"):
		return "aaaa", nil
	}
	return "bbbb", nil
}

func (r *remotes) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

// dueRepos inserts codebases for names under a fresh owner on sweepHost.
func dueRepos(t *testing.T, names ...string) []workflows.DueRepo {
	t.Helper()
	return dueReposOn(t, sweepHost, false, names...)
}

// dueReposOn inserts codebases for names under a fresh owner on host, as
// collected (so that a control check may list them) when collected.
func dueReposOn(t *testing.T, host string, collected bool, names ...string) []workflows.DueRepo {
	t.Helper()
	return dueReposOf(t, host, fmt.Sprintf("sweep-%d", time.Now().UnixNano()), collected, names...)
}

// dueReposOf inserts codebases for names under owner on host.
func dueReposOf(t *testing.T, host, owner string, collected bool, names ...string) []workflows.DueRepo {
	t.Helper()
	var due []workflows.DueRepo
	for _, n := range names {
		var id int64
		if err := env.Store.Pool().QueryRow(context.Background(), `INSERT INTO codebases (host, external_repo_id, owner, name,
				last_commit_sha, last_refs_digest, last_completed_at)
			VALUES ($1, $2, $3, $4, 'aaaa', 'aaaa', CASE WHEN $5 THEN now() END) RETURNING id`,
			host, owner+"/"+n, owner, n, collected).Scan(&id); err != nil {
			t.Fatal(err)
		}
		due = append(due, workflows.DueRepo{CodebaseID: id, Repo: repoid.ID{Host: host, Owner: owner, Name: n},
			LastCommit: "aaaa", RefsDigest: "aaaa", PolicyCurrent: true})
	}
	return due
}

func failures(t *testing.T, id int64) int {
	t.Helper()
	var n int
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT consecutive_failures FROM codebases WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkHeads runs one attempt of CheckHeads, resuming from details when
// given, and returns its outcomes and the heartbeats it sent.
func checkHeads(t *testing.T, s *activities.Sweeps, in workflows.CheckHeadsRequest, details *activities.CheckHeadsProgress) ([]workflows.HeadOutcome, []activities.CheckHeadsProgress) {
	t.Helper()
	return runSweep[[]workflows.HeadOutcome](t, s, s.CheckHeads, in, details)
}

// runSweep runs one attempt of activity fn of s with in, resuming from
// details when given, and returns its result and the progress of every
// heartbeat it recorded (the SDK sends one per throttle interval to the
// server; the tests look at what the activity reports).
func runSweep[Out, Progress any](t *testing.T, s *activities.Sweeps, fn, in any, details *Progress) (Out, []Progress) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	aenv := suite.NewTestActivityEnvironment()
	beats := &beatRecorder{}
	aenv.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{beats}})
	aenv.RegisterActivity(s)
	if details != nil {
		aenv.SetHeartbeatDetails(*details)
	}
	var out Out
	v, err := aenv.ExecuteActivity(fn, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	beats.mu.Lock()
	defer beats.mu.Unlock()
	var progress []Progress
	for _, d := range beats.details {
		if p, ok := d.(Progress); ok {
			progress = append(progress, p)
		}
	}
	return out, progress
}

// beatRecorder keeps the details of every heartbeat an activity records.
type beatRecorder struct {
	interceptor.WorkerInterceptorBase
	mu      sync.Mutex
	details []any
}

func (r *beatRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &beatInbound{r: r}
	i.Next = next
	return i
}

type beatInbound struct {
	interceptor.ActivityInboundInterceptorBase
	r *beatRecorder
}

func (i *beatInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	o := &beatOutbound{r: i.r}
	o.Next = outbound
	return i.Next.Init(o)
}

type beatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	r *beatRecorder
}

func (o *beatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) == 1 {
		o.r.mu.Lock()
		o.r.details = append(o.r.details, details[0])
		o.r.mu.Unlock()
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// One remote hangs: CheckHeads heartbeats after every other remote, the
// hanging one fails alone when its own timeout ends, and a retry resumes
// from the last heartbeat. The gone repository's failure counts once per
// sweep, however many attempts check it.
func TestSweepCheckHeadsHangingRemoteAndRetries(t *testing.T) {
	hs, err := vcs.NewHosts(vcs.Host{Name: sweepHost, GitURL: "https://" + sweepHost + "/", APIURL: "https://" + sweepHost + "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	heads := &remotes{calls: map[string]int{}}
	s := &activities.Sweeps{Store: env.Store, Hosts: hs, Heads: heads}
	names := []string{"hang", "gone", "same"}
	for i := range 20 {
		names = append(names, fmt.Sprintf("r%02d", i))
	}
	due := dueRepos(t, names...)
	now := time.Now().UTC().Truncate(time.Second)
	in := workflows.CheckHeadsRequest{CheckHeadsInput: workflows.CheckHeadsInput{Repos: due, Now: now},
		Sweep: "recollection-sweep-test/run-1", RemoteTimeout: 300 * time.Millisecond}
	want := make([]workflows.HeadOutcome, len(names))
	for i, n := range names {
		want[i] = map[string]workflows.HeadOutcome{"hang": workflows.HeadFailed, "gone": workflows.HeadGone,
			"same": workflows.HeadUnchanged}[n]
		if want[i] == "" {
			want[i] = workflows.HeadChanged
		}
	}
	check := func(attempt string, out []workflows.HeadOutcome) {
		t.Helper()
		if fmt.Sprint(out) != fmt.Sprint(want) {
			t.Fatalf("%s: outcomes %v, want %v", attempt, out, want)
		}
	}

	// First attempt.
	out, beats := checkHeads(t, s, in, nil)
	check("first attempt", out)
	if len(heads.hungUp) != 1 || !errors.Is(heads.hungUp[0], context.DeadlineExceeded) {
		t.Fatalf("the hanging check ended with %v, want its own deadline", heads.hungUp)
	}
	if len(beats) != len(names) {
		t.Fatalf("%d heartbeats for %d remotes, want one after each", len(beats), len(names))
	}
	// A heartbeat showed every other remote checked while the hanging one
	// still ran: nothing waited on it.
	var pending *activities.CheckHeadsProgress
	for i, b := range beats {
		done := 0
		for _, o := range b.Outcomes {
			if o != "" {
				done++
			}
		}
		if b.Checked != done || b.Changed+b.Unchanged+b.Failed != done || b.Last < 0 || b.Outcomes[b.Last] == "" ||
			b.Checks[b.Last].Failed != (b.Outcomes[b.Last] == workflows.HeadFailed) {
			t.Fatalf("heartbeat %d is inconsistent: %+v", i, b)
		}
		if b.Outcomes[0] == "" && done == len(names)-1 {
			pending = &beats[i]
		}
	}
	if pending == nil {
		t.Fatalf("no heartbeat with every remote but the hanging one checked (%d heartbeats)", len(beats))
	}
	if f := failures(t, due[1].CodebaseID); f != 1 {
		t.Fatalf("the gone repository has %d failures after one check, want 1", f)
	}
	if f := failures(t, due[0].CodebaseID); f != 0 {
		t.Fatalf("a check that timed out counted %d failures against the codebase", f)
	}

	// The attempt is retried from that heartbeat (say its worker died while
	// the hanging remote ran): only the hanging remote is checked again.
	out, beats = checkHeads(t, s, in, pending)
	check("retry from the heartbeat", out)
	if len(beats) != 1 || beats[0].Checked != len(names) {
		t.Fatalf("retry heartbeats: %+v, want one, with every remote checked", beats)
	}
	for _, n := range names {
		want := 1
		if n == "hang" {
			want = 2
		}
		if got := heads.count(n); got != want {
			t.Errorf("%s checked %d times, want %d", n, got, want)
		}
	}
	// A retry that lost every heartbeat checks all again; the failure still
	// counts once in this sweep.
	out, _ = checkHeads(t, s, in, nil)
	check("retry without heartbeats", out)
	if heads.count("gone") != 2 {
		t.Fatalf("gone checked %d times", heads.count("gone"))
	}
	if f := failures(t, due[1].CodebaseID); f != 1 {
		t.Fatalf("the gone repository has %d failures after three attempts of one sweep, want 1", f)
	}
	// The unchanged head is recorded as checked.
	var checked *time.Time
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT last_checked_at FROM codebases WHERE id = $1`,
		due[2].CodebaseID).Scan(&checked); err != nil || checked == nil || !checked.Equal(now) {
		t.Fatalf("unchanged check recorded at %v (%v), want %v", checked, err, now)
	}

	// The next sweep counts its own failure.
	in.Sweep = "recollection-sweep-test/run-2"
	checkHeads(t, s, in, nil)
	if f := failures(t, due[1].CodebaseID); f != 2 {
		t.Fatalf("the gone repository has %d failures after a second sweep, want 2", f)
	}
}

// collectStarter stands in for the Temporal client: it notes every Collect
// start (with the options it came with); "refused" fails for good, "flaky"
// fails its first start with a retryable error.
type collectStarter struct {
	client.Client
	mu     sync.Mutex
	starts map[repoid.ID]int
	bad    []string // starts without the repository's id and use-existing
}

func (c *collectStarter) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	in := args[0].(workflows.CollectInput)
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.ID != workflows.CollectWorkflowID(in.Repo) || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
		o.TaskQueue != workflows.TaskQueue || in.Trigger != "sweep" {
		c.bad = append(c.bad, in.Repo.String())
	}
	switch {
	case in.Repo.Name == "refused":
		return nil, errclass.Permanentf("permission-denied", "refused")
	case in.Repo.Name == "flaky" && c.starts[in.Repo] == 0:
		c.starts[in.Repo]++ // tried
		return nil, errors.New("unavailable")
	}
	c.starts[in.Repo]++
	return nil, nil
}

// startCollects runs one attempt of StartCollects, resuming from details
// when given, and returns its outcomes and the heartbeats it sent.
func startCollects(t *testing.T, s *activities.Sweeps, in workflows.StartCollectsInput, details *activities.StartCollectsProgress) ([]workflows.StartOutcome, []activities.StartCollectsProgress) {
	t.Helper()
	return runSweep[[]workflows.StartOutcome](t, s, s.StartCollects, in, details)
}

// StartCollects starts each repository of its window once, with the
// repository's workflow id and use-existing, as StartCollect does; a start
// that fails for good fails alone, a retryable one is tried again; it
// heartbeats after each start and a retry resumes after the starts its
// last heartbeat reported.
func TestSweepStartCollectsStartsEachOnceAndResumes(t *testing.T) {
	names := []string{"refused", "flaky"}
	for i := range 10 {
		names = append(names, fmt.Sprintf("r%02d", i))
	}
	var repos []repoid.ID
	for _, n := range names {
		repos = append(repos, repoid.ID{Host: sweepHost, Owner: "o", Name: n})
	}
	c := &collectStarter{starts: map[repoid.ID]int{}}
	s := &activities.Sweeps{Client: c}
	in := workflows.StartCollectsInput{Repos: repos, Parallel: 3}
	out, beats := startCollects(t, s, in, nil)
	if len(out) != len(repos) {
		t.Fatalf("%d outcomes for %d repositories", len(out), len(repos))
	}
	for i, o := range out {
		want := workflows.StartStarted
		if names[i] == "refused" {
			want = workflows.StartFailed
		}
		if o.Result != want || (want == workflows.StartFailed) != strings.Contains(o.Reason, "refused") {
			t.Errorf("%s: outcome %+v, want %s", names[i], o, want)
		}
	}
	if len(c.bad) > 0 {
		t.Fatalf("started without the repository's id and use-existing: %v", c.bad)
	}
	for _, r := range repos {
		want := 1
		switch r.Name {
		case "refused":
			want = 0
		case "flaky":
			want = 2 // a failed start and the one that worked
		}
		if c.starts[r] != want {
			t.Errorf("%s started %d times, want %d", r, c.starts[r], want)
		}
	}
	if len(beats) != len(repos) {
		t.Fatalf("%d heartbeats for %d starts, want one after each", len(beats), len(repos))
	}
	last := beats[len(beats)-1]
	if last.Started != len(repos)-1 || last.Failed != 1 || last.Last < 0 {
		t.Fatalf("last heartbeat %+v", last)
	}

	// A retry from a heartbeat halfway (its worker died) starts only what
	// that heartbeat had not reported.
	half := beats[len(repos)/2-1]
	flaky := repos[1]
	c.starts = map[repoid.ID]int{flaky: 1} // it works from now on
	out2, beats2 := startCollects(t, s, in, &half)
	if fmt.Sprint(out2) != fmt.Sprint(out) {
		t.Fatalf("retry outcomes %v, want %v", out2, out)
	}
	for i, r := range repos {
		want := 1
		if half.Outcomes[i].Result != "" || r.Name == "refused" {
			want = 0
		}
		if r == flaky {
			want++
		}
		if c.starts[r] != want {
			t.Errorf("retry: %s started %d times, want %d", r, c.starts[r], want)
		}
	}
	if len(beats2) != len(repos)-len(repos)/2 {
		t.Fatalf("retry: %d heartbeats, want %d", len(beats2), len(repos)-len(repos)/2)
	}
}

// A repository whose last scan used other rules (after an upgrade of the
// built-in set, say) is collected again although its head did not move, so
// that it is scanned under the current rules; the sweep starts these in
// its windows like any other change, so an upgrade re-scans a fleet at the
// sweep's pace, never all at once.
func TestSweepCheckHeadsRescansUnderNewRules(t *testing.T) {
	hs, err := vcs.NewHosts(vcs.Host{Name: sweepHost, GitURL: "https://" + sweepHost + "/", APIURL: "https://" + sweepHost + "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	s := &activities.Sweeps{Store: env.Store, Hosts: hs, Heads: &remotes{calls: map[string]int{}}}
	current, upgraded := dueRepos(t, "same")[0], dueRepos(t, "same")[0]
	upgraded.PolicyCurrent = false
	in := workflows.CheckHeadsRequest{CheckHeadsInput: workflows.CheckHeadsInput{
		Repos: []workflows.DueRepo{current, upgraded}, Now: time.Now().UTC()}}
	out, _ := checkHeads(t, s, in, nil)
	if want := []workflows.HeadOutcome{workflows.HeadUnchanged, workflows.HeadChanged}; fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}
}

// Whose doing a failed check is (blame.Decide, on the real store): a
// repository refused while others answer is the repository's own (gone,
// private: a strike); a host that refuses everything — the batch and the
// repositories known to be there that the control check lists — and
// failures that are never a repository's (TLS, a timeout) are the host's:
// HeadFailed, which the sweep's breaker counts, and no strike. Refusals
// shared by one owner's repositories, whose repositories known to be there
// are refused too (an organization enforcing SSO or an IP allow-list), are
// the owner's: HeadOwnerFailed (HeadFailed for a request without PerOwner),
// and no strike.
func TestSweepCheckHeadsChargesTheHost(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	var sso, others []string
	for i := range 9 {
		sso = append(sso, fmt.Sprintf("sso%d", i))
	}
	for i := range 11 {
		others = append(others, fmt.Sprintf("same%d", i))
	}
	for _, tc := range []struct {
		name     string
		batch    []string
		others   []string // another owner's, in the batch after batch
		controls int      // repositories known to be there, outside the batch, of another owner
		known    []string // the batch owner's repositories known to be there, outside the batch
		down     bool     // the host refuses everything
		perOwner bool
		want     string
	}{
		{"refused among answers", []string{"changed", "gone", "private", "same"}, nil, 0, nil, false, false, "changed gone gone unchanged"},
		{"TLS among answers", []string{"changed", "tls", "same"}, nil, 0, nil, false, false, "changed failed unchanged"},
		{"TLS everywhere", []string{"tls1", "tls2", "tls3"}, nil, 3, nil, false, false, "failed failed failed"},
		{"a lone refusal, the host serves the others", []string{"gone"}, nil, 3, nil, false, false, "gone"},
		{"a lone refusal, nothing to compare", []string{"gone"}, nil, 0, nil, false, false, "failed"},
		{"all refused, the host and the owner serve the others", []string{"gone1", "gone2", "gone3", "gone4", "gone5", "gone6"}, nil, 2,
			[]string{"known1"}, false, false, "gone gone gone gone gone gone"},
		// Nothing else of the owner's is known: it may be the owner
		// refusing gitfleet, so nothing is charged on a guess.
		{"all refused, the host serves the others, nothing else of the owner's known", []string{"gone1", "gone2", "gone3"}, nil, 2,
			nil, false, true, "owner-failed owner-failed owner-failed"},
		{"the host refuses everything", []string{"a", "b", "c", "d", "e", "f"}, nil, 3, nil, true, true, "failed failed failed failed failed failed"},
		{"most refused alike, the host serves the others", []string{"private1", "private2", "private3", "private4", "private5", "same"}, nil, 1,
			[]string{"known1"}, false, false, "gone gone gone gone gone unchanged"},
		// The batch: an organization enforcing SSO, 9 of 20.
		{"an organization refusing gitfleet, 9 of 20", sso, others, 0, []string{"sso-known1", "sso-known2"}, false, true,
			strings.TrimSpace(strings.Repeat("owner-failed ", 9) + strings.Repeat("unchanged ", 11))},
		{"an organization refusing gitfleet, a sweep without owners", sso, others, 0, []string{"sso-known1", "sso-known2"}, false, false,
			strings.TrimSpace(strings.Repeat("failed ", 9) + strings.Repeat("unchanged ", 11))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := fmt.Sprintf("sweep-%d.test", time.Now().UnixNano())
			hs, err := vcs.NewHosts(vcs.Host{Name: host, GitURL: "https://" + host + "/", APIURL: "https://" + host + "/api/"})
			if err != nil {
				t.Fatal(err)
			}
			var controls []string
			for i := range tc.controls {
				controls = append(controls, fmt.Sprintf("control%d", i))
			}
			dueReposOn(t, host, true, controls...)
			owner := fmt.Sprintf("org-%d", time.Now().UnixNano())
			dueReposOf(t, host, owner, true, tc.known...)
			heads := &remotes{calls: map[string]int{}, down: tc.down}
			s := &activities.Sweeps{Store: env.Store, Hosts: hs, Heads: heads}
			due := dueReposOf(t, host, owner, false, tc.batch...)
			due[0].RefsDigest = "older" // moved on, unless it fails
			due = append(due, dueReposOn(t, host, false, tc.others...)...)
			names := append(slices.Clone(tc.batch), tc.others...)
			in := workflows.CheckHeadsRequest{CheckHeadsInput: workflows.CheckHeadsInput{Repos: due, Now: now},
				Sweep: "recollection-sweep-test/" + host, RemoteTimeout: time.Second, PerOwner: tc.perOwner}
			out, _ := checkHeads(t, s, in, nil)
			var got []string
			for _, o := range out {
				got = append(got, string(o))
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("outcomes %v, want %s", got, tc.want)
			}
			for i, o := range out {
				want := 0
				if o == workflows.HeadGone {
					want = 1
				}
				if f := failures(t, due[i].CodebaseID); f != want {
					t.Errorf("%s (%s): %d failures, want %d", names[i], o, f, want)
				}
			}
		})
	}
}

// ListDue pages the most recently viewed candidates first (the hottest
// tier cannot be starved by a sweep that stops early), and defers a halted
// host's candidates up to where the last sweep stopped it, so the sweep
// takes the host up after that point. On the real store.
func TestSweepListDueNewestFirstAndResumes(t *testing.T) {
	// A clock of its own, far from the other tests' views.
	now := time.Now().UTC().AddDate(40, 0, 0).Truncate(time.Second)
	h1, h2 := fmt.Sprintf("a-%d.test", time.Now().UnixNano()), fmt.Sprintf("b-%d.test", time.Now().UnixNano())
	views := map[string]time.Duration{"a": time.Hour, "b": 2 * time.Hour, "c": 3 * time.Hour, "d": 90 * time.Minute, "e": 150 * time.Minute}
	var all []workflows.DueRepo
	all = append(all, dueReposOn(t, h1, false, "a", "b", "c")...)
	all = append(all, dueReposOn(t, h2, false, "d", "e")...)
	cursor := map[string]workflows.SweepCursor{}
	for _, r := range all {
		v := now.Add(-views[r.Repo.Name])
		if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET last_viewed_at = $2 WHERE id = $1`, r.CodebaseID, v); err != nil {
			t.Fatal(err)
		}
		cursor[r.Repo.Name] = workflows.SweepCursor{Viewed: v, ID: r.CodebaseID}
	}
	s := &activities.Sweeps{Store: env.Store}
	list := func(in workflows.SweepPageInput) (names []string, deferred int) {
		t.Helper()
		in.Now, in.Limit = now, 2
		for {
			page, _ := runSweep[workflows.SweepPage, struct{}](t, s, s.ListDue, in, nil)
			for _, d := range page.Due {
				names = append(names, d.Repo.Name)
			}
			deferred += page.Deferred
			if page.Done {
				return names, deferred
			}
			in.After = page.Next
		}
	}
	if got, _ := list(workflows.SweepPageInput{Newest: true}); strings.Join(got, " ") != "a d b e c" {
		t.Fatalf("newest first: %v, want a d b e c", got)
	}
	if got, _ := list(workflows.SweepPageInput{}); strings.Join(got, " ") != "c e b d a" {
		t.Fatalf("oldest first (the runs before): %v, want c e b d a", got)
	}
	// A host the breaker halted is not read at all.
	if got, _ := list(workflows.SweepPageInput{Newest: true, SkipHosts: []string{h1}}); strings.Join(got, " ") != "d e" {
		t.Fatalf("%s halted: %v, want d e", h1, got)
	}
	// The last sweep halted h1 at b: a and b wait for the next sweep.
	got, deferred := list(workflows.SweepPageInput{Newest: true, Resume: map[string]workflows.SweepCursor{h1: cursor["b"]}})
	if strings.Join(got, " ") != "d e c" || deferred != 2 {
		t.Fatalf("resuming %s after b: %v (%d deferred), want d e c (2 deferred)", h1, got, deferred)
	}
}

// A host whose checks fail in a row (timeouts, 5xx, TLS: never a
// repository's) is given up for the rest of the batch once StopHostAfter
// of them ended: its remaining repositories come back HeadSkipped, not
// checked (a dead host's checks cost their whole timeout each, 30 s in
// production), the skipped ones the last of the host's in the batch; a
// healthy host between them is checked in full. Nothing is charged.
func TestSweepCheckHeadsGivesADeadHostUp(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	dead, fine := fmt.Sprintf("dead-%d.test", time.Now().UnixNano()), fmt.Sprintf("fine-%d.test", time.Now().UnixNano())
	hs, err := vcs.NewHosts(vcs.Host{Name: dead, GitURL: "https://" + dead + "/", APIURL: "https://" + dead + "/api/"},
		vcs.Host{Name: fine, GitURL: "https://" + fine + "/", APIURL: "https://" + fine + "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	var deadNames, fineNames []string
	for i := range 20 {
		deadNames, fineNames = append(deadNames, fmt.Sprintf("tls%02d", i)), append(fineNames, fmt.Sprintf("same%02d", i))
	}
	d, f := dueReposOn(t, dead, false, deadNames...), dueReposOn(t, fine, false, fineNames...)
	var due []workflows.DueRepo
	for i := range 20 {
		due = append(due, d[i], f[i]) // interleaved
	}
	heads := &remotes{calls: map[string]int{}}
	s := &activities.Sweeps{Store: env.Store, Hosts: hs, Heads: heads}
	out, _ := checkHeads(t, s, workflows.CheckHeadsRequest{CheckHeadsInput: workflows.CheckHeadsInput{Repos: due, Now: now},
		Sweep: "recollection-sweep-test/" + dead, RemoteTimeout: time.Second, StopHostAfter: 3}, nil)
	skipped, checked := 0, 0
	for i, o := range out {
		r := due[i]
		if r.Repo.Host == fine {
			if o != workflows.HeadUnchanged {
				t.Fatalf("%s: %s, want unchanged", r.Repo, o)
			}
			continue
		}
		switch o {
		case workflows.HeadSkipped:
			skipped++
			if heads.count(r.Repo.Name) != 0 {
				t.Errorf("%s skipped but checked", r.Repo)
			}
		case workflows.HeadFailed:
			if skipped > 0 {
				t.Errorf("%s checked after a skipped one: the skipped are not the last of the host's", r.Repo)
			}
			checked++
		default:
			t.Fatalf("%s: %s", r.Repo, o)
		}
		if n := failures(t, r.CodebaseID); n != 0 {
			t.Errorf("%s: %d failures, want none", r.Repo, n)
		}
	}
	// 3 failures ended, at most 8 more in flight and one about to go.
	if checked < 3 || checked > 12 || skipped != 20-checked {
		t.Fatalf("the dead host: %d checked, %d skipped; want it given up after 3 failures in a row", checked, skipped)
	}
	// Without StopHostAfter (the runs before) every one is checked.
	all, _ := checkHeads(t, s, workflows.CheckHeadsRequest{CheckHeadsInput: workflows.CheckHeadsInput{Repos: d, Now: now},
		Sweep: "recollection-sweep-test-all/" + dead, RemoteTimeout: time.Second}, nil)
	if slices.Contains(all, workflows.HeadSkipped) {
		t.Fatalf("skipped without StopHostAfter: %v", all)
	}
}
