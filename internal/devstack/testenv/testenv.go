package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"gitfleet/internal/devstack/pgcluster"
	"gitfleet/internal/devstack/temporalcli"
	"gitfleet/internal/infra/logging"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/store"
)

// Env is the shared stack of one test binary.
type Env struct {
	Dir         string
	Temporal    *temporalcli.DevServer
	Client      client.Client
	Namespace   string
	PG          *pgcluster.Cluster
	DatabaseURL string
	Store       *store.Store
	Log         *zap.Logger
	// rpcs counts Client's calls to the Temporal frontend by method name,
	// for what histories do not hold (activity heartbeats).
	rpcs rpcCounter
}

// Run starts the stack, runs the tests, tears the stack down and returns the
// exit code. Use it from TestMain:
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }
//
// setup, if not nil, runs after the stack is up (to start a worker, a
// forge…) and may return a cleanup.
func Run(m *testing.M, env **Env, setup func(*Env) (func(), error)) int {
	return run(m, env, Options{Temporal: true}, setup)
}

// RunDatabase is Run without Temporal, for tests of the database alone.
func RunDatabase(m *testing.M, env **Env) int {
	return run(m, env, Options{}, nil)
}

// Options says which parts to start.
type Options struct {
	Temporal bool
}

func run(m *testing.M, env **Env, opts Options, setup func(*Env) (func(), error)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer e.Close()
	*env = e
	if setup != nil {
		cleanup, err := setup(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv: setup:", err)
			return 1
		}
		if cleanup != nil {
			defer cleanup()
		}
	}
	return m.Run()
}

// AllowLocal lets this process's Git fetches reach loopback hosts (the
// tests' forges and Git servers) and its scans open local repositories
// anywhere, as `starter dev` lets its workers (architecture §11). Start
// calls it; a test helper process that runs no Start calls it itself.
func AllowLocal() {
	h, err := reach.ParseHosts([]string{"127.0.0.1", "::1", "localhost"})
	if err != nil {
		panic(err)
	}
	reach.SetHosts(h)
	reach.SetLocalRoot(string(filepath.Separator))
}

// Start brings up a database and, if asked, a dev server.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	AllowLocal()
	dir, err := os.MkdirTemp("", "gitfleet-test-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, Namespace: "default"}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	level := os.Getenv("GITFLEET_TEST_LOG_LEVEL")
	if level == "" {
		level = "warn"
	}
	if e.Log, err = logging.New(level, "console"); err != nil {
		return nil, err
	}

	// Start both servers at once: each takes a few seconds.
	pgErr := make(chan error, 1)
	go func() {
		var err error
		e.PG, err = pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "pg"), Ephemeral: true})
		pgErr <- err
	}()
	if opts.Temporal {
		e.Temporal, err = temporalcli.StartDevServer(ctx, temporalcli.DevServerOptions{UIPort: -1})
	}
	if perr := <-pgErr; perr != nil {
		return nil, fmt.Errorf("PostgreSQL: %w", perr)
	}
	if err != nil {
		return nil, fmt.Errorf("Temporal dev server: %w", err)
	}

	if err := e.PG.CreateDatabase(ctx, "gitfleet"); err != nil {
		return nil, err
	}
	e.DatabaseURL = e.PG.URL("gitfleet")
	if e.Store, err = store.Open(ctx, e.DatabaseURL); err != nil {
		return nil, err
	}
	if _, err := e.Store.Migrate(ctx); err != nil {
		return nil, err
	}
	if !opts.Temporal {
		return e, nil
	}
	e.Client, err = client.DialContext(ctx, client.Options{
		HostPort:  e.Temporal.Address(),
		Namespace: e.Namespace,
		Logger:    logging.Temporal(e.Log.Named("temporal")),
		ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(e.rpcs.intercept)},
		},
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Close stops everything and removes the temporary directory.
func (e *Env) Close() {
	if e.Client != nil {
		e.Client.Close()
	}
	if e.Store != nil {
		e.Store.Close()
	}
	if e.Temporal != nil {
		_ = e.Temporal.Stop()
	}
	if e.PG != nil {
		_ = e.PG.Stop()
	}
	if e.Dir != "" {
		_ = os.RemoveAll(e.Dir)
	}
}

// StartWorker runs an in-process worker on taskQueue, and one on each
// queue of also, with what register registers (the caller's workflows and
// activities: this package knows none of gitfleet's).
func (e *Env) StartWorker(taskQueue string, register func(worker.Registry), also ...string) (func(), error) {
	var started []worker.Worker
	stop := func() {
		for _, w := range started {
			w.Stop()
		}
	}
	for _, q := range append([]string{taskQueue}, also...) {
		w := worker.New(e.Client, q, worker.Options{})
		register(w)
		if err := w.Start(); err != nil {
			stop()
			return nil, err
		}
		started = append(started, w)
	}
	return stop, nil
}
