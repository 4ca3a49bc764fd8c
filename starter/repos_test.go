package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
)

// park parks a shard as a run that met a repository's own trouble does.
func park(t *testing.T, shardID int64, reason string) {
	t.Helper()
	c, err := env.Store.AcquireShard(context.Background(), shardID, "test", time.Minute, true)
	if err != nil || c.Status != shard.Active {
		t.Fatalf("acquire: %+v, %v", c, err)
	}
	if err := env.Store.Park(context.Background(), c.Lease, reason); err != nil {
		t.Fatal(err)
	}
}

func parkedIDs(t *testing.T) map[int64]store.ParkedShard {
	t.Helper()
	out, errOut, code := starter(t, "repos", "--parked", "--json", "--limit", "100000")
	var res struct {
		Parked struct {
			Total  int64               `json:"total"`
			Shards []store.ParkedShard `json:"shards"`
		} `json:"parked"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("repos --parked --json: exit %d\n%s%s", code, out, errOut)
	}
	m := map[int64]store.ParkedShard{}
	for _, p := range res.Parked.Shards {
		m[p.ID] = p
	}
	return m
}

// An operator lists a repository's parked shard with its reason, retries
// it by the repository's name (which collects it again) and it is Done and
// listed no more.
func TestParkedRepositoryIsListedAndRetried(t *testing.T) {
	o, _ := newRepo(t)
	repo := fg.Host() + "/" + o + "/app"
	if out, errOut, code := starter(t, "collect", repo); code != 0 {
		t.Fatalf("collect: exit %d\n%s%s", code, out, errOut)
	}
	cb, err := env.Store.FindCodebase(context.Background(), mustParse(t, repo))
	if err != nil || cb == nil {
		t.Fatalf("codebase: %+v, %v", cb, err)
	}
	sh, err := env.Store.ShardByKey(context.Background(), shard.CodebaseKey(cb.ID))
	if err != nil || sh == nil {
		t.Fatalf("shard: %+v, %v", sh, err)
	}
	park(t, sh.ID, errclass.ReasonCorrupt)

	out, errOut, code := starter(t, "repos", "--parked")
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("%d ", sh.ID)) {
			line = l
		}
	}
	if code != 0 || !strings.Contains(line, "corrupt repository") || !strings.Contains(line, repo) ||
		!strings.Contains(out, "starter shard retry SHARD|REPO") {
		t.Fatalf("repos --parked: exit %d, line %q\n%s%s", code, line, out, errOut)
	}
	if p, ok := parkedIDs(t)[sh.ID]; !ok || p.Reason != errclass.ReasonCorrupt || p.Repo == nil || p.Repo.String() != repo {
		t.Fatalf("JSON of the parked shard: %+v, listed %t", p, ok)
	}

	out, errOut, code = starter(t, "shard", "retry", o+"/app")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("Shard %d (%s) un-parked: it was parked for \"corrupt repository\"", sh.ID, repo)) ||
		!strings.Contains(out, "Collected "+repo) {
		t.Fatalf("shard retry: exit %d\n%s%s", code, out, errOut)
	}
	if now, _ := env.Store.ShardByID(context.Background(), sh.ID); now.Status != shard.Done {
		t.Fatalf("shard after the retry: %+v, want Done", now)
	}
	if _, ok := parkedIDs(t)[sh.ID]; ok {
		t.Fatal("the retried shard is still listed as parked")
	}
	// Not parked any more: run again all the same, by its number.
	out, errOut, code = starter(t, "shard", "resume", fmt.Sprint(sh.ID), "--no-wait")
	if code != 0 || !strings.Contains(out, "is Done, not parked: running it again") || !strings.Contains(out, "workflow  collect:") {
		t.Fatalf("shard resume: exit %d\n%s%s", code, out, errOut)
	}
}

// A scan request's parked shard is retried by its number: its scan runs
// again.
func TestParkedScanIsRetried(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := repogen.Generate(dir, repogen.Spec{Commits: 5, FilesPerCommit: 2, BlobSize: 100, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := starter(t, "scan", dir); code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	var id int64
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT id FROM shards WHERE location = $1`, dir).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// Parked for a limit, it is listed with the setting that lets it
	// through; the JSON keeps the reason as the shard has it.
	reason := errclass.ReasonLimit + ": object size"
	park(t, id, reason)
	if p, ok := parkedIDs(t)[id]; !ok || p.Location != dir || p.Repo != nil || p.Reason != reason {
		t.Fatalf("parked scan shard: %+v, listed %t", p, ok)
	}
	if out, errOut, code := starter(t, "repos", "--parked"); code != 0 ||
		!strings.Contains(out, reason+" (raise GITFLEET_MAX_OBJECT_BYTES on the workers, then retry)") {
		t.Fatalf("repos --parked: exit %d, want the setting named\n%s%s", code, out, errOut)
	}
	out, errOut, code := starter(t, "shard", "retry", fmt.Sprint(id))
	if code != 0 || !strings.Contains(out, "un-parked") || !strings.Contains(out, "Scanned "+dir) {
		t.Fatalf("shard retry: exit %d\n%s%s", code, out, errOut)
	}
	if now, _ := env.Store.ShardByID(context.Background(), id); now.Status != shard.Done {
		t.Fatalf("shard after the retry: %+v, want Done (the same shard scanned again)", now)
	}
}

// The repositories out of the sweep are listed with their last failure;
// retrying one collects it and clears its failures.
func TestExcludedRepositoriesAreListed(t *testing.T) {
	o, _ := newRepo(t)
	repo := fg.Host() + "/" + o + "/app"
	if out, errOut, code := starter(t, "collect", repo); code != 0 {
		t.Fatalf("collect: exit %d\n%s%s", code, out, errOut)
	}
	cb, _ := env.Store.FindCodebase(context.Background(), mustParse(t, repo))
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE codebases SET consecutive_failures = $2 WHERE id = $1`,
		cb.ID, decay.MaxFailures); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Pool().Exec(context.Background(), `INSERT INTO collections (key, codebase_id, host, owner, name, status,
			error_class, error_message, workflow_id, run_id, started_at, finished_at)
		VALUES ($1, $2, $3, $4, 'app', 'failed', 'Permanent', 'collect: sync mirror: not found', 'w', 'r', now(), now())`,
		"excluded-"+o, cb.ID, fg.Host(), o); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := starter(t, "repos", "--excluded", "--limit", "100000")
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, repo+" ") {
			line = l
		}
	}
	if code != 0 || !strings.Contains(line, fmt.Sprintf("%d in a row", decay.MaxFailures)) ||
		!strings.Contains(line, "Permanent: collect: sync mirror: not found") || !strings.Contains(out, "starter collect REPO") {
		t.Fatalf("repos --excluded: exit %d, line %q\n%s%s", code, line, out, errOut)
	}
	if out, errOut, code := starter(t, "shard", "retry", repo); code != 0 || !strings.Contains(out, "not parked: running it again") {
		t.Fatalf("shard retry: exit %d\n%s%s", code, out, errOut)
	}
	if now, _ := env.Store.CodebaseByID(context.Background(), cb.ID); now.ConsecutiveFailures != 0 {
		t.Fatalf("failures after the retry: %d, want 0 (back in the sweep)", now.ConsecutiveFailures)
	}
}

// Bad input is refused before anything happens: exit 2.
func TestShardAndReposRefuseBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"shard", "retry", "99999999"},
		{"shard", "retry", "target:nothing"},
		{"shard", "retry", "not/a/repo/x"},
		{"shard", "retry", "nobody/nothing"},
		{"shard", "retry"},
		{"shard", "retry", "1", "2"},
		{"repos"},
		{"repos", "--parked", "--limit", "0"},
		{"repos", "extra", "--parked"},
	} {
		if out, errOut, code := starter(t, args...); code != exitUsage {
			t.Errorf("starter %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, exitUsage, out, errOut)
		}
	}
}
