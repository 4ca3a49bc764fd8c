package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/bombs"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/config"
	"gitfleet/workflows"
)

// memorySecret is planted beside the bombs: a scan that reads around them
// reports it.
var memorySecret = gittest.FakePAT("MemB0")

// BenchmarkWorkerMemory is the figure behind the README's memory bound: one
// real worker process, on its defaults, scans every hostile repository of
// the reviews at once — the archive bombs (bombs.All) in a repository,
// the pack bombs (a delta bomb of 64 GiB, a delta declaring 2^40 bytes, a
// delta cycle, a tree 5,000 deep beside a secret) and four delta levels
// of 239 MiB each (a pack of 403 bytes), local and fetched over smart
// HTTP — twice over, more scans than the worker has Git slots. It prints the worker's peak RSS
// (VmHWM) beside its idle RSS and the settings that bound it, and how
// each scan ended, with the reasons of the holes left. Every scan must end
// (parked or partial, never "complete" past a bomb); the figure is
// printed, not asserted. (A fetched crafted chain's top is indexed under
// its real id, which its tree does not name — nobody computes a 239 MiB
// target's hash to craft it — so that scan records a missing hole.)
func BenchmarkWorkerMemory(b *testing.B) {
	dir := b.TempDir()
	var targets []target.Target
	for copy := range 2 {
		local := func(name string, build func(string) error) {
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.git", name, copy))
			if err := build(p); err != nil {
				b.Fatal(err)
			}
			targets = append(targets, normalizedTarget(b, p))
		}
		local("archives", archiveBombRepo(b))
		for _, c := range []*gittest.Crafted{
			gittest.OneOfEach(5000, map[string]string{"ci.env": "GITHUB_TOKEN=" + memorySecret + "\n"}),
			gittest.NestedDeltas(239<<20, 239<<20, 239<<20, 239<<20),
		} {
			local(c.Name, c.WriteRepo)
			srv := httptest.NewServer(&gittest.PackServer{Pack: c.Bytes(), Commit: c.Commit})
			b.Cleanup(srv.Close)
			targets = append(targets, normalizedTarget(b, fmt.Sprintf("%s/fetched/%s-%d.git", srv.URL, c.Name, copy)))
		}
	}

	w := startWorker(b, config.EnvWorkerID+"=memory-bench", config.EnvLogLevel+"=info",
		config.EnvAllowedHosts+"=127.0.0.1")
	idle := vmHWM(w.pid())
	start := time.Now()
	runs := make([]client.WorkflowRun, len(targets))
	for i, tg := range targets {
		run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: workflows.ShardWorkflowID(tg.Key()), TaskQueue: workflows.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, workflows.ExecuteShard, workflows.ExecuteShardInput{Spec: shard.Spec{Key: tg.Key(), Target: tg}})
		if err != nil {
			b.Fatal(err)
		}
		runs[i] = run
	}
	type ended struct {
		res workflows.ExecuteShardResult
		err error
	}
	results := make([]ended, len(runs))
	for i, run := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		var res workflows.ExecuteShardResult
		err := run.Get(ctx, &res)
		cancel()
		if parked, ok := workflows.ParkedResult(err); ok {
			res, err = parked, nil
		}
		results[i] = ended{res, err}
	}
	took := time.Since(start)
	peak := vmHWM(w.pid())

	fmt.Printf("\nBenchmarkWorkerMemory: one worker, %d hostile scans started at once\n", len(targets))
	fmt.Printf("  worker settings: %s\n", startSettings(w.logs()))
	for i, tg := range targets {
		r := results[i]
		fmt.Printf("  %-62s %s\n", shortTarget(tg.Location), describe(r.res, r.err))
		if rc := r.res.Receipt; rc != nil && rc.Holes > 0 {
			fmt.Printf("  %-62s holes: %s\n", "", holeReasons(b, rc.ScopeID))
		}
		if r.err != nil {
			b.Errorf("%s: %v", tg.Location, r.err)
		} else if rc := r.res.Receipt; r.res.Status != shard.Parked && (rc == nil || rc.Complete) {
			b.Errorf("%s: %s, complete past its bombs", tg.Location, describe(r.res, r.err))
		}
	}
	fmt.Printf("  worker peak RSS %d MiB (idle after start: %d MiB), all scans ended in %s\n\n",
		peak>>20, idle>>20, took.Round(100*time.Millisecond))
	b.ReportMetric(float64(peak>>20), "peak-RSS-MiB")
}

// archiveBombRepo builds a bare repository whose one commit holds every
// archive bomb beside a file with a secret.
func archiveBombRepo(b *testing.B) func(string) error {
	all, err := bombs.All()
	if err != nil {
		b.Fatal(err)
	}
	return func(repo string) error {
		git := func(stdin []byte, args ...string) string {
			return strings.TrimSpace(gittest.Git(b, repo, bytes.NewReader(stdin), args...))
		}
		if err := os.MkdirAll(repo, 0o755); err != nil {
			return err
		}
		git(nil, "init", "--bare", "-q")
		var tree strings.Builder
		for _, bomb := range all {
			fmt.Fprintf(&tree, "100644 blob %s\t%s\n", git(bomb.Data, "hash-object", "-w", "--stdin"), bomb.Name)
		}
		fmt.Fprintf(&tree, "100644 blob %s\tci.env\n", git([]byte("GITHUB_TOKEN="+memorySecret+"\n"), "hash-object", "-w", "--stdin"))
		commit := git(nil, "commit-tree", git([]byte(tree.String()), "mktree"), "-m", "bombs")
		git(nil, "update-ref", "refs/heads/main", commit)
		return nil
	}
}

func normalizedTarget(b *testing.B, location string) target.Target {
	n, err := target.Normalize([]target.Request{{Location: location}})
	if err != nil {
		b.Fatal(err)
	}
	return n.Targets[0]
}

// startSettings is what the worker said it runs with.
func startSettings(logs []byte) string {
	for _, line := range bytes.Split(logs, []byte("\n")) {
		var l map[string]any
		if json.Unmarshal(line, &l) != nil || l["scanParallelism"] == nil {
			continue
		}
		return fmt.Sprintf("scan parallelism %v, Git slots %v, object limit %s, archive walks %d of 64 MiB",
			l["scanParallelism"], l["activitySlots"], envOr(config.EnvMaxObjectBytes, "256MiB"), scan.DefaultArchiveWalks)
	}
	return "(not logged)"
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func shortTarget(location string) string {
	if i := strings.LastIndex(location, "/"); i >= 0 && !strings.Contains(location, "://") {
		return location[i+1:]
	}
	return location
}

func describe(res workflows.ExecuteShardResult, err error) string {
	switch {
	case err != nil:
		return "failed: " + err.Error()
	case res.Status == shard.Parked:
		return "parked: " + res.ParkReason
	case res.Receipt == nil:
		return string(res.Status)
	}
	r := res.Receipt
	state := "partial"
	if r.Complete {
		state = "complete"
	}
	return fmt.Sprintf("%s, %s: %d blobs scanned, %d skipped, %d refused, %d holes, %d findings",
		res.Status, state, r.BlobsScanned, r.BlobsSkipped, r.Refused, r.Holes, r.Findings)
}

// holeReasons lists a scope's holes: reason, lost or not, attempts.
func holeReasons(b *testing.B, scopeID int64) string {
	rows, err := env.Store.Pool().Query(context.Background(),
		`SELECT reason, lost, attempts FROM shard_holes WHERE scope_id = $1 ORDER BY first_at`, scopeID)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var reason string
		var lost bool
		var attempts int
		if err := rows.Scan(&reason, &lost, &attempts); err != nil {
			b.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s (lost %t, %d attempts)", reason, lost, attempts))
	}
	return strings.Join(out, "; ")
}
