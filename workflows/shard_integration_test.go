package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/shard"

	"go.temporal.io/sdk/client"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/target"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Planted secrets, built from parts so this file is not itself a finding.
var (
	ghToken = gittest.FakePAT("Zq7")
	awsKey  = "AKIA" + "QYLPMN5HJKZ4T7XW"
)

func commitFiles(t *testing.T, owner, name string, files map[string]string) string {
	t.Helper()
	sha, err := fg.Commit(owner, name, "main", files, "change")
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func findings(t *testing.T, key string) []store.Finding {
	t.Helper()
	sh, err := env.Store.ShardByKey(context.Background(), key)
	if err != nil || sh == nil {
		t.Fatalf("shard %s: %v, %v", key, sh, err)
	}
	fs, err := env.Store.Findings(context.Background(), sh.ID, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func rules(fs []store.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.RuleID+"@"+f.Path)
	}
	return out
}

func TestCollectScansForSecrets(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "README.md")
	first := commitFiles(t, o, "app", map[string]string{"config/ci.env": "GITHUB_TOKEN=" + ghToken + "\n", "src/main.go": "package main\n"})
	res, run, err := collectRun(t, id(o, "app"))
	if err != nil || res.Case != identity.CaseNew {
		t.Fatalf("collect: %+v, %v", res, err)
	}
	// The path every new run takes, under the baselines (collect-with-scan
	// and execute-shard-after-collect are the same path recorded before).
	recordHistory(t, "collect-baseline-1-new", run.GetID(), run.GetRunID())
	recordHistory(t, "execute-shard-baseline-1-new", run.GetID()+"/scan", "")
	if res.Scan == nil || res.Scan.Status != shard.Done || res.Scan.Receipt == nil || !res.Scan.Receipt.Complete {
		t.Fatalf("scan after collect: %+v", res.Scan)
	}
	key := shard.CodebaseKey(res.CodebaseID)
	fs := findings(t, key)
	var gh *store.Finding
	for i := range fs {
		if fs[i].RuleID == "github-pat" {
			gh = &fs[i]
		}
	}
	if gh == nil || gh.Path != "config/ci.env" || gh.Commit != first || gh.Line != 1 {
		t.Fatalf("findings %v, want github-pat in config/ci.env at %s", rules(fs), first)
	}
	for _, f := range fs {
		if strings.Contains(f.Preview, ghToken[4:12]) || strings.Contains(f.SecretHash, ghToken) {
			t.Fatalf("a finding holds secret material: %+v", f)
		}
	}
	scanned := res.Scan.Receipt.BlobsScanned

	// A new commit: only its new blob is scanned.
	commitFiles(t, o, "app", map[string]string{"deploy/aws.txt": "id " + awsKey + "\n"})
	res, run, err = collectRun(t, id(o, "app"))
	if err != nil || res.Case != identity.CaseSame || res.Scan == nil {
		t.Fatalf("collect after a commit: %+v, %v", res, err)
	}
	// A re-collection of a changed repository: the path most runs take.
	recordHistory(t, "collect-baseline-1-changed", run.GetID(), run.GetRunID())
	if r := res.Scan.Receipt; r.BlobsScanned != 1 || r.Findings != 1 {
		t.Fatalf("incremental scan: %+v, want 1 blob and 1 new finding (first scan: %d blobs)", r, scanned)
	}
	// Nothing new: nothing scanned, nothing duplicated.
	res = mustCollect(t, id(o, "app"), identity.CaseSame)
	if r := res.Scan.Receipt; r.BlobsScanned != 0 || r.Findings != 0 {
		t.Fatalf("unchanged re-scan: %+v", r)
	}
	if n := len(findings(t, key)); n != len(fs)+1 {
		t.Fatalf("%d findings after re-scans, want %d", n, len(fs)+1)
	}
}

func TestRenamedRepositoryContinuesAndRecreatedStartsAfresh(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app", "a.txt", "b.txt")
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	if err := fg.Rename(o, "app", "app2"); err != nil {
		t.Fatal(err)
	}
	moved := mustCollect(t, id(o, "app2"), identity.CaseMoved)
	if moved.Scan.ShardID != first.Scan.ShardID || moved.Scan.Receipt.BlobsScanned != 0 {
		t.Fatalf("renamed: shard %d (was %d), scanned %d blobs; want the same shard and nothing new",
			moved.Scan.ShardID, first.Scan.ShardID, moved.Scan.Receipt.BlobsScanned)
	}
	if err := fg.Delete(o, "app2"); err != nil {
		t.Fatal(err)
	}
	createRepo(t, o, "app2", "other.txt")
	recreated := mustCollect(t, id(o, "app2"), identity.CaseReplaced)
	if recreated.Scan.ShardID == first.Scan.ShardID || recreated.Scan.Receipt.BlobsScanned == 0 {
		t.Fatalf("recreated: shard %d, scanned %d blobs; want a new shard scanned from scratch",
			recreated.Scan.ShardID, recreated.Scan.Receipt.BlobsScanned)
	}
}

// A force push leaves the watermark unreachable: the history is walked
// again, but seen blobs are not scanned again.
func TestForcePushRescansOnlyNewBlobs(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app")
	files := map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n", "c.env": "token " + ghToken + "\n"}
	commitFiles(t, o, "app", files)
	first := mustCollect(t, id(o, "app"), identity.CaseNew)
	files["d.txt"] = "delta\n"
	if _, err := fg.ForcePush(o, "app", "main", files, "rewritten"); err != nil {
		t.Fatal(err)
	}
	res := mustCollect(t, id(o, "app"), identity.CaseForcePush)
	if r := res.Scan.Receipt; r.BlobsScanned != 1 || r.Findings != 0 || !r.Complete {
		t.Fatalf("after force push: %+v, want exactly the one new blob scanned", r)
	}
	if n := len(findings(t, shard.CodebaseKey(first.CodebaseID))); n != 1 {
		t.Fatalf("%d findings, want 1", n)
	}
}

func startScan(t *testing.T, tg target.Target, max time.Duration) client.WorkflowRun {
	t.Helper()
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.ShardWorkflowID(tg.Key()), TaskQueue: workflows.TaskQueue,
	}, workflows.ExecuteShard, workflows.ExecuteShardInput{
		Spec:        shard.Spec{Key: tg.Key(), Target: tg},
		MaxDuration: max,
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func runScan(t *testing.T, tg target.Target, max time.Duration) workflows.ExecuteShardResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.ExecuteShardResult
	if err := startScan(t, tg, max).Get(ctx, &res); err != nil {
		parked, ok := workflows.ParkedResult(err) // a parked shard fails its run
		if !ok {
			t.Fatalf("scan %s: %v", tg.Location, err)
		}
		res = parked
	}
	return res
}

func normalized(t *testing.T, reqs ...target.Request) []target.Target {
	t.Helper()
	n, err := target.Normalize(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return n.Targets
}

func TestScanLocalRepositoryWithSelections(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo.git")
	info, err := repogen.Generate(dir, repogen.Spec{Commits: 40, FilesPerCommit: 3, Refs: 4, BlobSize: 300, Seed: 7,
		Secrets: []repogen.Secret{{Commit: 10, Path: "conf/settings.py", Content: "GITHUB = '" + ghToken + "'\n"}}})
	if err != nil {
		t.Fatal(err)
	}
	all := normalized(t, target.Request{Location: dir})[0]
	res := runScan(t, all, 0)
	if res.Status != shard.Done || res.Receipt.Commits != 40 || res.Receipt.BlobsScanned == 0 {
		t.Fatalf("full scan: %+v %+v", res, res.Receipt)
	}
	fs := findings(t, all.Key())
	if len(fs) != 1 || fs[0].Path != "conf/settings.py" || fs[0].Commit != info.Commits[10] {
		t.Fatalf("findings %+v, want the planted secret at commit 10", fs)
	}

	// An explicit commit before the secret was planted: a synthetic ref.
	early := normalized(t, target.Request{Location: dir, Commits: []string{info.Commits[5]}})[0]
	res = runScan(t, early, 0)
	if res.Status != shard.Done || res.Receipt.Commits != 6 || res.Receipt.Findings != 0 {
		t.Fatalf("scan of commit 5: %+v %+v", res, res.Receipt)
	}
	sh, _ := env.Store.ShardByKey(context.Background(), early.Key())
	scope, _ := env.Store.Scope(context.Background(), sh.ID, scannerPolicy(t))
	marks, _ := env.Store.Watermarks(context.Background(), scope)
	if marks[target.SyntheticRef(info.Commits[5])] != info.Commits[5] || len(marks) != 1 {
		t.Fatalf("watermarks %v, want the synthetic ref of commit 5", marks)
	}

	// A named ref, and selections that cannot be satisfied park the shard.
	if res := runScan(t, normalized(t, target.Request{Location: dir, Refs: []string{"main"}})[0], 0); res.Status != shard.Done {
		t.Fatalf("scan of main: %+v", res)
	}
	for _, tt := range []struct {
		req    target.Request
		reason string
	}{
		{target.Request{Location: dir, Refs: []string{"no-such-branch"}}, errclass.ReasonNotFound},
		{target.Request{Location: dir, Commits: []string{strings.Repeat("ab", 20)}}, errclass.ReasonNotFound},
		{target.Request{Location: filepath.Join(t.TempDir(), "nothing-here")}, errclass.ReasonNotFound},
	} {
		if res := runScan(t, normalized(t, tt.req)[0], 0); res.Status != shard.Parked || res.ParkReason != tt.reason {
			t.Errorf("scan of %+v: %+v, want parked (%s)", tt.req, res, tt.reason)
		}
	}
}

func scannerPolicy(t *testing.T) string {
	t.Helper()
	s, err := activities.NewScanner("", testFindingKey)
	if err != nil {
		t.Fatal(err)
	}
	return s.Policy()
}

func TestPartialScanNeverMovesWatermarks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 60, FilesPerCommit: 5, BlobSize: 200, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	tg := normalized(t, target.Request{Location: dir})[0]
	res := runScan(t, tg, time.Nanosecond) // the budget is spent after the first batch
	if res.Status != shard.Active || res.Receipt.Complete {
		t.Fatalf("budgeted scan: %+v %+v, want Active and Partial", res, res.Receipt)
	}
	scope, _ := env.Store.Scope(context.Background(), res.ShardID, scannerPolicy(t))
	if marks, _ := env.Store.Watermarks(context.Background(), scope); len(marks) != 0 {
		t.Fatalf("a Partial scan moved watermarks: %v", marks)
	}
	partial := res.Receipt.BlobsScanned
	res = runScan(t, tg, 0)
	if res.Status != shard.Done || !res.Receipt.Complete {
		t.Fatalf("follow-up scan: %+v", res)
	}
	if total := partial + res.Receipt.BlobsScanned; total != 300 {
		t.Fatalf("blobs scanned %d + %d = %d, want each of the 300 exactly once", partial, res.Receipt.BlobsScanned, total)
	}
}

// Invariant 8: duplicate submission shares a run; submitting again later
// continues and duplicates nothing.
func TestDuplicateScanSubmissions(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "app")
	commitFiles(t, o, "app", map[string]string{"x.env": "T=" + ghToken + "\n", "y.txt": awsKey + "\n"})
	tg := normalized(t, target.Request{Location: fg.CloneURL(o, "app")})[0]
	a, b := startScan(t, tg, 0), startScan(t, tg, 0)
	if a.GetRunID() != b.GetRunID() {
		t.Fatalf("identical submissions started runs %s and %s", a.GetRunID(), b.GetRunID())
	}
	var res workflows.ExecuteShardResult
	if err := a.Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	// execute-shard.json holds a run recorded before one-mirror-sync.
	recordHistory(t, "execute-shard-one-sync", a.GetID(), a.GetRunID())
	before := findings(t, tg.Key())
	again := runScan(t, tg, 0)
	if again.Receipt.BlobsScanned != 0 || again.Receipt.Findings != 0 || again.ShardID != res.ShardID {
		t.Fatalf("second submission: %+v", again.Receipt)
	}
	if after := findings(t, tg.Key()); len(after) != len(before) || len(before) < 2 {
		t.Fatalf("findings %d then %d", len(before), len(after))
	}
}

func TestPrivateRepositoryScanIsParked(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "secret", "a.txt")
	if err := fg.SetPrivate(o, "secret", true); err != nil {
		t.Fatal(err)
	}
	res := runScan(t, normalized(t, target.Request{Location: fg.CloneURL(o, "secret")})[0], 0)
	if res.Status != shard.Parked || res.ParkReason != errclass.ReasonPermissionDenied {
		t.Fatalf("scan of a private repository: %+v", res)
	}
}

func TestPhaseIsQueryable(t *testing.T) {
	o := owner(t)
	createRepo(t, o, "slow", "a.txt")
	// The repository's Git requests wait until the test has seen the
	// mirror sync phase, so the phase cannot pass unseen.
	synced := make(chan struct{})
	release := sync.OnceFunc(func() { close(synced) })
	defer release()
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, Path: "/" + o + "/", Before: func(*http.Request) { <-synced }})
	defer remove()
	tg := normalized(t, target.Request{Location: fg.CloneURL(o, "slow")})[0]
	run := startScan(t, tg, 0)
	seen := map[workflows.Phase]bool{}
	phase := func() (workflows.Phase, error) {
		v, err := env.Client.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), workflows.PhaseQuery)
		var p workflows.Phase
		if err == nil {
			err = v.Get(&p)
		}
		return p, err
	}
	// Temporal pushes no phase changes: the query is polled.
	poll.Until(t, "the mirror sync phase", time.Minute, func() (bool, string) {
		p, err := phase()
		if err == nil {
			seen[p] = true
		}
		return seen[workflows.PhaseMirrorSync], fmt.Sprintf("phase %s (%v)", p, err)
	})
	release()
	if err := run.Get(ctxTimeout(t, time.Minute), nil); err != nil {
		t.Fatalf("scan: %v", err)
	}
	// A finished run still answers queries: its last phase.
	if p, err := phase(); err == nil {
		seen[p] = true
	} else {
		t.Fatalf("phase query of the finished run: %v", err)
	}
	if !seen[workflows.PhaseMirrorSync] || !seen[workflows.PhaseOuterCheckpointed] {
		t.Fatalf("phases seen: %v", seen)
	}
	sh, _ := env.Store.ShardByKey(context.Background(), tg.Key())
	if sh.Status != shard.Done {
		t.Fatalf("persisted status %s, want Done (phases are never persisted)", sh.Status)
	}
}
