package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gitfleet/internal/domain/shard"
	"gitfleet/internal/domain/target"
	"gitfleet/workflows"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/repogen"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
)

// The benchmarks run the scan in a child process (this test binary again,
// see scanHelper) so that its peak RSS can be measured like gitleaks'.
const helperEnv = "GITFLEET_SCAN_HELPER"

// helperResult is the receipt and the time ScanShard itself took (a
// worker is long-running: process start and rule compilation happen once).
type helperResult struct {
	Receipt     shard.Receipt `json:"receipt"`
	ScanSeconds float64       `json:"scanSeconds"`
}

type helperRequest struct {
	DatabaseURL string `json:"databaseUrl"`
	Repo        string `json:"repo"`
	Key         string `json:"key"`
}

// scanHelper runs one full ScanShard of a local repository and prints its
// receipt; TestMain calls it instead of the tests when helperEnv is set.
func scanHelper(raw string) int {
	var req helperRequest
	if err := json.Unmarshal([]byte(raw), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	st, err := store.Open(ctx, req.DatabaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	sc, err := activities.NewScanner(ctx, st, "", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s := &activities.Shards{Store: st, Scanner: sc}
	spec := shard.Spec{Key: req.Key, Target: target.Target{Location: req.Repo, Local: true}}
	id, err := s.EnsureShard(ctx, spec)
	if err == nil {
		var c workflows.Claim
		if c, err = s.AcquireShard(ctx, workflows.AcquireShardInput{ShardID: id, Owner: "bench", Rearm: true}); err == nil {
			var out helperResult
			start := time.Now()
			if out.Receipt, err = s.ScanShard(ctx, workflows.ShardWork{Lease: c.Lease, Spec: spec}); err == nil {
				out.ScanSeconds = time.Since(start).Seconds()
				_, err = s.CheckpointShard(ctx, workflows.CheckpointInput{Lease: c.Lease, ReceiptID: out.Receipt.ID})
				_ = json.NewEncoder(os.Stdout).Encode(out)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type measured struct {
	wall   time.Duration
	maxRSS int64 // bytes
	out    []byte
}

func run(b *testing.B, cmd *exec.Cmd) measured {
	b.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
	m := measured{wall: time.Since(start), out: []byte(stdout.String())}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.maxRSS = ru.Maxrss * 1024
	}
	return m
}

func ourScan(b *testing.B, repo, key string) (measured, helperResult) {
	b.Helper()
	req, _ := json.Marshal(helperRequest{DatabaseURL: env.DatabaseURL, Repo: repo, Key: key})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+string(req))
	m := run(b, cmd)
	var r helperResult
	if err := json.Unmarshal(m.out, &r); err != nil {
		b.Fatalf("helper output: %v: %s", err, m.out)
	}
	return m, r
}

func gitleaksPath() string {
	if p, err := exec.LookPath("gitleaks"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	if p := filepath.Join(gopath, "bin", "gitleaks"); fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// addCommit adds one small commit on top of HEAD of a bare repository.
func addCommit(b *testing.B, bare string) {
	b.Helper()
	git := func(stdin string, args ...string) string {
		return strings.TrimSpace(gittest.Git(b, bare, strings.NewReader(stdin), args...))
	}
	blob := git("one more line of configuration\nlevel = 3\n", "hash-object", "-w", "--stdin")
	tree := git(git("", "ls-tree", "HEAD")+"\n100644 blob "+blob+"\tgitfleet-bench-new.txt\n", "mktree")
	git("", "update-ref", "HEAD", git("", "commit-tree", tree, "-p", "HEAD", "-m", "one more"))
}

// cloneMirror runs `git clone --mirror` as a user would.
func cloneMirror(b *testing.B, src, dst string) {
	b.Helper()
	if out, err := exec.Command("git", "clone", "--quiet", "--mirror", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("git clone --mirror %s: %v %s", src, err, out)
	}
}

// benchRepo is the repository to measure: GITFLEET_BENCH_REPO (any local
// repository, copied so it is not modified) or a generated one.
func benchRepo(b *testing.B) (path, label string) {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "bench.git")
	if src := os.Getenv("GITFLEET_BENCH_REPO"); src != "" {
		cloneMirror(b, src, dst)
		return dst, src
	}
	spec := repogen.Spec{Commits: 5000, FilesPerCommit: 5, Refs: 50, BlobSize: 2000, Seed: 2026,
		Secrets: []repogen.Secret{{Commit: 1234, Path: "cfg/prod.env", Content: "GH=" + ghToken + "\n"}}}
	info, err := repogen.Generate(dst, spec)
	if err != nil {
		b.Fatal(err)
	}
	return dst, fmt.Sprintf("generated: %d commits, %d blobs, %.1f MB, %d refs", spec.Commits, info.Blobs,
		float64(info.BlobBytes)/1e6, len(info.Refs))
}

// BenchmarkScan compares a full-history scan with gitleaks on the same
// repository (when a gitleaks binary is installed), then measures an
// incremental re-scan after one new commit.
func BenchmarkScan(b *testing.B) {
	repo, label := benchRepo(b)
	key := fmt.Sprintf("bench:%d", time.Now().UnixNano())
	full, res := ourScan(b, repo, key)
	r := res.Receipt
	mbps := float64(r.BytesScanned) / 1e6 / full.wall.Seconds()

	fmt.Printf("\nScan benchmark — %s\n", label)
	fmt.Printf("  %-30s %10s %10s %12s %10s\n", "", "wall", "peak RSS", "blob bytes", "MB/s")
	fmt.Printf("  %-30s %10s %9.0fM %11.1fM %10.1f   (%d blobs, %d findings; process start to exit)\n", "gitfleet full scan",
		full.wall.Round(time.Millisecond), float64(full.maxRSS)/1e6, float64(r.BytesScanned)/1e6, mbps, r.BlobsScanned, r.Findings)
	b.ReportMetric(mbps, "MB/s")
	b.ReportMetric(float64(full.maxRSS)/1e6, "peak-RSS-MB")

	if gl := gitleaksPath(); gl != "" {
		report := filepath.Join(b.TempDir(), "gitleaks.json")
		g := run(b, exec.Command(gl, "git", repo, "--no-banner", "--log-level", "error", "--exit-code", "0",
			"--report-format", "json", "--report-path", report))
		fmt.Printf("  %-30s %10s %9.0fM\n", "gitleaks git", g.wall.Round(time.Millisecond), float64(g.maxRSS)/1e6)
		fmt.Printf("  %-30s %9.2fx %9.2fx   (gitfleet / gitleaks; targets ≤ 0.50 wall, ≤ 1.00 memory)\n", "ratio",
			full.wall.Seconds()/g.wall.Seconds(), float64(full.maxRSS)/float64(g.maxRSS))
		b.ReportMetric(full.wall.Seconds()/g.wall.Seconds(), "wall-vs-gitleaks")
		b.ReportMetric(float64(full.maxRSS)/float64(g.maxRSS), "rss-vs-gitleaks")
	} else {
		fmt.Println("  gitleaks: not installed (go install github.com/zricethezav/gitleaks/v8@latest) — no comparison")
	}

	addCommit(b, repo)
	inc, ri := ourScan(b, repo, key)
	fraction := 100 * ri.ScanSeconds / res.ScanSeconds
	fmt.Printf("  %-30s %10s %9.0fM %11.1fK            (%d blobs, process start to exit)\n",
		"incremental, one new commit", inc.wall.Round(time.Millisecond), float64(inc.maxRSS)/1e6,
		float64(ri.Receipt.BytesScanned)/1e3, ri.Receipt.BlobsScanned)
	fmt.Printf("  %-30s %10s vs %s full: %.2f%% (target well under 2%%)\n\n", "  in a running worker",
		time.Duration(ri.ScanSeconds*1e9).Round(time.Millisecond), time.Duration(res.ScanSeconds*1e9).Round(time.Millisecond), fraction)
	b.ReportMetric(fraction, "incremental-%")
}

// BenchmarkMirrorSync compares a first mirror sync with go-git over smart
// HTTP (the test forge, git http-backend) against `git clone --mirror` of
// the same repository, each in its own process: wall time, peak RSS, and
// the RSS our process keeps once the sync is over (a worker lives on). The
// repository is a generated one of about 25,000 commits whose pack is
// about 90 MB, repacked with deltas as GitHub serves them, or
// GITFLEET_BENCH_REPO.
func BenchmarkMirrorSync(b *testing.B) {
	repo, label := mirrorBenchRepo(b)
	fg, err := forge.Start(forge.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer fg.Close()
	if _, err := fg.CreateRepo("bench", "repo"); err != nil {
		b.Fatal(err)
	}
	export := exec.Command("git", "fast-export", "--all")
	export.Dir = repo
	stream, err := export.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := export.Start(); err != nil {
		b.Fatal(err)
	}
	if err := fg.Import("bench", "repo", stream); err != nil {
		b.Fatal(err)
	}
	if err := export.Wait(); err != nil {
		b.Fatal(err)
	}
	pack, err := fg.Repack("bench", "repo")
	if err != nil {
		b.Fatal(err)
	}
	url := fg.CloneURL("bench", "repo")

	dir := b.TempDir()
	ours, after := mirrorSync(b, dir, url)
	theirs := run(b, exec.Command("git", "clone", "--quiet", "--mirror", url, filepath.Join(b.TempDir(), "clone.git")))
	again, _ := mirrorSync(b, dir, url)

	fmt.Printf("\nMirror sync — %s, pack %.1f MB\n", label, float64(pack)/1e6)
	fmt.Printf("  %-32s %10s %10s %14s\n", "", "wall", "peak RSS", "RSS after")
	fmt.Printf("  %-32s %10s %9.0fM %13.0fM\n", "gitfleet mirror sync (first)", ours.wall.Round(time.Millisecond), float64(ours.maxRSS)/1e6, float64(after)/1e6)
	fmt.Printf("  %-32s %10s %9.0fM\n", "git clone --mirror", theirs.wall.Round(time.Millisecond), float64(theirs.maxRSS)/1e6)
	fmt.Printf("  %-32s %10s %9.0fM\n", "gitfleet mirror sync (no change)", again.wall.Round(time.Millisecond), float64(again.maxRSS)/1e6)
	fmt.Printf("  %-32s %9.2fx %9.2fx   (targets: wall ≤ 1.00× git clone --mirror, peak RSS ≤ 100 MB)\n\n", "gitfleet / git",
		ours.wall.Seconds()/theirs.wall.Seconds(), float64(ours.maxRSS)/float64(theirs.maxRSS))
	b.ReportMetric(ours.wall.Seconds()/theirs.wall.Seconds(), "wall-vs-git-clone")
	b.ReportMetric(float64(ours.maxRSS)/1e6, "peak-RSS-MB")
	b.ReportMetric(float64(after)/1e6, "RSS-after-MB")
}

// mirrorBenchRepo is GITFLEET_BENCH_REPO or a generated repository of
// about 25,000 commits (a ~90 MB pack).
func mirrorBenchRepo(b *testing.B) (path, label string) {
	b.Helper()
	if os.Getenv("GITFLEET_BENCH_REPO") != "" {
		return benchRepo(b)
	}
	dst := filepath.Join(b.TempDir(), "mirror-bench.git")
	spec := repogen.Spec{Commits: 25000, FilesPerCommit: 5, Refs: 50, BlobSize: 1100, Seed: 2027}
	info, err := repogen.Generate(dst, spec)
	if err != nil {
		b.Fatal(err)
	}
	return dst, fmt.Sprintf("generated: %d commits, %d blobs, %.1f MB of blobs", spec.Commits, info.Blobs, float64(info.BlobBytes)/1e6)
}

// mirrorHelperEnv makes this test binary one mirror sync (see mirrorHelper).
const mirrorHelperEnv = "GITFLEET_MIRROR_HELPER"

// mirrorSync runs one sync of url into the mirrors under dir in a child
// process and returns its measure and the RSS it kept after the sync.
func mirrorSync(b *testing.B, dir, url string) (measured, int64) {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mirrorHelperEnv+"="+dir+" "+url)
	m := run(b, cmd)
	after, err := strconv.ParseInt(strings.TrimSpace(string(m.out)), 10, 64)
	if err != nil {
		b.Fatalf("mirror helper output %q: %v", m.out, err)
	}
	return m, after
}

// mirrorHelper syncs one mirror ("DIR URL") and prints the process's RSS
// afterwards, once the garbage collector has run, as a worker would be
// between jobs.
func mirrorHelper(spec string) int {
	dir, url, _ := strings.Cut(spec, " ")
	m, err := mirror.New(dir, nil)
	if err == nil {
		_, err = m.Sync(context.Background(), url)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runtime.GC()
	debug.FreeOSMemory()
	fmt.Println(residentBytes())
	return 0
}

// residentBytes is the process's resident set size now (Linux), 0 where
// unknown.
func residentBytes() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
