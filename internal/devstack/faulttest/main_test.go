package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitfleet/internal/infra/secrets"

	"gitfleet/internal/devstack/childproc"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

var (
	env       *testenv.Env
	fg        *forge.Forge
	workerBin string
	logDir    string
)

// forgeToken unlocks the forge's API; workers get it from their
// environment and must never log it or put it in a workflow.
const forgeToken = "ghp_faulttestForgeToken0123456789ABCDEF"

// sharedWorkerID is the GITFLEET_WORKER_ID of the workers a test does not
// name.
const sharedWorkerID = "faulttest"

// tokenKey seals gitfleet users' tokens, for the workers and the tests.
var tokenKey = secrets.NewKey()

func TestMain(m *testing.M) {
	if spec := os.Getenv(envPlainPull); spec != "" {
		os.Exit(runPlainPull(spec))
	}
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		// Workers check the search attributes; `starter setup` registers them.
		if err := workflows.EnsureSearchAttributes(context.Background(), e.Client, e.Namespace); err != nil {
			return nil, err
		}
		workerBin = filepath.Join(e.Dir, "worker")
		build := exec.Command("go", "build", "-o", workerBin, "gitfleet/worker")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build the worker: %v\n%s", err, out)
		}
		logDir = filepath.Join(e.Dir, "logs")
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return nil, err
		}
		var err error
		fg, err = forge.Start(forge.Options{Dir: filepath.Join(e.Dir, "forge"), Token: forgeToken})
		if err != nil {
			return nil, err
		}
		return func() { fg.Close() }, nil
	}))
}

// workerProc is a worker process under test.
type workerProc struct {
	name string
	proc *childproc.Process
	log  *os.File
}

var workerSeq struct {
	sync.Mutex
	n int
}

// startWorker runs a worker process with its own mirror directory, as if on
// its own host. extraEnv ("KEY=value") is added to, and overrides, the
// common environment.
func startWorker(t testing.TB, extraEnv ...string) *workerProc {
	t.Helper()
	w := startProc(t, nextName("worker"), nil, extraEnv)
	started = append(started, w)
	// A worker a test names leaves no row behind: killed, it would look
	// live to the next test's workers for their offline bound, and their
	// Git work would wait on its queue.
	for _, kv := range extraEnv {
		if id, ok := strings.CutPrefix(kv, config.EnvWorkerID+"="); ok && id != "" && id != sharedWorkerID {
			t.Cleanup(func() {
				w.kill()
				_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, id)
			})
		}
	}
	return w
}

// startRunner runs a worker in runner mode (`worker --runner-id id --store
// dir --peer-addr 127.0.0.1:0 args...`) with the common environment and a
// 1 s runner heartbeat, and waits until it polls its task queue: by then it
// is registered in the runners table. Starting it again with the same id
// and dir is a restart. The cleanup kills it and deletes its runners row
// (with its snapshot rows), so that the next test's propagations do not
// target it.
func startRunner(t testing.TB, id, dir string, args ...string) *workerProc {
	t.Helper()
	w := launchRunner(t, id, dir, args...)
	w.waitStarted(t)
	return w
}

// launchRunner is startRunner without the wait, to start several at once.
func launchRunner(t testing.TB, id, dir string, args ...string) *workerProc {
	t.Helper()
	argv := append([]string{"--runner-id", id, "--store", dir, "--peer-addr", "127.0.0.1:0"}, args...)
	w := launchProc(t, nextName("runner-"+id+"-"), argv, []string{
		config.EnvRunnerHeartbeat + "=1s",
		config.EnvLogLevel + "=info",
		// The tests' registries listen on loopback, each on a port of its
		// own.
		config.EnvSnapshotSources + "=127.0.0.1",
	})
	t.Cleanup(func() { w.forget(t, id) })
	return w
}

// forget kills a runner and deletes its runners row, with its snapshot
// rows; doing it twice is harmless.
func (w *workerProc) forget(t testing.TB, id string) {
	w.kill()
	if _, err := env.Store.Pool().Exec(context.Background(), `DELETE FROM runners WHERE id = $1`, id); err != nil {
		t.Errorf("forget runner %s: %v", id, err)
	}
}

func nextName(prefix string) string {
	workerSeq.Lock()
	defer workerSeq.Unlock()
	workerSeq.n++
	return fmt.Sprintf("%s%d", prefix, workerSeq.n)
}

// startProc starts the worker binary with args and waits until it polls.
func startProc(t testing.TB, name string, args, extraEnv []string) *workerProc {
	t.Helper()
	w := launchProc(t, name, args, extraEnv)
	w.waitStarted(t)
	return w
}

// launchProc starts the worker binary with args; the cleanup kills it.
func launchProc(t testing.TB, name string, args, extraEnv []string) *workerProc {
	t.Helper()
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(workerBin, args...)
	cmd.Env = append(os.Environ(),
		config.EnvTemporalAddress+"="+env.Temporal.Address(),
		config.EnvDatabaseURL+"="+env.DatabaseURL,
		vcs.EnvAPIURL+"="+fg.APIURL(),
		vcs.EnvToken+"="+forgeToken,
		config.EnvMirrorDir+"="+filepath.Join(env.Dir, name, "mirrors"),
		config.EnvLogLevel+"=debug",
		config.EnvLogFormat+"=json",
		config.EnvShardLease+"=10s",
		config.EnvScanBatch+"=200",
		config.EnvTokenKey+"="+tokenKey,
		config.EnvHashKey+"="+testenv.FindingKey.Format(),
		config.EnvMetricsAddr+"=off", // many workers on one host
		config.EnvLocalRoot+"=/",     // the tests' local repositories, wherever their temporary directories are
		// One id for the tests' workers unless a test names them: a
		// worker started after another was killed serves the queue the
		// killed one's work waits on, as on one host.
		config.EnvWorkerID+"="+sharedWorkerID,
	)
	// Later entries win (os/exec keeps the last value of a key).
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	proc, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProc{name: name, proc: proc, log: logFile}
	t.Cleanup(func() { w.kill() })
	return w
}

// waitStarted waits until the process says it started polling. The log
// file is the only signal the process gives, so it is polled.
func (w *workerProc) waitStarted(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !bytes.Contains(w.logs(), []byte("Started Worker")) {
		select {
		case <-w.proc.Done():
			t.Fatalf("%s exited at start: %v\n%s", w.name, w.proc.Err(), w.logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start:\n%s", w.name, w.logs())
		}
	}
}

// waitLog waits until the process logs a line holding msg after the
// first from bytes of its log. The log file is the only signal the process
// gives, so it is polled.
func (w *workerProc) waitLog(t testing.TB, from int, msg string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if logs := w.logs(); len(logs) > from && bytes.Contains(logs[from:], []byte(msg)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %s:\n%s", w.name, msg, timeout, tail(w.logs(), 4000))
		}
		select {
		case <-w.proc.Done():
			if logs := w.logs(); len(logs) > from && bytes.Contains(logs[from:], []byte(msg)) {
				return
			}
			t.Fatalf("%s exited without logging %q: %v\n%s", w.name, msg, w.proc.Err(), tail(w.logs(), 4000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *workerProc) logs() []byte {
	b, _ := os.ReadFile(w.log.Name())
	return b
}

func (w *workerProc) signal(sig syscall.Signal) {
	_ = w.proc.Cmd.Process.Signal(sig)
}

func (w *workerProc) kill() {
	w.signal(syscall.SIGCONT)
	w.signal(syscall.SIGKILL)
	<-w.proc.Done()
	w.log.Close()
}

// pid is the process id.
func (w *workerProc) pid() int { return w.proc.Cmd.Process.Pid }

// allWorkerLogs is everything every worker process wrote.
func allWorkerLogs(t *testing.T) []byte {
	t.Helper()
	var all []byte
	files, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
