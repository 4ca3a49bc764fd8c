package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"gitfleet/internal/devstack/childproc"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/secrets"
	"gitfleet/workflows"
)

var (
	env                   *testenv.Env
	workerBin, starterBin string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		// What `starter setup` does: workers only check.
		if err := workflows.EnsureSearchAttributes(context.Background(), e.Client, e.Namespace); err != nil {
			return nil, err
		}
		workerBin, starterBin = filepath.Join(e.Dir, "worker"), filepath.Join(e.Dir, "starter")
		for bin, pkg := range map[string]string{workerBin: "gitfleet/worker", starterBin: "gitfleet/starter"} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, out)
			}
		}
		return nil, nil
	}))
}

var tokenKey = secrets.NewKey()

func baseEnv(t *testing.T, dbURL string) []string {
	return append(os.Environ(),
		config.EnvTemporalAddress+"="+env.Temporal.Address(),
		config.EnvDatabaseURL+"="+dbURL,
		config.EnvMirrorDir+"="+filepath.Join(t.TempDir(), "mirrors"),
		config.EnvLogFormat+"=json",
		config.EnvLogLevel+"=info",
		config.EnvTokenKey+"="+tokenKey,
		config.EnvHashKey+"="+testenv.FindingKey.Format(),
		config.EnvMetricsAddr+"=127.0.0.1:0",
		config.EnvStopTimeout+"=5m",
		config.EnvLocalRoot+"=/", // the tests' local repositories, wherever their temporary directories are
	)
}

// proc is a worker process whose log lines are read as they come.
type proc struct {
	p     *childproc.Process
	mu    sync.Mutex
	lines []string
	added chan struct{} // closed and replaced on every line
}

func startWorker(t *testing.T, extraEnv ...string) *proc {
	t.Helper()
	return startWorkerWith(t, nil, extraEnv...)
}

// startWorkerWith is startWorker with command-line arguments.
func startWorkerWith(t *testing.T, args []string, extraEnv ...string) *proc {
	t.Helper()
	cmd := exec.Command(workerBin, args...)
	cmd.Env = append(baseEnv(t, env.DatabaseURL), extraEnv...)
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	p, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	wp := &proc{p: p, added: make(chan struct{})}
	go func() {
		<-p.Done()
		w.Close()
	}()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			wp.mu.Lock()
			wp.lines = append(wp.lines, sc.Text())
			close(wp.added)
			wp.added = make(chan struct{})
			wp.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.Done()
		if t.Failed() {
			t.Logf("worker output:\n%s", wp.output())
		}
	})
	return wp
}

func (w *proc) output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// waitLine waits for a log line containing s and returns it.
func (w *proc) waitLine(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for i := 0; ; {
		w.mu.Lock()
		for ; i < len(w.lines); i++ {
			if strings.Contains(w.lines[i], s) {
				l := w.lines[i]
				w.mu.Unlock()
				return l
			}
		}
		added := w.added
		w.mu.Unlock()
		select {
		case <-added:
		case <-w.p.Done():
			// read what is left
			select {
			case <-added:
				continue
			case <-time.After(time.Second):
			}
			t.Fatalf("worker exited (%v) before logging %q", w.p.Err(), s)
		case <-deadline:
			t.Fatalf("worker did not log %q", s)
		}
	}
}

// metricsURL is the base URL the worker serves /metrics on.
func (w *proc) metricsURL(t *testing.T) string {
	t.Helper()
	var l struct {
		Addr string `json:"metricsAddr"`
	}
	if err := json.Unmarshal([]byte(w.waitLine(t, `"metricsAddr"`)), &l); err != nil || l.Addr == "" {
		t.Fatalf("no metrics address in the log: %v", err)
	}
	return "http://" + l.Addr
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestMetricsLivezReadyz(t *testing.T) {
	w := startWorker(t)
	base := w.metricsURL(t)
	if code, body, err := get(base + "/livez"); err != nil || code != 200 {
		t.Fatalf("/livez: %d %q %v", code, body, err)
	}
	poll.Until(t, "/readyz 200", 2*time.Minute, func() (bool, string) {
		code, body, err := get(base + "/readyz")
		return err == nil && code == 200, fmt.Sprint(code, body, err)
	})
	w.waitLine(t, "Started Worker")

	// A scan through the starter counts blobs and bytes.
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("hello metrics\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	scan := exec.Command(starterBin, "scan", repo)
	scan.Env = baseEnv(t, env.DatabaseURL)
	if out, err := scan.CombinedOutput(); err != nil {
		t.Fatalf("starter scan: %v\n%s", err, out)
	}

	poll.Until(t, "/metrics", 2*time.Minute, func() (bool, string) {
		code, body, err := get(base + "/metrics")
		if err != nil || code != 200 {
			return false, fmt.Sprint(code, err)
		}
		for _, want := range []string{"temporal_request_total{", "temporal_activity_execution_latency_seconds_bucket{",
			"gitfleet_scan_blobs_total 1\n", "gitfleet_scan_bytes_total 14\n", "# TYPE gitfleet_github_requests_total counter",
			"# TYPE gitfleet_collections_total counter", "# TYPE gitfleet_snapshot_pulls_total counter"} {
			if !strings.Contains(body, want) {
				return false, "lacks " + want
			}
		}
		return true, ""
	})
}

// A worker whose PostgreSQL stops answering is not ready; Temporal still
// answering does not make it so.
func TestReadyzWithoutDatabase(t *testing.T) {
	px := newProxy(t, env.PG.URL("gitfleet"))
	w := startWorker(t, config.EnvDatabaseURL+"="+px.url)
	base := w.metricsURL(t)
	poll.Until(t, "/readyz 200", 2*time.Minute, func() (bool, string) {
		code, body, err := get(base + "/readyz")
		return err == nil && code == 200, fmt.Sprint(code, body, err)
	})
	px.close()
	poll.Until(t, "/readyz 503", 2*time.Minute, func() (bool, string) {
		code, body, err := get(base + "/readyz")
		return err == nil && code == 503 && strings.Contains(body, "postgresql") && !strings.Contains(body, "temporal"),
			fmt.Sprint(code, body, err)
	})
	if code, _, err := get(base + "/livez"); err != nil || code != 200 {
		t.Fatalf("/livez: %d %v", code, err)
	}
}

// A namespace without gitfleet's search attributes: the worker says which
// and exits.
func TestMissingSearchAttributes(t *testing.T) {
	ctx := context.Background()
	ns := "gitfleet-bare"
	_, err := env.Client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the namespace", 2*time.Minute, func() (bool, string) {
		_, err := env.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		return err == nil, fmt.Sprint(err)
	})
	w := startWorker(t, config.EnvTemporalNamespace+"="+ns)
	<-w.p.Done()
	var exit *exec.ExitError
	if !errors.As(w.p.Err(), &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker exit: %v, want status 1", w.p.Err())
	}
	out := w.waitLine(t, "lacks search attributes")
	for name := range workflows.SearchAttributes {
		if !strings.Contains(out, name) {
			t.Errorf("the message does not name %s: %s", name, out)
		}
	}
	if !strings.Contains(out, "starter setup") {
		t.Errorf("the message does not say how to register them: %s", out)
	}
}

// A worker whose pollers stop for good (here its namespace is deleted under
// it) exits with status 1 and says why, rather than run on with /livez and
// /readyz green and nothing polling. The SDK retries a namespace not found
// for about two minutes before it calls the error fatal, so this test runs
// beside the others.
func TestWorkerExitsOnFatalError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "gitfleet-doomed"
	if _, err := env.Client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the namespace", 2*time.Minute, func() (bool, string) {
		err := workflows.EnsureSearchAttributes(ctx, env.Client, ns)
		return err == nil, fmt.Sprint(err)
	})
	w := startWorker(t, config.EnvTemporalNamespace+"="+ns)
	w.waitLine(t, "worker starting")
	if _, err := env.Client.OperatorService().DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.p.Done():
	case <-time.After(6 * time.Minute): // the SDK's two minutes, with room
		t.Fatal("the worker runs on after its namespace was deleted")
	}
	var exit *exec.ExitError
	if !errors.As(w.p.Err(), &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker exit: %v, want status 1", w.p.Err())
	}
	w.waitLine(t, "the worker stopped polling on a fatal error")
}

// proxy forwards TCP to PostgreSQL until closed; then it drops every
// connection and refuses new ones.
type proxy struct {
	url   string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, dbURL string) *proxy {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	p := &proxy{url: u.String(), ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(d, c); d.Close() }()
			go func() { _, _ = io.Copy(c, d); c.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
