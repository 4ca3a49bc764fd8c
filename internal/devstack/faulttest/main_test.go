package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// tokenKey seals gitfleet users' tokens, for the workers and the tests.
var tokenKey = secrets.NewKey()

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
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
// its own host.
func startWorker(t *testing.T) *workerProc {
	t.Helper()
	workerSeq.Lock()
	workerSeq.n++
	name := fmt.Sprintf("worker%d", workerSeq.n)
	workerSeq.Unlock()
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(workerBin)
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
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	proc, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProc{name: name, proc: proc, log: logFile}
	started = append(started, w)
	t.Cleanup(func() { w.kill() })
	// Ready when it says it started polling.
	deadline := time.Now().Add(time.Minute)
	for !bytes.Contains(w.logs(), []byte("Started Worker")) {
		select {
		case <-proc.Done():
			t.Fatalf("%s exited at start: %v\n%s", name, proc.Err(), w.logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start:\n%s", name, w.logs())
		}
	}
	return w
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
