package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// Sizes of BenchmarkFleet, each overridable for bigger runs.
const (
	envFleetRepos   = "GITFLEET_BENCH_FLEET_REPOS"   // repositories (default 300)
	envFleetSizes   = "GITFLEET_BENCH_FLEET_SIZES"   // fleets to compare (default "1,3,6")
	envFleetCommits = "GITFLEET_BENCH_FLEET_COMMITS" // commits of each repository (default 20)
	envFleetLatency = "GITFLEET_BENCH_FLEET_LATENCY" // delay before each Git response (default 20ms)
)

// fleetWorkerOffline is the fleet's GITFLEET_WORKER_OFFLINE_AFTER: three
// heartbeats, so a killed worker's repositories move within the
// benchmark, and a live one is never taken for dead.
const fleetWorkerOffline = 30 * time.Second

// fleetPlaceWait bounds how long Git work waits for an owner that does not
// take it before it is placed again.
const fleetPlaceWait = 15 * time.Second

// churnPath is where the commit pushed before the churn plants a secret.
const churnPath = "config/churn.env"

// BenchmarkFleet measures repository affinity with real worker processes
// (each with its own mirror directory and GITFLEET_WORKER_ID) against the
// forge, every Git response delayed as a real host's round trip is. For
// fleets of 1, 3 and 6 workers it collects the same generated repositories
// (an organization each) and prints the wall time, full clones per
// repository (goal 1.00: each mirror cloned once, on its owner), the
// mirrors' bytes over one copy of each (goal ≤ 1.05), how evenly the
// repositories spread (largest share ≤ 1.3× the mean) and each worker's
// peak RSS. On the largest fleet it then re-collects every repository 3
// times (the second after a new commit in each, so that its scans read
// something new): clones per repository still 1.00, scans that had to
// sync a mirror themselves 0. Last, a commit with a secret is pushed to
// every repository, and while they are collected again one worker is
// killed (SIGKILL) and another added: it prints the repositories that
// moved (≈ 1/N went with the killed worker, ≈ 1/(N+1) to the new one),
// the clones after the change (only of moved repositories), and checks
// that every repository's findings are those of before plus the one
// secret, none lost or duplicated. Those invariants fail the benchmark;
// times are only printed.
//
// It takes about 9 minutes on 2 shared cores (seven rounds of 300
// collections); GITFLEET_BENCH_FLEET_REPOS=60 gives a quick run.
func BenchmarkFleet(b *testing.B) {
	n := envInt(b, envFleetRepos, 300)
	commits := envInt(b, envFleetCommits, 20)
	sizes := []int{1, 3, 6}
	if v := os.Getenv(envFleetSizes); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 {
				b.Fatalf("%s=%q: want sizes like 1,3,6", envFleetSizes, v)
			}
			sizes = append(sizes, k)
		}
	}
	latency := 20 * time.Millisecond
	if v := os.Getenv(envFleetLatency); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s=%q: %v", envFleetLatency, v, err)
		}
		latency = d
	}
	forgetAllWorkers(b) // rows of earlier tests' workers, dead or alive
	defer fg.AddFault(forge.Fault{Kind: forge.Git, Latency: latency})()

	stamp := time.Now().UnixNano() % 1_000_000_000
	fmt.Printf("\nFleet: %d repositories of %d commits, collected by real worker processes; every Git response from the forge delayed %s\n",
		n, commits, latency)
	fmt.Printf("  %-8s %9s %14s %15s %22s %14s\n", "workers", "wall", "clones/repo", "mirror bytes", "spread (max/mean)", "peak RSS/MB")
	var last *fleetRun
	var dbGrowth int64                // the database's growth over the first fleet's collections
	var reference map[string][]string // the first fleet's findings, by repository index
	for i, size := range sizes {
		if last != nil {
			last.stop(b)
		}
		org := fmt.Sprintf("fleet%d-%d", stamp, size)
		repos := fleetRepos(b, org, n, commits)
		fr := startFleet(b, fmt.Sprintf("f%d-%d", stamp%100000, size), size)
		fg.ResetCounts()
		dbBefore := databaseSize(b)
		wall := fr.collectAll(b, repos)
		if i == 0 {
			dbGrowth = databaseSize(b) - dbBefore
		}
		st := fr.state(b, repos)
		clones := fetches(repos).Full
		fmt.Printf("  %-8d %9s %14.2f %14.2f× %15.2f (%s) %14s\n", size, wall.Round(100*time.Millisecond),
			float64(clones)/float64(n), st.bytesOverOneCopy(), st.spread(fr.ids()), st.shares(fr.ids()), fr.rssMB())
		if clones != n || st.bytesOverOneCopy() > 1.05 {
			b.Errorf("%d workers: %d clones of %d repositories, mirror bytes %.2f× one copy; want one clone each", size, clones, n, st.bytesOverOneCopy())
		}
		b.ReportMetric(wall.Seconds(), fmt.Sprintf("s/collect-%d-workers", size))
		b.ReportMetric(float64(clones)/float64(n), fmt.Sprintf("clones/repo-%d-workers", size))
		// The same repositories in every organization: the same findings.
		got := fr.findings(b, repos)
		if i == 0 {
			reference = got
		} else if !sameFindings(reference, got) {
			b.Errorf("%d workers found other secrets than %d", size, sizes[0])
		}
		last = fr
		last.repos = repos
	}
	defer last.stop(b)
	fr, repos := last, last.repos
	var seen int64
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM seen_blob_ids b JOIN scan_scopes sc ON sc.id = b.scope_id
		JOIN shards s ON s.id = sc.shard_id JOIN codebases c ON c.id = s.codebase_id WHERE c.owner = $1`, repos[0].Owner).Scan(&seen); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("  database: %.1f kB per repository collected (%d blobs seen each; pg_database_size over the first fleet's collections)\n",
		float64(dbGrowth)/float64(n)/1e3, seen/int64(n))

	// Re-collections: each repository stays on its owner.
	fg.ResetCounts()
	synced := fr.mirrorSyncs()
	var walls []string
	for round := range 3 {
		if round == 1 {
			for _, r := range repos {
				if _, err := fg.Commit(r.Owner, r.Name, "main", map[string]string{"src/round.txt": "round 1\n"}, "round 1"); err != nil {
					b.Fatal(err)
				}
			}
		}
		walls = append(walls, fr.collectAll(b, repos).Round(100*time.Millisecond).String())
	}
	clones := fetches(repos).Full
	selfSynced := fr.mirrorSyncs() - synced
	fmt.Printf("\n  %d workers, every repository re-collected 3 times (the 2nd after a new commit in each): %s\n", len(fr.procs), strings.Join(walls, ", "))
	fmt.Printf("    new clones %d (clones/repo still %.2f), incremental fetches %d, scans that synced a mirror themselves: %d (goal 0)\n",
		clones, float64(clones+n)/float64(n), fetches(repos).Incremental, selfSynced)
	b.ReportMetric(float64(selfSynced), "scans-self-synced")
	if clones != 0 || selfSynced != 0 {
		b.Errorf("re-collections: %d new clones, %d scans synced a mirror themselves; want none", clones, selfSynced)
	}

	// Churn: a commit with a secret in each repository; while they are
	// collected, a worker is killed and another added.
	before := fr.findings(b, repos)
	beforeState := fr.state(b, repos)
	for _, r := range repos {
		if _, err := fg.Commit(r.Owner, r.Name, "main", map[string]string{churnPath: "GITHUB_TOKEN=" + churnToken(r.Name) + "\n"}, "churn"); err != nil {
			b.Fatal(err)
		}
	}
	oldIDs := fr.ids()
	killed := fr.procs[len(fr.procs)/2]
	fg.ResetCounts()
	synced = fr.mirrorSyncs()
	start := time.Now()
	runs := fr.startCollects(b, repos)
	fr.waitCollected(b, runs, len(runs)/3)
	killed.proc.signal(syscall.SIGKILL)
	<-killed.proc.proc.Done()
	added := fr.add(b)
	fr.waitCollected(b, runs, len(runs))
	churnWall := time.Since(start)
	newIDs := fr.ids()
	after := fr.state(b, repos)
	movedAway, movedIn := 0, 0
	for _, r := range repos {
		k := placeKey(r)
		was, is := placement.Owner(k, oldIDs), placement.Owner(k, newIDs)
		switch {
		case was == is:
		case was == killed.id:
			movedAway++
		case is == added.id:
			movedIn++
		default:
			b.Errorf("%s moved from %s to %s, neither the killed nor the added worker", r, was, is)
		}
	}
	// Clones after the change: the new mirrors, each on the repository's new
	// owner.
	newMirrors, strays := 0, 0
	for _, r := range repos {
		for _, h := range after.holders[r] {
			if !slices.Contains(beforeState.holders[r], h) {
				newMirrors++
				if h != placement.Owner(placeKey(r), newIDs) {
					strays++
				}
			}
		}
	}
	churnClones := fetches(repos).Full
	// Clones that made no new mirror (a clone tried again), named, with
	// what the workers logged of the repository
	// (GITFLEET_BENCH_FLEET_DEBUG=1), to say why.
	byRepo := fg.Fetches()
	var extra []string
	for _, r := range repos {
		made := 0
		for _, h := range after.holders[r] {
			if !slices.Contains(beforeState.holders[r], h) {
				made++
			}
		}
		if k := byRepo[r.Owner+"/"+r.Name].Full; k > made {
			extra = append(extra, fmt.Sprintf("%s (%d clones, %d new mirrors, held by %v)", r.Name, k, made, after.holders[r]))
			if os.Getenv("GITFLEET_BENCH_FLEET_DEBUG") != "" {
				for _, p := range fr.procs {
					for _, line := range bytes.Split(p.proc.logs(), []byte("\n")) {
						if bytes.Contains(line, []byte(r.Owner+"/"+r.Name)) {
							fmt.Printf("      %s: %s\n", p.id, tail(line, 400))
						}
					}
				}
			}
		}
	}
	churnSynced := fr.mirrorSyncs() - synced
	afterFindings := fr.findings(b, repos)
	lost, dup := findingsDelta(b, repos, before, afterFindings)
	fmt.Printf("\n  %d workers, one killed (%s) and one added (%s) while every repository is collected after a new commit: %s\n",
		len(oldIDs), killed.id, added.id, churnWall.Round(100*time.Millisecond))
	fmt.Printf("    repositories moved: %d of %d (%.2f; %d with the killed worker, ≈ 1/%d = %.2f expected; %d to the added one, ≈ 1/%d = %.2f)\n",
		movedAway+movedIn, n, float64(movedAway+movedIn)/float64(n), movedAway, len(oldIDs), 1/float64(len(oldIDs)),
		movedIn, len(newIDs), 1/float64(len(newIDs)))
	fmt.Printf("    clones after the change: %d (new mirrors %d, of them on a worker not the owner: %d; goal: only moved repositories collected after the change)\n",
		churnClones, newMirrors, strays)
	fmt.Printf("    commits verified by a shallow fetch (the new owner lacked the mirror its job synced on the killed worker): %d\n",
		fetches(repos).Shallow)
	if len(extra) > 0 {
		fmt.Printf("    clones that made no new mirror: %s\n", strings.Join(extra, "; "))
	}
	fmt.Printf("    scans that synced a mirror themselves: %d; findings lost %d, duplicated %d (goal 0 and 0: before plus the one new secret each)\n",
		churnSynced, lost, dup)
	fmt.Printf("    peak RSS per worker: %s MB\n\n", fr.rssMB())
	if lost != 0 || dup != 0 {
		b.Errorf("churn: %d findings lost, %d duplicated", lost, dup)
	}
	if strays != 0 {
		b.Errorf("churn: %d mirrors created on a worker that does not own the repository", strays)
	}
	b.ReportMetric(float64(movedAway+movedIn)/float64(n), "moved-fraction")
	b.ReportMetric(float64(churnClones), "clones-after-change")
}

// fleetRun is a fleet of worker processes.
type fleetRun struct {
	prefix string
	procs  []*fleetProc
	seq    int
	repos  []repoid.ID
}

type fleetProc struct {
	id    string
	proc  *workerProc
	dir   string // its mirror directory
	peak  int64  // peak RSS, read last while it ran
	gone  bool
	mirrs *mirror.Mirrors
}

// startFleet starts size workers and waits until each has registered.
func startFleet(b *testing.B, prefix string, size int) *fleetRun {
	b.Helper()
	fr := &fleetRun{prefix: prefix}
	for range size {
		fr.launch(b)
	}
	for _, p := range fr.procs {
		p.proc.waitStarted(b)
	}
	fr.waitRegistered(b)
	return fr
}

func (fr *fleetRun) launch(b *testing.B) *fleetProc {
	b.Helper()
	id := fmt.Sprintf("%s-w%d", fr.prefix, fr.seq)
	fr.seq++
	name := nextName("fleet-" + id + "-")
	p := &fleetProc{id: id, dir: filepath.Join(env.Dir, name, "mirrors")}
	p.proc = launchProc(b, name, nil, []string{
		config.EnvWorkerID + "=" + id,
		config.EnvWorkerOffline + "=" + fleetWorkerOffline.String(),
		config.EnvLogLevel + "=info",
	})
	var err error
	if p.mirrs, err = mirror.New(p.dir, nil); err != nil {
		b.Fatal(err)
	}
	fr.procs = append(fr.procs, p)
	return p
}

// add starts one more worker and waits until it has registered (not
// until a killed one is taken for dead: that is the placement's to find).
func (fr *fleetRun) add(b *testing.B) *fleetProc {
	b.Helper()
	p := fr.launch(b)
	p.proc.waitStarted(b)
	poll.Until(b, p.id+" registered", time.Minute, func() (bool, string) {
		live, err := env.Store.LiveWorkers(context.Background(), workflows.TaskQueue, fleetWorkerOffline)
		if err != nil {
			b.Fatal(err)
		}
		return slices.Contains(live, p.id), fmt.Sprintf("live workers %v", live)
	})
	return p
}

// waitRegistered waits until the live workers are the fleet's running ones.
func (fr *fleetRun) waitRegistered(b *testing.B) {
	b.Helper()
	poll.Until(b, "the running workers registered", time.Minute, func() (bool, string) {
		live, err := env.Store.LiveWorkers(context.Background(), workflows.TaskQueue, fleetWorkerOffline)
		if err != nil {
			b.Fatal(err)
		}
		var want []string
		for _, p := range fr.procs {
			select {
			case <-p.proc.proc.Done():
			default:
				want = append(want, p.id)
			}
		}
		slices.Sort(want)
		return slices.Equal(live, want), fmt.Sprintf("live workers %v, want %v", live, want)
	})
}

// ids are the live workers' ids: those placement sees once the killed one
// is silent.
func (fr *fleetRun) ids() []string {
	var out []string
	for _, p := range fr.procs {
		if !p.gone && !p.proc.done() {
			out = append(out, p.id)
		}
	}
	return out
}

// stop kills the fleet, forgets its rows and reads its peaks first.
func (fr *fleetRun) stop(b *testing.B) {
	b.Helper()
	fr.rssMB()
	for _, p := range fr.procs {
		if !p.gone {
			p.gone = true
			p.proc.kill()
		}
		if _, err := env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, p.id); err != nil {
			b.Error(err)
		}
	}
}

// rssMB reads each running worker's peak RSS and lists every worker's.
func (fr *fleetRun) rssMB() string {
	var out []string
	for _, p := range fr.procs {
		if !p.proc.done() {
			p.peak = max(p.peak, vmHWM(p.proc.pid()))
		}
		out = append(out, strconv.FormatInt(p.peak>>20, 10))
	}
	return strings.Join(out, " ")
}

// mirrorSyncs counts the scans, in every worker's log, that had to sync
// their mirror themselves.
func (fr *fleetRun) mirrorSyncs() int {
	n := 0
	for _, p := range fr.procs {
		n += bytes.Count(p.proc.logs(), []byte(`"mirrorSynced":true`))
	}
	return n
}

// collectAll collects every repository at once and returns the wall time.
func (fr *fleetRun) collectAll(b *testing.B, repos []repoid.ID) time.Duration {
	b.Helper()
	start := time.Now()
	runs := fr.startCollects(b, repos)
	fr.waitCollected(b, runs, len(runs))
	return time.Since(start)
}

func (fr *fleetRun) startCollects(b *testing.B, repos []repoid.ID) []client.WorkflowRun {
	b.Helper()
	runs := make([]client.WorkflowRun, len(repos))
	for i, r := range repos {
		run, err := env.Client.ExecuteWorkflow(context.Background(), workflows.CollectOptions(r), workflows.Collect,
			workflows.CollectInput{Repo: r, Trigger: "manual", PlaceWait: fleetPlaceWait})
		if err != nil {
			b.Fatal(err)
		}
		runs[i] = run
	}
	return runs
}

// waitCollected waits until at least k of runs have ended, each
// successfully.
func (fr *fleetRun) waitCollected(b *testing.B, runs []client.WorkflowRun, k int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	done := make(chan error, len(runs))
	for _, run := range runs {
		go func() {
			var res workflows.CollectResult
			err := run.Get(ctx, &res)
			if err != nil {
				err = fmt.Errorf("collect %s: %w", run.GetID(), err)
			}
			done <- err
		}()
	}
	for range k {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// fleetState is where the mirrors are.
type fleetState struct {
	holders map[repoid.ID][]string // the workers holding a mirror of each
	bytes   map[repoid.ID][]int64  // and its size on each
	owned   map[string]int         // mirrors per worker
}

func (fr *fleetRun) state(b *testing.B, repos []repoid.ID) fleetState {
	b.Helper()
	st := fleetState{holders: map[repoid.ID][]string{}, bytes: map[repoid.ID][]int64{}, owned: map[string]int{}}
	for _, r := range repos {
		url := fg.CloneURL(r.Owner, r.Name)
		for _, p := range fr.procs {
			size, err := dirSize(p.mirrs.Path(url))
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			st.holders[r] = append(st.holders[r], p.id)
			st.bytes[r] = append(st.bytes[r], size)
			st.owned[p.id]++
		}
	}
	return st
}

// bytesOverOneCopy is all mirrors' bytes over one copy of each repository.
func (st fleetState) bytesOverOneCopy() float64 {
	var all, one int64
	for _, sizes := range st.bytes {
		for _, s := range sizes {
			all += s
		}
		one += slices.Max(sizes)
	}
	if one == 0 {
		return 0
	}
	return float64(all) / float64(one)
}

// spread is the largest worker's share of the mirrors over the mean.
func (st fleetState) spread(ids []string) float64 {
	total, most := 0, 0
	for _, id := range ids {
		total += st.owned[id]
		most = max(most, st.owned[id])
	}
	if total == 0 {
		return 0
	}
	return float64(most) / (float64(total) / float64(len(ids)))
}

func (st fleetState) shares(ids []string) string {
	var out []string
	for _, id := range ids {
		out = append(out, strconv.Itoa(st.owned[id]))
	}
	return strings.Join(out, "/")
}

// findings are each repository's findings as comparable strings, by the
// repository's index (the organizations hold the same repositories).
func (fr *fleetRun) findings(b *testing.B, repos []repoid.ID) map[string][]string {
	b.Helper()
	out := map[string][]string{}
	for _, r := range repos {
		var lines []string
		rows, err := env.Store.Pool().Query(context.Background(), `SELECT f.rule_id, f.path, f.line, f.commit_id, f.secret_hash
			FROM findings f JOIN scan_scopes sc ON sc.id = f.scope_id JOIN shards s ON s.id = sc.shard_id
			JOIN codebases c ON c.id = s.codebase_id
			WHERE c.host = $1 AND c.owner = $2 AND c.name = $3 ORDER BY 1, 2, 3, 4, 5`, r.Host, r.Owner, r.Name)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var rule, path, commit, hash string
			var line int
			if err := rows.Scan(&rule, &path, &line, &commit, &hash); err != nil {
				b.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%s %s:%d@%s %s", rule, path, line, commit, hash))
		}
		rows.Close()
		out[r.Name] = lines
	}
	return out
}

func sameFindings(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// findingsDelta counts, over every repository, the findings of before
// missing after (lost) and those after beyond before plus the one secret
// the churn commit planted (duplicated or unexpected).
func findingsDelta(b *testing.B, repos []repoid.ID, before, after map[string][]string) (lost, dup int) {
	b.Helper()
	for _, r := range repos {
		seen := map[string]int{}
		for _, f := range after[r.Name] {
			seen[f]++
		}
		for _, f := range before[r.Name] {
			if seen[f] == 0 {
				lost++
			}
			seen[f]--
		}
		planted := 0
		for f, k := range seen {
			switch {
			case k > 0 && strings.Contains(f, " "+churnPath+":") && planted == 0 && k == 1:
				planted++
			case k > 0:
				dup += k
			}
		}
		if planted == 0 {
			lost++ // the new secret was not found
		}
	}
	return lost, dup
}

// fleetRepos creates n repositories of commits each in org, generated with
// a secret early in their history; repository i has the same content (and
// commits) in every organization.
func fleetRepos(b *testing.B, org string, n, commits int) []repoid.ID {
	b.Helper()
	repos := make([]repoid.ID, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 4)
	for i := range n {
		name := fmt.Sprintf("r%03d", i)
		repos[i] = repoid.ID{Host: fg.Host(), Owner: org, Name: name}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := fg.CreateRepo(org, name); err != nil {
				errs <- err
				return
			}
			var stream bytes.Buffer
			err := repogen.Stream(&stream, repogen.Spec{Commits: commits, FilesPerCommit: 4, BlobSize: 1500, Refs: 3, Seed: int64(i),
				Secrets: []repogen.Secret{{Commit: commits / 2, Path: "deploy/credentials.conf", Content: "github = " + ghToken + "\n"}}})
			if err == nil {
				err = fg.Import(org, name, &stream)
			}
			if err != nil {
				errs <- fmt.Errorf("%s/%s: %w", org, name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return repos
}

// churnToken is a distinct GitHub token per repository (the churn's secret).
func churnToken(name string) string { return gittest.FakePAT("churn" + name) }

// placeKey is how placement names a repository (activities.placeKey): the
// URL it is cloned from.
func placeKey(r repoid.ID) string { return strings.ToLower(fg.CloneURL(r.Owner, r.Name)) }

// fetches sums the forge's fetches of repos, by kind: Full are the
// clones (no "have"), Shallow the fetches of one commit (depth 1, no
// "have": a commit verified where its mirror is missing).
func fetches(repos []repoid.ID) forge.Fetches {
	f := fg.Fetches()
	var n forge.Fetches
	for _, r := range repos {
		k := f[r.Owner+"/"+r.Name]
		n.Full, n.Incremental, n.Shallow = n.Full+k.Full, n.Incremental+k.Incremental, n.Shallow+k.Shallow
	}
	return n
}

// forgetAllWorkers deletes every workers row: workers of earlier tests in
// this binary (the shared id, or their own) must not own the benchmark's
// repositories.
func forgetAllWorkers(b *testing.B) {
	b.Helper()
	if _, err := env.Store.Pool().Exec(context.Background(), `DELETE FROM workers`); err != nil {
		b.Fatal(err)
	}
}

func dirSize(dir string) (int64, error) {
	if _, err := os.Stat(dir); err != nil {
		return 0, err
	}
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// done tells whether the process has exited.
func (w *workerProc) done() bool {
	select {
	case <-w.proc.Done():
		return true
	default:
		return false
	}
}

// databaseSize is gitfleet's database's size on disk.
func databaseSize(b *testing.B) int64 {
	b.Helper()
	var n int64
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
