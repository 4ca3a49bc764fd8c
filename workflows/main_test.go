package workflows_test

import (
	"bytes"
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gitfleet/internal/infra/secrets"

	"go.temporal.io/sdk/worker"

	"gitfleet/workflows"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"path/filepath"
	"testing"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/testenv"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/vcs"
)

// One stack for the whole test binary: a Temporal dev server, PostgreSQL,
// the forge serving Git over smart HTTP and the REST API, and an in-process
// worker with the real activities. Tests isolate themselves by owner names.
var (
	env   *testenv.Env
	fg    *forge.Forge
	hosts vcs.Hosts
	// tokenBox seals users' tokens, for the worker and the tests.
	tokenBox = func() *secrets.Box {
		b, err := secrets.ParseKey(secrets.NewKey())
		if err != nil {
			panic(err)
		}
		return b
	}()
	// workerLogs captures everything the worker's activities log.
	workerLogs = &syncBuffer{}
	// heads answers the sweep's change checks: ls-remote, or a stub that
	// says "unchanged" for the sweep benchmark.
	heads = &switchableHeads{}
	// ghApp is the GitHub App the worker reads private repositories with
	// (installed by the tests that want it, see installApp), tokensFile
	// the file of configured tokens (tests add lines), creds the worker's
	// credentials, appClock the clock of both the forge's App and creds.
	ghApp      forge.App
	tokensFile string
	creds      *gitcreds.Set
	appClock   = &offsetClock{}
)

// offsetClock is the real clock moved forward by what tests add.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) Add(d time.Duration) { c.off.Add(int64(d)) }

type switchableHeads struct {
	mu   sync.Mutex
	stub string // when set, every repository's refs digest
	// hook, when set, answers the repositories it takes (ok).
	hook func(ctx context.Context, url string) (digest string, ok bool, err error)
}

func (h *switchableHeads) RefsDigest(ctx context.Context, url string) (string, error) {
	h.mu.Lock()
	stub, hook := h.stub, h.hook
	h.mu.Unlock()
	if hook != nil {
		if d, ok, err := hook(ctx, url); ok {
			return d, err
		}
	}
	if stub != "" {
		return stub, nil
	}
	return activities.LsRemote{Creds: creds}.RefsDigest(ctx, url)
}

// apiToken is the forge's token: the worker authenticates with it, and it
// must never show up in logs or workflow histories.
const apiToken = "ghp_gitfleetTestToken0123456789abcdefXYZ"

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		var err error
		if fg, err = forge.Start(forge.Options{Dir: filepath.Join(e.Dir, "forge"), Token: apiToken, Now: appClock.Now}); err != nil {
			return nil, err
		}
		if ghApp, err = fg.CreateApp("gitfleet"); err != nil {
			return nil, err
		}
		keyFile, tokens := filepath.Join(e.Dir, "app.pem"), filepath.Join(e.Dir, "tokens")
		if err := os.WriteFile(keyFile, ghApp.KeyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(tokens, []byte("# owner token-file\n"), 0o600); err != nil {
			return nil, err
		}
		tokensFile = tokens
		hosts, err = vcs.NewHosts(vcs.Host{Name: fg.Host(), GitURL: fg.URL(), APIURL: fg.APIURL(), Token: apiToken,
			AppID: ghApp.ID, AppKeyFile: keyFile, TokensFile: tokens})
		if err != nil {
			return nil, err
		}
		if creds, err = gitcreds.FromHosts(hosts, gitcreds.AppOptions{Now: appClock.Now}); err != nil {
			return nil, err
		}
		mirrors, err := mirror.New(filepath.Join(e.Dir, "mirrors"), nil)
		if err != nil {
			return nil, err
		}
		mirrors.SetCredentials(creds)
		log := zap.New(zapcore.NewTee(e.Log.Core(), zapcore.NewCore(
			zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(workerLogs), zap.DebugLevel)))
		scanner, err := activities.NewScanner("", testenv.FindingKey)
		if err != nil {
			return nil, err
		}
		// Small batches and short leases so tests see several durable
		// writes per scan and lease renewals within seconds.
		if err := workflows.EnsureSearchAttributes(context.Background(), e.Client, e.Namespace); err != nil {
			return nil, err
		}
		stop, err := e.StartWorker(workflows.TaskQueue, func(w worker.Registry) {
			workflows.Register(w)
			w.RegisterActivity(&activities.Activities{Store: e.Store, Mirrors: mirrors, Hosts: hosts, Creds: creds, Log: log})
			w.RegisterActivity(&activities.Cleanup{Store: e.Store, Log: log, Retention: cleanupRetention})
			w.RegisterActivity(&activities.Shards{Store: e.Store, Mirrors: mirrors, Scanner: scanner, Log: log, BatchBlobs: 50, LeaseFor: 6 * time.Second})
			w.RegisterActivity(&activities.Sweeps{Store: e.Store, Client: e.Client, Hosts: hosts, Heads: heads,
				Policy: scanner.Policy(), Log: log})
			w.RegisterActivity(&activities.GitHub{Store: e.Store, Box: tokenBox, Hosts: hosts, Log: log})
			w.RegisterActivity(setUpValidity(e.Store, mirrors, scanner, log))
			w.RegisterActivity(&activities.CodeScanning{Store: e.Store, Creds: creds, Hosts: hosts, Rules: reportRules(scanner), Log: log})
			notifyActs.Store, notifyActs.Log = e.Store, log
			w.RegisterActivity(notifyActs)
			w.RegisterActivity(&activities.Snapshots{Store: e.Store, Client: e.Client, Log: log,
				Propagation: workflows.PropagateSnapshotInput{Timing: workflows.PullTiming{Queue: 30 * time.Second, Heartbeat: 10 * time.Second}}})
		}, workflows.GitTaskQueue(workflows.TaskQueue))
		if err != nil {
			return nil, err
		}
		return func() { stop(); fg.Close() }, nil
	}))
}
