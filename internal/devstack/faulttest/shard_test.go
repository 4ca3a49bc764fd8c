package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/target"
	"gitfleet/workflows"
)

// Planted secrets, built from parts so this file is not itself a finding.
var (
	ghToken = gittest.FakePAT("Wd8")
	awsKey  = "AKIA" + "ZRT5MNQ7XKJH2LWP"
)

const secretPath = "deploy/credentials.conf"

// bigRepo generates a repository large enough that a scan takes a while,
// with secrets planted at three points of its history, and returns n
// identical copies (distinct paths: distinct shards).
func bigRepo(t *testing.T, n int) ([]string, repogen.Info) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo0.git")
	info, err := repogen.Generate(dir, repogen.Spec{Commits: 3000, FilesPerCommit: 6, BlobSize: 3000, Refs: 20, Seed: 42,
		Secrets: []repogen.Secret{
			{Commit: 200, Path: secretPath, Content: "github = " + ghToken + "\n"},
			{Commit: 1500, Path: "ops/aws.ini", Content: "aws_access_key_id = " + awsKey + "\n"},
			{Commit: 2900, Path: "ci/env.sh", Content: "export TOKEN=" + ghToken + "\n"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{dir}
	for i := 1; i < n; i++ {
		cp := filepath.Join(t.TempDir(), fmt.Sprintf("repo%d.git", i))
		if out, err := exec.Command("cp", "-a", dir, cp).CombinedOutput(); err != nil {
			t.Fatalf("copy: %v %s", err, out)
		}
		dirs = append(dirs, cp)
	}
	return dirs, info
}

func targetOf(t *testing.T, dir string) target.Target {
	t.Helper()
	n, err := target.Normalize([]target.Request{{Location: dir}})
	if err != nil {
		t.Fatal(err)
	}
	return n.Targets[0]
}

func startScan(t *testing.T, tg target.Target) client.WorkflowRun {
	t.Helper()
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.ShardWorkflowID(tg.Key()), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.ExecuteShard, workflows.ExecuteShardInput{
		Spec: shard.Spec{Key: tg.Key(), Target: target.Target{Location: tg.Location, Local: true, Selection: tg.Selection}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func result(t *testing.T, run client.WorkflowRun, within time.Duration) workflows.ExecuteShardResult {
	t.Helper()
	var res workflows.ExecuteShardResult
	if err := run.Get(ctxTimeout(t, within), &res); err != nil {
		parked, ok := workflows.ParkedResult(err) // a parked shard fails its run
		if !ok {
			t.Fatalf("scan: %v", err)
		}
		res = parked
	}
	return res
}

// findingsOf is a shardID's findings as comparable strings.
func findingsOf(t *testing.T, key string) []string {
	t.Helper()
	sh, err := env.Store.ShardByKey(context.Background(), key)
	if err != nil || sh == nil {
		t.Fatalf("shard %s: %v", key, err)
	}
	fs, err := env.Store.Findings(context.Background(), sh.ID, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s:%d@%d %s %s %s", f.RuleID, f.Path, f.Line, f.Start, f.Commit, f.BlobHex, f.SecretHash))
	}
	return out
}

func seenBlobs(t *testing.T, key string) (seen, receipts int) {
	t.Helper()
	err := env.Store.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM seen_blob_ids b JOIN scan_scopes s ON s.id = b.scope_id JOIN shards sh ON sh.id = s.shard_id WHERE sh.key = $1),
		(SELECT count(*) FROM shard_receipts r JOIN shards sh ON sh.id = r.shard_id WHERE sh.key = $1)`, key).Scan(&seen, &receipts)
	if err != nil {
		t.Fatal(err)
	}
	return seen, receipts
}

// waitMidScan waits until some batches of the scan are durable and its
// finalize is not.
func waitMidScan(t *testing.T, key string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		seen, receipts := seenBlobs(t, key)
		if receipts > 0 {
			t.Fatal("the scan finished before the fault could be injected")
		}
		if seen > 0 {
			return seen
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the scan did not start")
	return 0
}

func equalFindings(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("findings differ from an uninterrupted run:\ngot  %d:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"),
			len(want), strings.Join(want, "\n"))
	}
	if len(want) < 3 {
		t.Fatalf("the reference run found %d secrets, want at least the 3 planted", len(want))
	}
}

// A worker SIGKILLed mid-scan and replaced yields exactly the findings of an
// uninterrupted run, and a worker stopped mid-scan (a zombie) that resumes
// after its replacement took over cannot write.
func TestWorkerFaultsMidScan(t *testing.T) {
	dirs, info := bigRepo(t, 3)
	first := startWorker(t)

	ref := targetOf(t, dirs[0])
	refRes := result(t, startScan(t, ref), 3*time.Minute)
	if refRes.Status != shard.Done || refRes.Receipt == nil {
		t.Fatalf("reference scan: %+v", refRes)
	}
	want := findingsOf(t, ref.Key())
	wantSeen, _ := seenBlobs(t, ref.Key())

	t.Run("SIGKILL", func(t *testing.T) {
		tg := targetOf(t, dirs[1])
		run := startScan(t, tg)
		at := waitMidScan(t, tg.Key())
		first.signal(syscall.SIGKILL)
		<-first.proc.Done()
		t.Logf("killed %s after %d blobs were durable", first.name, at)
		startWorker(t)
		res := result(t, run, 3*time.Minute)
		if res.Status != shard.Done || res.Receipt == nil || !res.Receipt.Complete {
			t.Fatalf("scan after the kill: %+v", res)
		}
		equalFindings(t, findingsOf(t, tg.Key()), want)
		if seen, receipts := seenBlobs(t, tg.Key()); seen != wantSeen || receipts != 1 {
			t.Fatalf("%d seen blobs and %d receipts, want %d and 1", seen, receipts, wantSeen)
		}
		// The receipt counts the scan, the killed attempt's batches too.
		got, want := res.Receipt.Counts, refRes.Receipt.Counts
		if got.BlobsScanned != want.BlobsScanned || got.BytesScanned != want.BytesScanned || got.BlobsSkipped != want.BlobsSkipped ||
			got.Findings != want.Findings {
			t.Fatalf("after the kill the scan reports %d blobs (%d bytes, %d skipped), %d new findings; uninterrupted: %d (%d, %d), %d",
				got.BlobsScanned, got.BytesScanned, got.BlobsSkipped, got.Findings, want.BlobsScanned, want.BytesScanned, want.BlobsSkipped, want.Findings)
		}
	})

	t.Run("zombie", func(t *testing.T) {
		zombie := startWorker(t)
		// Only the zombie-to-be may pick the scan up: stop the others.
		for _, w := range liveWorkersExcept(zombie) {
			w.signal(syscall.SIGKILL)
			<-w.proc.Done()
		}
		tg := targetOf(t, dirs[2])
		run := startScan(t, tg)
		waitMidScan(t, tg.Key())
		zombie.signal(syscall.SIGSTOP)
		stoppedAt := len(zombie.logs())
		sh, _ := env.Store.ShardByKey(context.Background(), tg.Key())
		zombieFence := sh.Fence
		replacement := startWorker(t)
		defer func() {
			if t.Failed() {
				t.Logf("replacement log:\n%s", tail(replacement.logs(), 4000))
			}
		}()

		var res workflows.ExecuteShardResult
		if err := run.Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
			// The zombie may have been stopped inside a transaction that
			// holds the shardID row: let it finish that one write.
			zombie.signal(syscall.SIGCONT)
			res = result(t, run, 2*time.Minute)
		}
		zombie.signal(syscall.SIGCONT)
		// The zombie's attempt meets the new fence (its lease keeper or a
		// batch write) or its cancellation and returns: after that it
		// cannot write, so what the database holds is final.
		zombie.waitLog(t, stoppedAt, "scan stopped", 2*time.Minute)
		if res.Status != shard.Done {
			t.Fatalf("scan with a zombie: %+v", res)
		}
		if res.Receipt.Fence <= zombieFence {
			t.Fatalf("receipt of fence %d, the zombie held %d: the replacement did not fence it off", res.Receipt.Fence, zombieFence)
		}
		var zombieReceipts int
		_ = env.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM shard_receipts WHERE shard_id = $1 AND fence = $2`,
			sh.ID, zombieFence).Scan(&zombieReceipts)
		if zombieReceipts != 0 {
			t.Fatal("the zombie finalized")
		}
		equalFindings(t, findingsOf(t, tg.Key()), want)
		if seen, _ := seenBlobs(t, tg.Key()); seen != wantSeen {
			t.Fatalf("%d seen blobs, want %d", seen, wantSeen)
		}
		if !bytes.Contains(zombie.logs(), []byte("StaleOwner")) && !bytes.Contains(zombie.logs(), []byte("interrupted")) {
			t.Logf("zombie log tail:\n%s", tail(zombie.logs(), 2000))
			t.Fatal("the zombie's attempt did not end on a fence or cancellation")
		}
	})

	// A collection through the forge (API token in use), then another on a
	// fresh worker whose mirror directory is empty: it mirrors again and
	// scans only what is new.
	t.Run("collect on another worker", func(t *testing.T) {
		if _, err := fg.CreateRepo("acme", "app"); err != nil {
			t.Fatal(err)
		}
		if _, err := fg.Commit("acme", "app", "main", map[string]string{secretPath: "gh " + ghToken + "\n", "README": "hi\n"}, "init"); err != nil {
			t.Fatal(err)
		}
		repo := repoid.ID{Host: fg.Host(), Owner: "acme", Name: "app"}
		collect := func() workflows.CollectResult {
			run, err := env.Client.ExecuteWorkflow(context.Background(), workflows.CollectOptions(repo), workflows.Collect,
				workflows.CollectInput{Repo: repo, Trigger: "manual"})
			if err != nil {
				t.Fatal(err)
			}
			var res workflows.CollectResult
			if err := run.Get(ctxTimeout(t, 2*time.Minute), &res); err != nil {
				for _, id := range []string{run.GetID(), run.GetID() + "/identity", run.GetID() + "/scan"} {
					if d, derr := env.Client.DescribeWorkflowExecution(context.Background(), id, ""); derr == nil {
						t.Logf("%s: %s pending %v", id, d.GetWorkflowExecutionInfo().GetStatus(), d.GetPendingActivities())
					}
				}
				t.Fatal(err)
			}
			return res
		}
		// Workers started by earlier subtests ended with them.
		w := startWorker(t)
		first := collect()
		if first.Scan == nil || first.Scan.Receipt == nil || first.Scan.Receipt.Findings != 1 {
			t.Fatalf("first collection: %+v", first.Scan)
		}
		w.kill()
		startWorker(t)
		if _, err := fg.Commit("acme", "app", "main", map[string]string{"ops/keys.txt": awsKey + "\n"}, "more"); err != nil {
			t.Fatal(err)
		}
		second := collect()
		if r := second.Scan.Receipt; r == nil || r.BlobsScanned != 1 || r.Findings != 1 || second.Scan.ShardID != first.Scan.ShardID {
			t.Fatalf("collection on a fresh worker: %+v", second.Scan)
		}
	})

	t.Run("no secrets in logs or histories", func(t *testing.T) {
		logs := allWorkerLogs(t)
		for name, s := range map[string]string{"github token": ghToken, "aws key": awsKey, "forge token": forgeToken,
			"file path": secretPath, "commit of a planted secret": info.Commits[200], "another": info.Commits[1500]} {
			if bytes.Contains(logs, []byte(s)) {
				t.Errorf("worker logs hold the %s", name)
			}
		}
		histories := allHistories(t)
		for name, s := range map[string]string{"github token": ghToken, "aws key": awsKey, "forge token": forgeToken} {
			if strings.Contains(histories, s) {
				t.Errorf("workflow histories hold the %s", name)
			}
		}
		if len(logs) == 0 || histories == "" {
			t.Fatal("nothing to inspect")
		}
	})
}

var started []*workerProc

func liveWorkersExcept(keep *workerProc) []*workerProc {
	var out []*workerProc
	for _, w := range started {
		select {
		case <-w.proc.Done():
		default:
			if w != keep {
				out = append(out, w)
			}
		}
	}
	return out
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// allHistories is every event of every workflow in the namespace, as text.
func allHistories(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	var token []byte
	for {
		resp, err := env.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: env.Namespace, NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Executions {
			it := env.Client.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				sb.WriteString(ev.String())
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return sb.String()
		}
	}
}
