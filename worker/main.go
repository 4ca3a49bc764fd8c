package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"gitfleet/activities"
	"gitfleet/internal/domain/report"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/logging"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

func main() {
	var rf runnerFlags
	flag.StringVar(&metricsAddr, "metrics-addr", "", "`ADDR` to serve /metrics, /livez and /readyz on, \"off\" for none (default: "+config.EnvMetricsAddr+", else "+config.DefaultMetricsAddr+")")
	flag.StringVar(&rf.id, "runner-id", "", "run as runner `ID` (polls task queue runner-ID; lower-case letters, digits, '-')")
	flag.StringVar(&rf.store, "store", "", "runner mode: the runner's OCI image store `DIR`")
	flag.StringVar(&rf.peerAddr, "peer-addr", "127.0.0.1:0", "runner mode: `ADDR` to serve held images to peers on (read-only OCI distribution API)")
	flag.StringVar(&rf.advertise, "advertise-addr", "", "runner mode: the address peers reach --peer-addr at (default: --peer-addr as bound)")
	flag.IntVar(&rf.capacity, "capacity", 6, "runner mode: pulls and builds run at once")
	flag.StringVar(&rf.quota, "store-quota", "", "runner mode: most bytes the store may hold, e.g. 50GB (default: unbounded)")
	flag.StringVar(&rf.peerRate, "peer-rate", "", "runner mode: most bytes per second served to peers, e.g. 100MB (default: unbounded)")
	// A misspelt setting is otherwise ignored without a word.
	for _, w := range config.Unknown(os.Environ()) {
		fmt.Fprintln(os.Stderr, w)
	}
	flag.Usage = func() { usage(flag.CommandLine.Output()) }
	flag.Parse()
	run := run
	if rf.id != "" {
		run = func() error { return runRunner(rf) }
	} else if rf.store != "" {
		fmt.Fprintln(os.Stderr, "worker: --store needs --runner-id")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// metricsAddr is --metrics-addr.
var metricsAddr string

// loadConfig reads the configuration; --metrics-addr wins over the
// environment.
func loadConfig() (config.Config, error) {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return cfg, err
	}
	// Before any fetch or scan: where a request may make this process
	// reach (the hosts its fetches dial, the local paths its scans open).
	reach.SetHosts(cfg.AllowedHosts)
	reach.SetLocalRoot(cfg.LocalRoot)
	switch metricsAddr {
	case "":
	case "off", "none", "-":
		cfg.MetricsAddr = ""
	default:
		cfg.MetricsAddr = metricsAddr
	}
	return cfg, nil
}

func run() error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	// The findings' key is the workers' to hold, never the database's
	// (architecture §11): without it a worker does not start.
	findingKey, err := cfg.FindingKey()
	if err != nil {
		return err
	}
	// Before any repository is read: fetches, scans and builds alike.
	gitread.SetLimits(cfg.Limits)
	config.TuneGC(os.Getenv)
	log, err := logging.New(cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	defer log.Sync()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, onFatal := stopOnFatal(ctx, log)

	st, err := connectStore(ctx, cfg.DatabaseURL, log, store.MaxConns(config.DatabaseConns(cfg.ActivitySlots)+cfg.ControlSlots))
	if err != nil {
		return err
	}
	defer st.Close()

	// Unnamed, the worker is named by its mirror directory: the id an
	// earlier process on it claimed, so that a restart on the same volume
	// owns the same repositories (§2, "Repository affinity").
	if cfg.Fleet.WorkerID == "" {
		id, release, err := mirror.ClaimWorkerID(cfg.MirrorDir)
		if err != nil {
			return fmt.Errorf("%w (or set %s)", err, config.EnvWorkerID)
		}
		defer release()
		cfg.Fleet.WorkerID = id
	}

	sdk := metrics.NewSDK()
	// The heartbeat in `workers` follows the polls of this worker's own
	// queue (§2, "Repository affinity").
	ownQueue := workflows.WorkerGitQueue(workflows.TaskQueue, cfg.Fleet.WorkerID)
	polls := newPollWatch(ownQueue)
	c, err := dial(ctx, cfg, log, sdk, grpc.WithChainUnaryInterceptor(polls.interceptor()))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := checkSearchAttributes(ctx, c, cfg.Namespace, log); err != nil {
		return err
	}
	stopMetrics, err := serveMetrics(cfg.MetricsAddr, sdk, c, st, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	stopWebhooks, err := serveWebhooks(cfg, c, st, log)
	if err != nil {
		return err
	}
	defer stopWebhooks()
	// `starter migrate` migrates, not the workers: a migration may take
	// long, and a liveness probe must not kill it half way.
	if err := waitForSchema(ctx, st, log); err != nil {
		return err
	}
	if _, held, err := st.LegacyFindingKey(ctx); err == nil && held {
		log.Warn("the database still holds the finding key an earlier release kept there, beside the hashes: " +
			"once every worker has it, 'starter admin finding-key forget' (after a rotation: --discard)")
	}

	mirrors, err := mirror.New(cfg.MirrorDir, nil)
	if err != nil {
		return err
	}
	// Private repositories (a GitHub App, or configured tokens): fetches,
	// the sweep's checks and identity lookups read with them.
	creds, err := gitcreds.FromHosts(cfg.Hosts, gitcreds.AppOptions{MaxConcurrent: cfg.GitHubConcurrency})
	if err != nil {
		return err
	}
	mirrors.SetCredentials(creds)
	scanner, err := activities.NewScanner(cfg.RulesFile, findingKey)
	if err != nil {
		return err
	}
	if cfg.ScanDecodeDepth != nil {
		scanner = scanner.WithDecodeDepth(*cfg.ScanDecodeDepth)
	}
	if cfg.ScanArchiveDepth != nil {
		scanner = scanner.WithArchiveDepth(*cfg.ScanArchiveDepth)
	}
	scanSlots := make(chan struct{}, cfg.ScanParallelism) // all scans together, on either queue
	// Two queues (architecture §2): Git work — syncs and scans that run
	// for minutes to hours — has slots of its own, so the database
	// bookkeeping and API requests of every workflow never wait behind it.
	w := worker.New(c, workflows.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:      cfg.ControlSlots,
		MaxConcurrentWorkflowTaskExecutionSize:  cfg.WorkflowSlots,
		MaxConcurrentLocalActivityExecutionSize: cfg.ControlSlots,
		WorkerStopTimeout:                       cfg.StopTimeout,
		OnFatalError:                            onFatal,
	})
	// The Git work of the repositories this worker owns comes to its own
	// queue (§2, "Repository affinity"); the shared Git queue serves runs
	// from before, and runs while no worker had registered.
	ownW := worker.New(c, ownQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: cfg.ActivitySlots,
		DisableWorkflowWorker:              true,
		WorkerStopTimeout:                  cfg.StopTimeout,
		OnFatalError:                       onFatal,
	})
	gitW := worker.New(c, workflows.GitTaskQueue(workflows.TaskQueue), worker.Options{
		MaxConcurrentActivityExecutionSize: max(1, cfg.ActivitySlots/4),
		DisableWorkflowWorker:              true,
		WorkerStopTimeout:                  cfg.StopTimeout,
		OnFatalError:                       onFatal,
	})
	workflows.Register(w)
	checker, err := validityChecker(log)
	if err != nil {
		return err
	}
	// Placement sends Git work only to a worker whose queue is polled
	// (§11, "Who may place work"); one cache for the three registrations.
	pollers := activities.NewPollerCheck(c)
	// Code scanning uploads (opt-in): the SARIF's tool lists the rules.
	workflows.SetCodeScanning(cfg.CodeScanning.On)
	var rules []report.Rule
	for _, r := range scanner.Rules().Rules() {
		rules = append(rules, report.Rule{ID: r.ID, Description: r.Description, Tags: r.Tags})
	}
	codeScanning := &activities.CodeScanning{Store: st, Creds: creds, Hosts: cfg.Hosts, Rules: rules, PerHour: cfg.CodeScanning.PerHour, Log: log}
	if cfg.CodeScanning.On {
		log.Info("code scanning uploads on: repositories' findings go to GitHub code scanning",
			zap.Int("perInstallationPerHour", cfg.CodeScanning.PerHour))
	}
	// Alerts (§8): the receivers' URLs stay in this process.
	notifications := &activities.Notifications{Store: st, Targets: cfg.Notify.Targets, PerMinute: cfg.Notify.PerMinute, Log: log}
	workflows.SetNotify(len(cfg.Notify.Targets) > 0)
	if n := len(cfg.Notify.Targets); n > 0 {
		log.Info("alerts on: new and valid secrets are announced", zap.Int("receivers", n), zap.Int("perMinute", cfg.Notify.PerMinute))
	}
	w.RegisterActivity(notifications)
	for _, r := range []worker.Registry{w, ownW, gitW} {
		r.RegisterActivity(codeScanning)
		r.RegisterActivity(&activities.Validity{Store: st, Mirrors: mirrors, Scanner: scanner, Checker: checker, Log: log})
		r.RegisterActivity(&activities.Activities{Store: st, Mirrors: mirrors, Hosts: cfg.Hosts, WorkerOffline: cfg.Fleet.WorkerOffline,
			Pollers: pollers, Policy: scanner.Policy(), Creds: creds, Log: log})
		r.RegisterActivity(&activities.Shards{Store: st, Mirrors: mirrors, Scanner: scanner, Log: log,
			LeaseFor: cfg.ShardLease, BatchBlobs: cfg.ScanBatch, ScanSlots: scanSlots})
		r.RegisterActivity(&activities.Sweeps{Store: st, Client: c, Hosts: cfg.Hosts,
			Heads: activities.LsRemote{Creds: creds}, Policy: scanner.Policy(), Decay: cfg.Decay,
			WorkerOffline: cfg.Fleet.WorkerOffline, Log: log})
		r.RegisterActivity(&activities.GitHub{Store: st, Box: cfg.TokenBox, Hosts: cfg.Hosts, MaxConcurrent: cfg.GitHubConcurrency, Log: log})
		r.RegisterActivity(&activities.Cleanup{Store: st, Retention: store.Retention(cfg.Retain), Log: log})
		r.RegisterActivity(&activities.Snapshots{Store: st, Client: c, Propagation: activities.WorkflowSettings(cfg).Propagation(), Log: log})
	}
	// Snapshot builds from a repository run where its mirror is (§2, §7).
	builds := &activities.Builds{Worker: cfg.Fleet.WorkerID, Mirrors: mirrors, Hosts: cfg.Hosts, Registry: cfg.Registry,
		Insecure: cfg.InsecureRegistries, Sources: cfg.SnapshotSources, Log: log}
	ownW.RegisterActivity(builds)
	gitW.RegisterActivity(builds)
	if err := workflows.EnsureSchedules(ctx, c, activities.WorkflowSettings(cfg).Schedules()); err != nil {
		return err
	}

	log.Info("worker starting", zap.String("temporal", cfg.TemporalAddress), zap.String("namespace", cfg.Namespace),
		zap.String("taskQueue", workflows.TaskQueue), zap.String("workerId", cfg.Fleet.WorkerID), zap.Strings("hosts", cfg.Hosts.Names()),
		zap.String("policy", scanner.Policy()[:12]), zap.Int("rules", scanner.Rules().Len()),
		zap.Int("decodeDepth", scanner.Config().DecodeDepth), zap.Int("archiveDepth", scanner.Config().ArchiveDepth),
		zap.Int("activitySlots", cfg.ActivitySlots), zap.Int("controlSlots", cfg.ControlSlots),
		zap.Int("workflowSlots", cfg.WorkflowSlots), zap.Int("scanParallelism", cfg.ScanParallelism),
		zap.Duration("stopTimeout", cfg.StopTimeout))
	for i, x := range []worker.Worker{ownW, gitW, w} {
		if err := x.Start(); err != nil {
			for _, started := range []worker.Worker{ownW, gitW, w}[:i] {
				started.Stop()
			}
			return err
		}
	}
	// Registered once its queue is polled: work placed on it is taken.
	member, err := joinFleet(ctx, st, cfg.Fleet, polling(c, ownQueue, polls), mirrors, log)
	if err != nil {
		for _, x := range []worker.Worker{ownW, gitW, w} {
			x.Stop()
		}
		return err
	}
	return drain(ctx, stop, member.leave, cfg.StopTimeout, log, w, ownW, gitW)
}

// stopOnFatal returns a context that ends when the worker reports a fatal
// error (its pollers stopped for good: the namespace is gone, the
// credentials are refused), and the callback for worker.Options. The
// process then drains and exits with the error, instead of running on,
// green on /livez and /readyz, with nothing polling.
func stopOnFatal(ctx context.Context, log *zap.Logger) (context.Context, func(error)) {
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, func(err error) {
		log.Error("the worker stopped polling on a fatal error: exiting", zap.Error(err))
		cancel(fmt.Errorf("fatal worker error: %w", err))
	}
}

// drain waits for SIGTERM or SIGINT, then leaves (leave, if not nil: the
// worker's repositories go to others before it drains), stops polling and
// lets running activities finish, up to timeout (then their contexts are
// cancelled). A second signal ends the process at once.
func drain(ctx context.Context, stopSignals, leave func(), timeout time.Duration, log *zap.Logger, ws ...worker.Worker) error {
	<-ctx.Done()
	stopSignals()
	if leave != nil {
		leave()
	}
	log.Info("worker draining: polling stopped, running activities may finish", zap.Duration("stopTimeout", timeout))
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.Stop)
	}
	wg.Wait()
	log.Info("worker stopped", zap.Duration("drained", time.Since(start)))
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		return cause // a fatal error, not a signal
	}
	return nil
}

// propagation is how the reconcile's propagations pull, from the
// configuration (the starter's `snapshot create` uses the same).
// connectStore waits up to a minute for the database, so a worker started
// alongside PostgreSQL (compose, make run) does not die on a race.
func connectStore(ctx context.Context, url string, log *zap.Logger, opts ...store.Option) (*store.Store, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := store.Open(ctx, url, opts...)
		if err == nil {
			return st, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		log.Warn("database not ready, retrying", zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// usage prints the flags and every setting the worker reads; usage_test.go
// holds it to config.Vars and the defaults the code uses.
func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: worker [--runner-id ID --store DIR [--peer-addr ADDR] ...]

Runs gitfleet's Temporal worker on task queue %q until interrupted; with
--runner-id, runs a runner instead: it registers in the runners table,
heartbeats, keeps snapshot images in its store, serves them to peers and
polls its own task queue runner-ID.

Flags:
`, workflows.TaskQueue)
	flag.CommandLine.SetOutput(w)
	flag.PrintDefaults()
	fmt.Fprint(w, `
Configuration comes from the environment (docs/settings.md says more; an
empty variable is unset). A worker and a runner read:

`)
	config.WriteHelp(w, config.Worker|config.Runner)
}
