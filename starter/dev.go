//go:build devstack

package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/childproc"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/devstack/pgcluster"
	"gitfleet/internal/devstack/supervise"
	"gitfleet/internal/devstack/temporalcli"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

type devOptions struct {
	dataDir   string
	pgPort    int
	forgePort int
	regPort   int
	hookPort  int
	runners   int
	port      int
	uiPort    int
	demo      bool
}

func (a *app) devCmd() *cobra.Command {
	o := devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole stack locally: Temporal, PostgreSQL, the demo forge, a worker, a registry and runners",
		Long: `dev brings up everything gitfleet needs on this machine and keeps it running
until Ctrl-C:

  - the pinned Temporal dev server (gRPC 7233, Web UI 8233), state in <data-dir>/temporal.db
  - a private PostgreSQL cluster in <data-dir>/pg (unless DATABASE_URL is set)
  - the offline demo forge: a GitHub-compatible server with a few repositories
  - a worker (the 'worker' binary next to this one)
  - an in-process OCI registry and runners (the worker in runner mode),
    stores in <data-dir>/runners

then runs a demo collection and a demo snapshot, and prints where to look. 'make run' builds the
binaries and runs this.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.dev(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", ".data", "where the stack keeps its state")
	f.IntVar(&o.port, "temporal-port", 7233, "Temporal gRPC port")
	f.IntVar(&o.uiPort, "ui-port", 8233, "Temporal Web UI port")
	f.IntVar(&o.pgPort, "pg-port", 54329, "PostgreSQL port")
	f.IntVar(&o.forgePort, "forge-port", 7480, "demo forge port")
	f.IntVar(&o.regPort, "registry-port", 5000, "OCI registry port")
	f.IntVar(&o.hookPort, "webhook-port", 7481, "the worker's webhook receiver port: the demo forge's GitHub App delivers to it")
	f.IntVar(&o.runners, "runners", 2, "runners to start")
	f.BoolVar(&o.demo, "demo", true, "run the demo collection and snapshot once the stack is up")
	return cmd
}

func (a *app) dev(ctx context.Context, o devOptions) (err error) {
	dataDir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(a.stdout, "==> "+format+"\n", args...) }
	quiet := func(string, ...any) {}

	// The child processes (PostgreSQL, Temporal, the worker, the runners)
	// are supervised: one that exits is restarted on its state (the
	// database, temporal.db, the runners' stores) and, if it keeps
	// exiting, everything stops with an error naming it. The forge and the
	// registry run in this process: they cannot die on their own.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sup := supervise.New(supervise.Options{
		Logf:      func(format string, args ...any) { fmt.Fprintf(a.stderr, "==> "+format+"\n", args...) },
		Restarted: func(name string, _ supervise.Process) { fmt.Fprintf(a.stderr, "==> %s is running again\n", name) },
	})
	go func() {
		select {
		case <-sup.Failed():
			cancel(sup.Err())
		case <-ctx.Done():
		}
	}()
	// Runs last, once everything has stopped: the child that kept exiting
	// is the error, whatever failed because it was gone.
	defer func() {
		if gaveUp := sup.Err(); gaveUp != nil {
			err = gaveUp
		}
	}()

	dbURL := a.getenv(config.EnvDatabaseURL)
	if dbURL == "" {
		say("Starting PostgreSQL in %s (port %d)", filepath.Join(dataDir, "pg"), o.pgPort)
		pgOpts := pgcluster.Options{DataDir: filepath.Join(dataDir, "pg"), Port: o.pgPort, Logf: quiet}
		pg, err := pgcluster.Start(ctx, pgOpts)
		if err != nil {
			return err
		}
		pgOpts.Port = pg.Port() // a restart keeps the port (and the URL)
		pgChild := sup.Add(ctx, "PostgreSQL", pg.LogPath(), pg, func(ctx context.Context) (supervise.Process, error) {
			pg, err := pgcluster.Start(ctx, pgOpts)
			if err != nil {
				return nil, err
			}
			return pg, nil
		})
		defer stopping(a, "PostgreSQL", pgChild.Stop)
		if err := pg.CreateDatabase(ctx, "gitfleet"); err != nil {
			return err
		}
		dbURL = pg.URL("gitfleet")
	} else {
		say("Using the database at DATABASE_URL")
	}

	temporalPath, err := temporalcli.Find()
	if err != nil {
		return err
	}
	temporalLog := filepath.Join(dataDir, "temporal.log")
	tlog, err := os.OpenFile(temporalLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer tlog.Close()
	say("Starting the Temporal dev server (gRPC %d, Web UI %d; log %s)", o.port, o.uiPort, temporalLog)
	tsOpts := temporalcli.DevServerOptions{
		Path: temporalPath, Port: o.port, UIPort: o.uiPort, DBFile: filepath.Join(dataDir, "temporal.db"),
		Stdout: tlog, Stderr: tlog,
		Logf: func(format string, args ...any) { fmt.Fprintf(a.stderr, format+"\n", args...) },
	}
	ts, err := temporalcli.StartDevServer(ctx, tsOpts)
	if err != nil {
		return err
	}
	// A restart keeps the ports (a port flag of 0 picked free ones).
	tsOpts.Port, tsOpts.UIPort = portOf(ts.Address()), portOf(ts.UIURL())
	tsChild := sup.Add(ctx, "the Temporal dev server", temporalLog, ts, func(ctx context.Context) (supervise.Process, error) {
		ts, err := temporalcli.StartDevServer(ctx, tsOpts)
		if err != nil {
			return nil, err
		}
		return ts, nil
	})
	defer stopping(a, "Temporal", tsChild.Stop)

	// The forge keeps no state across runs: start from a clean directory
	// and seed the same repositories (commits are deterministic).
	forgeDir := filepath.Join(dataDir, "forge")
	if err := os.RemoveAll(forgeDir); err != nil {
		return err
	}
	say("Starting the demo forge on 127.0.0.1:%d", o.forgePort)
	fg, err := forge.Start(forge.Options{Dir: forgeDir, Addr: "127.0.0.1:" + strconv.Itoa(o.forgePort)})
	if err != nil {
		return err
	}
	defer stopping(a, "the demo forge", fg.Close)
	if err := fg.SeedDemo(); err != nil {
		return fmt.Errorf("seed the demo forge: %w", err)
	}
	appID, appKey, err := seedDemoApp(fg, dataDir)
	if err != nil {
		return fmt.Errorf("the demo forge's GitHub App: %w", err)
	}

	// The App's webhook points at the worker: a push is collected when
	// its delivery arrives, not at the sweep's next check.
	hookAddr := "127.0.0.1:" + strconv.Itoa(o.hookPort)
	hookSecret, err := devWebhookSecret(dataDir)
	if err != nil {
		return err
	}
	if err := fg.SetAppWebhook(appID, "http://"+hookAddr+"/webhook", hookSecret.value); err != nil {
		return fmt.Errorf("the demo App's webhook: %w", err)
	}

	say("Starting the OCI registry on 127.0.0.1:%d", o.regPort)
	// The registry's disk store does not create its directory: without it
	// every blob upload fails and the demo snapshot never builds.
	if err := os.MkdirAll(filepath.Join(dataDir, "registry"), 0o755); err != nil {
		return err
	}
	reg, err := ociregistry.Start(ociregistry.Options{Addr: "127.0.0.1:" + strconv.Itoa(o.regPort), Dir: filepath.Join(dataDir, "registry")})
	if err != nil {
		return err
	}
	defer reg.Close()

	env := map[string]string{
		config.EnvTemporalAddress: ts.Address(),
		config.EnvTemporalUI:      ts.UIURL(),
		config.EnvDatabaseURL:     dbURL,
		vcs.EnvAPIURL:             fg.APIURL(),
		// A readable name for the forge in repository names, workflow ids
		// and the Web UI (.localhost names are loopback by definition).
		vcs.EnvHost:         "forge.localhost",
		config.EnvMirrorDir: filepath.Join(dataDir, "mirrors"),
		config.EnvRegistry:  reg.Addr() + "/gitfleet",
		// The demo forge, registry and local repositories are on this
		// machine: its workers may reach loopback hosts and open local
		// paths anywhere (production workers neither, §11).
		config.EnvAllowedHosts: "localhost,127.0.0.1,::1",
		config.EnvLocalRoot:    string(filepath.Separator),
		// The demo's GitHub App, installed on acme: the workers read its
		// private repositories with the App's installation tokens.
		vcs.EnvAppID:      strconv.FormatInt(appID, 10),
		vcs.EnvAppKeyFile: appKey,
		// Its webhook deliveries, received by the worker.
		config.EnvWebhookAddr:                   hookAddr,
		config.FileVar(config.EnvWebhookSecret): hookSecret.path,
		// Findings go to the forge's code scanning (the App may write
		// it): each repository's page lists its alerts.
		config.EnvCodeScanning: "on",
	}
	// Users' GitHub tokens are sealed with a key kept beside the data.
	if env[config.EnvTokenKey], err = devTokenKey(dataDir); err != nil {
		return err
	}
	envFile := filepath.Join(dataDir, "dev.env")
	if err := writeEnvFile(envFile, env); err != nil {
		return err
	}
	cfg, err := config.Load(func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return a.getenv(k)
	})
	if err != nil {
		return err
	}
	a.cfg = cfg
	if err := a.setup(ctx); err != nil { // the workers check the search attributes
		return err
	}
	say("Applying the database migrations") // the workers wait for them
	if _, _, err := a.migrate(ctx, 0); err != nil {
		return err
	}
	// The forge starts empty, its code scanning uploads too: forget the
	// records of them, so the demo's collections upload again.
	if err := a.forgetUploads(ctx); err != nil {
		return err
	}
	// The findings' key, for the worker only: beside the data, never in
	// the database.
	if env[config.EnvHashKeyFile], err = a.devFindingKey(ctx, dataDir); err != nil {
		return err
	}

	// superviseWorker starts a worker and restarts it (runners on their
	// stores) when it exits.
	// Their output goes to a log file each (dataDir/logs), appended to
	// across restarts, so the terminal keeps the demo's story and errors.
	var logs []*os.File
	defer func() {
		for _, l := range logs {
			_ = l.Close()
		}
	}()
	superviseWorker := func(what string, args ...string) (*supervise.Child, error) {
		log, logPath, err := childLog(dataDir, what)
		if err != nil {
			return nil, err
		}
		logs = append(logs, log)
		w, err := startWorker(ctx, a, env, log, what, args...)
		if err != nil {
			return nil, fmt.Errorf("%w (its log: %s)", err, logPath)
		}
		return sup.Add(ctx, what, logPath, w, func(ctx context.Context) (supervise.Process, error) {
			w, err := startWorker(ctx, a, env, log, what, args...)
			if err != nil {
				return nil, err
			}
			return w, nil
		}), nil
	}
	say("Starting the worker and %d runners; their logs: %s", o.runners, filepath.Join(dataDir, "logs"))
	worker, err := superviseWorker("the worker", "--metrics-addr", devMetricsAddr(0))
	if err != nil {
		return err
	}
	defer stopping(a, "the worker", worker.Stop)
	for i := 1; i <= o.runners; i++ {
		id := fmt.Sprintf("dev-%d", i)
		say("Starting runner %s", id)
		runner, err := superviseWorker("runner "+id, "--runner-id", id, "--store", filepath.Join(dataDir, "runners", id),
			"--metrics-addr", devMetricsAddr(i))
		if err != nil {
			return err
		}
		defer stopping(a, "runner "+id, runner.Stop)
	}

	if o.demo {
		if note := demoContinues(dataDir); note != "" {
			say("%s", note)
		}
		if err := a.demo(ctx, fg); err != nil {
			return err
		}
		if err := markDemoRan(dataDir); err != nil {
			return err
		}
	}
	host := cfg.Hosts.Default()
	temporalCmd, temporalNote := temporalCommand(temporalPath)
	fmt.Fprintf(a.stdout, `
gitfleet is running. Where to look:
  Temporal Web UI   %s/namespaces/%s/workflows
  demo forge        %s/demo/tools (also demo/hello-world, acme/website; acme/payments is private,
                    read through the forge's GitHub App, whose key is <data-dir>/github-app.pem)
  code scanning     %s/demo/hello-world lists the alerts gitfleet uploaded (resolve one with
                    bin/starter findings resolve, collect again: it is dismissed)
  Temporal CLI      %s%s
  logs              Temporal: %s; the worker and runners: %s
  environment       source %s   # then, in another terminal:
                    bin/starter collect demo/tools
                    bin/starter show %s/demo/hello-world
                    bin/starter findings demo/hello-world
                    bin/starter schedules list
                    bin/starter snapshot list
                    bin/starter runner list
                    %s workflow list --query "GitfleetCase = 'D'"

Press Ctrl-C to stop everything.
`, ts.UIURL(), cfg.Namespace, fg.URL(), fg.URL(), temporalPath, temporalNote, temporalLog, filepath.Join(dataDir, "logs", "*.log"), envFile, host, temporalCmd)
	<-ctx.Done()
	fmt.Fprintln(a.stdout, "\n==> Stopping")
	return nil
}

// temporalCommand is how to run the Temporal CLI at path from a shell:
// "temporal" when that is the one on PATH, else its full path, with a note
// on the PATH setting that makes "temporal" work.
func temporalCommand(path string) (cmd, note string) {
	if onPath, err := exec.LookPath("temporal"); err == nil && sameFile(onPath, path) {
		return "temporal", ""
	}
	dir := filepath.Dir(path)
	return path, fmt.Sprintf("\n                    (%s is not on PATH: export PATH=\"$PATH:%s\" to run 'temporal' directly)", dir, dir)
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// portOf is the port of a host:port or http://host:port address; -1 (the
// dev server's "no Web UI") for "".
func portOf(addr string) int {
	if addr == "" {
		return -1
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(addr, "http://"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// stopping runs a stop function and reports failures; deferred, so parts
// stop in the reverse order they started.
func stopping(a *app, what string, stop func() error) {
	if err := stop(); err != nil {
		fmt.Fprintf(a.stderr, "stopping %s: %v\n", what, err)
	}
}

// seedDemoApp registers the demo's GitHub App on the forge, with a key
// made on first use in the data directory (mode 0600), grants it Code
// scanning alerts: write, installs it on the organization acme and on
// demo, and gives acme a private repository, acme/payments,
// that only the App's installation reads. It returns the App's id and its
// key file.
func seedDemoApp(fg *forge.Forge, dataDir string) (int64, string, error) {
	path := filepath.Join(dataDir, "github-app.pem")
	var key *rsa.PrivateKey
	if b, err := os.ReadFile(path); err == nil {
		if key, err = gitcreds.ParseKey(b); err != nil {
			return 0, "", fmt.Errorf("%s: %w", path, err)
		}
	} else {
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return 0, "", err
		}
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
			return 0, "", fmt.Errorf("write the App's key: %w", err)
		}
	}
	app, err := fg.AddApp("gitfleet-demo", key)
	if err != nil {
		return 0, "", err
	}
	if err := fg.CreateOrg("acme"); err != nil {
		return 0, "", err
	}
	if _, err := fg.CreateRepo("acme", "payments"); err != nil {
		return 0, "", err
	}
	// A planted (fake) key, built from parts so this file is no finding.
	if _, err := fg.Commit("acme", "payments", "main", map[string]string{
		"README.md":     "# payments\n\nacme's private repository, read through the GitHub App.\n",
		"deploy/ci.env": "AWS_ACCESS_KEY_ID=" + "AKIA" + "DEMO7QX2LMN4ZP5K" + "\n",
	}, "Initial commit"); err != nil {
		return 0, "", err
	}
	if err := fg.SetPrivate("acme", "payments", true); err != nil {
		return 0, "", err
	}
	// It may upload code scanning results (Code scanning alerts: write),
	// and is installed on demo too, whose public repositories it then
	// uploads the findings of: their pages show the alerts.
	perms := forge.DefaultAppPermissions()
	perms["security_events"] = "write"
	if err := fg.SetAppPermissions(app.ID, perms); err != nil {
		return 0, "", err
	}
	for _, account := range []string{"acme", "demo"} {
		if _, err := fg.InstallApp(app.ID, account); err != nil {
			return 0, "", err
		}
	}
	return app.ID, path, nil
}

// demo collects a repository, renames it on the forge, and collects it under
// its new name: the second collection finds the same codebase (case D).
// Then it collects acme's private repository through the GitHub App.
func (a *app) demo(ctx context.Context, fg *forge.Forge) error {
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	host := a.cfg.Hosts.Default()
	fmt.Fprintln(a.stdout, "\n==> Demo: collecting demo/hello")
	if err := a.collect(ctx, c, []repoid.ID{{Host: host, Owner: "demo", Name: "hello"}}, true); err != nil {
		return err
	}
	if _, ok := fg.Lookup("demo", "hello"); ok {
		if err := fg.Rename("demo", "hello", "hello-world"); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.stdout, "\n==> Demo: demo/hello was renamed to demo/hello-world on the forge; collecting the new name")
	if err := a.collect(ctx, c, []repoid.ID{{Host: host, Owner: "demo", Name: "hello-world"}}, true); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\n==> Demo: collecting acme/payments, private, through the GitHub App installed on acme")
	if err := a.collect(ctx, c, []repoid.ID{{Host: host, Owner: "acme", Name: "payments"}}, true); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\n==> Demo: a snapshot of demo/hello-world's collected commit, built on the worker from its mirror and pulled by the runners")
	snap, err := a.snapshotRequest(ctx, "hello-world", "", host+"/demo/hello-world", "")
	if err != nil {
		return err
	}
	if err := a.createSnapshot(ctx, snap, true); err != nil {
		return err
	}
	return a.demoPush(ctx, c, fg)
}

// demoPush pushes a (fake) key to acme/payments on the forge, whose App
// delivers the push to the worker's webhook, and says how long after the
// push the collection that found it ended.
func (a *app) demoPush(ctx context.Context, c client.Client, fg *forge.Forge) error {
	repo := repoid.ID{Host: a.cfg.Hosts.Default(), Owner: "acme", Name: "payments"}
	id := workflows.CollectWorkflowID(repo)
	fmt.Fprintln(a.stdout, "\n==> Demo: a push to acme/payments adds a key; the forge's GitHub App delivers it to the worker's webhook")
	before, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return err
	}
	pushed := time.Now()
	sha, err := fg.Commit("acme", "payments", "main", map[string]string{
		"deploy/prod.env": "AWS_ACCESS_KEY_ID=" + "AKIA" + "DEMO2PUSHEDKEY7Q" + "\n", // built from parts: no finding here
	}, "Add production settings")
	if err != nil {
		return err
	}
	// The delivery starts a new collection run: wait for it, then for it
	// (and any run it continued as) to end.
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		d, err := c.DescribeWorkflowExecution(wait, id, "")
		if err == nil && d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != before.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
			break
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("no collection of %s started within 2 minutes of the push: is the webhook delivered? (the worker's log)", repo)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var res workflows.CollectResult
	if err := c.GetWorkflow(wait, id, "").Get(wait, &res); err != nil {
		return err
	}
	found := int64(0)
	if res.Scan != nil && res.Scan.Receipt != nil {
		found = res.Scan.Receipt.Findings
	}
	fmt.Fprintf(a.stdout, "    pushed %s; collected and scanned %.1f s after the push: %d new finding(s) (starter findings acme/payments)\n",
		shortSHA(sha), time.Since(pushed).Seconds(), found)
	return nil
}

func shortSHA(sha string) string { return sha[:min(len(sha), 7)] }

// devSecret is a secret kept in a file of the data directory.
type devSecret struct{ path, value string }

// devWebhookSecret returns the demo App's webhook secret, generated on
// first use into the data directory (mode 0600).
func devWebhookSecret(dataDir string) (devSecret, error) {
	path := filepath.Join(dataDir, "webhook.secret")
	if b, err := os.ReadFile(path); err == nil {
		return devSecret{path, strings.TrimSpace(string(b))}, nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return devSecret{}, err
	}
	s := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return devSecret{}, err
	}
	return devSecret{path, s}, nil
}

// devTokenKey returns the dev stack's token key, generated on first use
// into the data directory (mode 0600), so users added once stay readable.
func devTokenKey(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "token.key")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	key := secrets.NewKey()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the token key: %w", err)
	}
	return key, nil
}

// devFindingKey returns the file of the dev stack's finding key, made on
// first use in the data directory (mode 0600): from the key an earlier
// release kept in the dev database, which then forgets it, so the
// findings already there keep their hashes; else a new one.
func (a *app) devFindingKey(ctx context.Context, dataDir string) (string, error) {
	path := filepath.Join(dataDir, "finding.key")
	if _, err := config.ReadFindingKeyFile(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	st, err := a.store(ctx)
	if err != nil {
		return "", err
	}
	defer st.Close()
	k := config.NewFindingKey(1)
	legacy, ok, err := st.LegacyFindingKey(ctx)
	if err != nil {
		return "", err
	}
	if ok {
		k.Secret = legacy
	}
	if err := writeKeyFile(path, k); err != nil {
		return "", fmt.Errorf("write the finding key: %w", err)
	}
	if ok {
		if _, err := st.ForgetLegacyFindingKey(ctx, legacy); err != nil {
			return "", err
		}
	}
	return path, nil
}

func writeEnvFile(path string, env map[string]string) error {
	var b strings.Builder
	b.WriteString("# Written by 'starter dev': the settings of the running dev stack (it holds a key: keep it private).\n")
	for _, k := range []string{config.EnvTemporalAddress, config.EnvTemporalUI, config.EnvDatabaseURL, vcs.EnvAPIURL, vcs.EnvHost,
		config.EnvMirrorDir, config.EnvTokenKey, config.EnvRegistry, config.EnvAllowedHosts, config.EnvLocalRoot} {
		fmt.Fprintf(&b, "export %s=%q\n", k, env[k])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600) // a file from an earlier run keeps its mode otherwise
}

// workerProc is a running worker (or runner) process.
type workerProc struct {
	*childproc.Process
	what string
}

// Stop sends SIGTERM and waits for the worker to exit (20s, then SIGKILL).
// A worker that had already exited is no error: its exit was reported when
// it happened.
func (w *workerProc) Stop() error {
	select {
	case <-w.Done():
		return nil
	default:
	}
	_ = w.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.Done():
		err := w.Err()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
			return nil
		}
		return err
	case <-time.After(20 * time.Second):
		_ = w.Cmd.Process.Kill()
		return fmt.Errorf("%s did not stop in 20s; killed", w.what)
	}
}

// startWorker runs the worker binary that sits next to this one, with
// args (runner mode) or without.
func startWorker(ctx context.Context, a *app, env map[string]string, log io.Writer, what string, args ...string) (*workerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(filepath.Dir(self), "worker")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no worker binary next to %s: build both with 'make build' (or run 'make run')", self)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := childproc.Start(cmd, syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	select {
	case <-proc.Done():
		return nil, fmt.Errorf("%s exited at start: %v", what, proc.Err())
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	return &workerProc{Process: proc, what: what}, nil
}

// devMetricsAddr is where `starter dev`'s worker (0) and runner i serve
// /metrics, /livez and /readyz: a port each.
func devMetricsAddr(i int) string { return "127.0.0.1:" + strconv.Itoa(9090+i) }

// forgetUploads forgets the records of code scanning uploads: the demo
// forge, which held them, starts empty on every run.
func (a *app) forgetUploads(ctx context.Context) error {
	st, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.ForgetUploads(ctx)
}
