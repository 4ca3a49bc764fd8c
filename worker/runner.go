package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"gitfleet/activities"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/logging"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/ocistore"
	"gitfleet/internal/infra/store"
)

type runnerFlags struct {
	id, store, peerAddr, advertise, quota, peerRate string
	capacity                                        int
}

// runnerLimits are the runner's bounds on what others may make it do
// (architecture §11), flags of their own beside main's.
var runnerLimits struct {
	maxImage, peerClientRate string
	peerClientRequests       int
}

func init() {
	flag.StringVar(&runnerLimits.maxImage, "max-image-size", "", "runner mode: the largest image a pull may declare, e.g. 200GiB (default: 1TiB)")
	flag.IntVar(&runnerLimits.peerClientRequests, "peer-client-requests", 8,
		"runner mode: requests one client address may have in flight on the peer port (0: unbounded); one more gets 429")
	flag.StringVar(&runnerLimits.peerClientRate, "peer-client-rate", "", "runner mode: most bytes per second served to one client address, e.g. 50MB (default: unbounded)")
}

// runRunner runs the worker as a runner (architecture §7): registered in the
// runners table and heartbeating, serving its store to peers, polling its
// own task queue with at most capacity activities at once.
func runRunner(rf runnerFlags) error {
	if err := snapshot.ValidRunnerID(rf.id); err != nil {
		return err
	}
	if rf.store == "" {
		return errors.New("runner mode needs --store DIR")
	}
	if rf.capacity < 1 || rf.capacity > 64 {
		return fmt.Errorf("--capacity %d: want 1 to 64", rf.capacity)
	}
	quota, err := parseBytes(rf.quota)
	if err != nil {
		return fmt.Errorf("--store-quota: %w", err)
	}
	peerRate, err := parseBytes(rf.peerRate)
	if err != nil {
		return fmt.Errorf("--peer-rate: %w", err)
	}
	maxImage, err := parseBytes(runnerLimits.maxImage)
	if err != nil {
		return fmt.Errorf("--max-image-size: %w", err)
	}
	clientRate, err := parseBytes(runnerLimits.peerClientRate)
	if err != nil {
		return fmt.Errorf("--peer-client-rate: %w", err)
	}
	if runnerLimits.peerClientRequests < 0 {
		return fmt.Errorf("--peer-client-requests %d: want 0 (unbounded) or more", runnerLimits.peerClientRequests)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log, err := logging.New(cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	defer log.Sync()
	// The activities add the runner's id to their own lines
	// (activities.Runner.logger): theirs is the logger without it, so that
	// no line carries the field twice.
	base := log
	log = log.With(zap.String("runner", rf.id))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, onFatal := stopOnFatal(ctx, log)
	defer stop()

	images, err := ocistore.OpenWith(filepath.Join(rf.store, "oci"), ocistore.Options{Quota: quota, MaxImageBytes: maxImage})
	if err != nil {
		return err
	}
	work := filepath.Join(rf.store, "work")
	// What a kill -9 left: a build's fetched commit, for its retry to
	// resume from, unless a day old.
	if err := activities.TidyWorkDir(work, 24*time.Hour); err != nil {
		return err
	}
	st, err := connectStore(ctx, cfg.DatabaseURL, log, store.MaxConns(config.DatabaseConns(rf.capacity)))
	if err != nil {
		return err
	}
	defer st.Close()
	sdk := metrics.NewSDK()
	c, err := dial(ctx, cfg, log, sdk)
	if err != nil {
		return err
	}
	defer c.Close()
	stopMetrics, err := serveMetrics(cfg.MetricsAddr, sdk, c, st, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := waitForSchema(ctx, st, log); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", rf.peerAddr)
	if err != nil {
		return fmt.Errorf("--peer-addr: %w", err)
	}
	// What a runner holds, it pulled with its registry credentials: a port
	// other hosts reach serves only the fleet's runners (§11). Plain is
	// for loopback, as `starter dev` binds it.
	if cfg.PeerToken == "" && !isLoopback(ln.Addr()) {
		_ = ln.Close()
		return fmt.Errorf("--peer-addr %s is reachable from other hosts: set %s (or %s), the same on every runner, so that only runners read it",
			rf.peerAddr, config.EnvPeerToken, config.FileVar(config.EnvPeerToken))
	}
	peer := &http.Server{Handler: images.PeerServer(ocistore.PeerAccess{Token: ocistore.Token(cfg.PeerToken),
		ClientRequests: runnerLimits.peerClientRequests, ClientRate: clientRate, Rate: peerRate}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = peer.Serve(ln) }()
	defer peer.Close()
	advertise := rf.advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}

	self := snapshot.Runner{ID: rf.id, PeerAddr: advertise, Capacity: rf.capacity, QuotaBytes: quota}
	if err := st.RegisterRunner(ctx, self); err != nil {
		return fmt.Errorf("register runner %s: %w", rf.id, err)
	}
	go heartbeat(ctx, st, self, cfg.RunnerHeartbeat, log)

	w := worker.New(c, snapshot.TaskQueue(rf.id), worker.Options{
		MaxConcurrentActivityExecutionSize: rf.capacity,
		DisableWorkflowWorker:              true,
		WorkerStopTimeout:                  cfg.StopTimeout,
		OnFatalError:                       onFatal,
	})
	// Listings and removals have slots of their own on the admin queue: a
	// runner whose capacity is taken by pulls still answers them, so their
	// queue bound tests liveness, not load.
	admin := worker.New(c, snapshot.AdminTaskQueue(rf.id), worker.Options{
		MaxConcurrentActivityExecutionSize: adminSlots,
		DisableWorkflowWorker:              true,
		WorkerStopTimeout:                  cfg.StopTimeout,
		OnFatalError:                       onFatal,
	})
	// Builds fetch private repositories' commits as the central workers do.
	creds, err := gitcreds.FromHosts(cfg.Hosts, gitcreds.AppOptions{MaxConcurrent: cfg.GitHubConcurrency})
	if err != nil {
		return err
	}
	activities.RegisterRunner(w, admin, &activities.Runner{ID: rf.id, Store: st, Images: images, Hosts: cfg.Hosts, WorkDir: work, Creds: creds,
		Registry: cfg.Registry, Insecure: cfg.InsecureRegistries, Sources: cfg.SnapshotSources, PeerToken: ocistore.Token(cfg.PeerToken),
		Log: base, Load: &activities.Load{}})
	log.Info("runner starting", zap.String("taskQueue", snapshot.TaskQueue(rf.id)), zap.String("adminTaskQueue", snapshot.AdminTaskQueue(rf.id)),
		zap.String("peerAddr", advertise), zap.Bool("peerToken", cfg.PeerToken != ""), zap.Stringer("snapshotSources", cfg.SnapshotSources),
		zap.Int("capacity", rf.capacity), zap.Int64("storeQuota", quota), zap.String("store", rf.store))
	if err := admin.Start(); err != nil {
		return err
	}
	defer admin.Stop()
	if err := w.Start(); err != nil {
		return err
	}
	return drain(ctx, stop, nil, cfg.StopTimeout, log, w)
}

// adminSlots are the runner's slots for listings and removals, beside its
// --capacity for pulls and builds.
const adminSlots = 2

// heartbeat keeps the runner's row fresh; a runner that was forgotten
// registers again.
func heartbeat(ctx context.Context, st *store.Store, self snapshot.Runner, every time.Duration, log *zap.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := st.HeartbeatRunner(ctx, self.ID)
		if errors.Is(err, store.ErrNotFound) {
			err = st.RegisterRunner(ctx, self)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("runner heartbeat failed", zap.Error(err))
		}
	}
}

// isLoopback reports whether a listener's address is reachable from this
// host only.
func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// parseBytes reads "", "1048576", "100MB", "1.5GiB" (decimal and binary
// units).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 500MB, 10GiB)", s)
	}
	return int64(v * mult), nil
}
