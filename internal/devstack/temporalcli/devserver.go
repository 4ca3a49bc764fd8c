package temporalcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"gitfleet/internal/devstack/childproc"
)

// DefaultStartTimeout bounds how long StartDevServer waits for the server to
// become ready when DevServerOptions.StartTimeout is zero.
const DefaultStartTimeout = 2 * time.Minute

// DefaultStopTimeout is how long Stop waits after SIGINT before SIGKILL.
const DefaultStopTimeout = 15 * time.Second

// outputTailLines is how many lines of server output are kept for errors.
const outputTailLines = 50

// DevServerOptions configures StartDevServer.
type DevServerOptions struct {
	// Path is the CLI binary; "" uses Find.
	Path string
	// IP is the address the frontend (and UI) bind to; default 127.0.0.1.
	IP string
	// Port is the frontend gRPC port; 0 picks a free port.
	Port int
	// UIPort is the Web UI port; 0 picks a free port, -1 disables the UI
	// (--headless).
	UIPort int
	// DBFile is a SQLite file that keeps the server's state across
	// restarts; "" keeps everything in memory.
	DBFile string
	// Namespaces are created at launch in addition to "default".
	Namespaces []string
	// SearchAttributes maps names to types (Keyword, Int, Datetime, Text,
	// Bool, Double, KeywordList) to register at launch.
	SearchAttributes map[string]string
	// LogLevel is the server's log level (debug, info, warn, error, never);
	// default "warn".
	LogLevel string
	// Stdout and Stderr receive the server's output; nil discards it. The
	// last lines are kept regardless and included in start errors.
	Stdout, Stderr io.Writer
	// StartTimeout bounds the wait for readiness (default
	// DefaultStartTimeout); ctx bounds it too.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGINT before killing the
	// server (default DefaultStopTimeout).
	StopTimeout time.Duration
	// Logf receives progress messages and warnings (such as a CLI version
	// other than Version); nil discards them.
	Logf func(format string, args ...any)
}

// DevServer is a running `temporal server start-dev`.
type DevServer struct {
	addr        string
	uiURL       string
	stopTimeout time.Duration
	logf        func(format string, args ...any)
	output      *tailWriter

	cmd  *exec.Cmd
	proc *childproc.Process

	stopOnce sync.Once
	stopErr  error
}

var validSearchAttributeTypes = []string{"Text", "Keyword", "Int", "Double", "Bool", "Datetime", "KeywordList"}

// StartDevServer runs `temporal server start-dev` and waits until its
// frontend reports healthy and the requested namespaces exist.
//
// Ports it picks itself (Port 0) are free when picked and bound by the
// server a moment later: another process may take one in between, and the
// server then exits during startup. It is started again on fresh ports,
// three times at most.
func StartDevServer(ctx context.Context, opts DevServerOptions) (*DevServer, error) {
	for attempt := 1; ; attempt++ {
		d, err := startDevServer(ctx, opts)
		if err == nil || opts.Port != 0 || attempt == 3 || !errors.Is(err, errExitedDuringStartup) {
			return d, err
		}
	}
}

// errExitedDuringStartup marks a server that exited before it was ready.
var errExitedDuringStartup = errors.New("the dev server exited during startup")

func startDevServer(ctx context.Context, opts DevServerOptions) (*DevServer, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	path := opts.Path
	if path == "" {
		var err error
		if path, err = Find(); err != nil {
			return nil, err
		}
	} else if err := checkExecutable(path); err != nil {
		return nil, fmt.Errorf("temporalcli: Temporal CLI %q: %v (install v%s with: %s)", path, err, Version, InstallCommand)
	}
	if v, err := InstalledVersion(ctx, path); err != nil {
		logf("temporalcli: warning: cannot determine the version of %s (want %s): %v", path, Version, err)
	} else if v != Version {
		logf("temporalcli: warning: %s is version %s, but gitfleet pins %s (%s)", path, v, Version, InstallCommand)
	}

	ip := opts.IP
	if ip == "" {
		ip = "127.0.0.1"
	}
	port := opts.Port
	switch {
	case port == 0:
		var err error
		if port, err = freePort(ip); err != nil {
			return nil, err
		}
	case port < 0 || port > 65535:
		return nil, fmt.Errorf("temporalcli: invalid port %d", port)
	default:
		if err := checkPortFree(ip, port); err != nil {
			return nil, err
		}
	}
	uiPort := opts.UIPort
	switch {
	case uiPort == 0:
		var err error
		if uiPort, err = freePort(ip); err != nil {
			return nil, err
		}
	case uiPort == -1:
	case uiPort < -1 || uiPort > 65535:
		return nil, fmt.Errorf("temporalcli: invalid UI port %d", uiPort)
	default:
		if err := checkPortFree(ip, uiPort); err != nil {
			return nil, err
		}
	}
	logLevel := opts.LogLevel
	if logLevel == "" {
		logLevel = "warn"
	}

	args := []string{"server", "start-dev",
		"--ip", ip,
		"--port", strconv.Itoa(port),
		"--log-level", logLevel,
	}
	if uiPort == -1 {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", strconv.Itoa(uiPort))
	}
	if opts.DBFile != "" {
		dbFile, err := filepath.Abs(opts.DBFile)
		if err != nil {
			return nil, fmt.Errorf("temporalcli: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(dbFile), 0o755); err != nil {
			return nil, fmt.Errorf("temporalcli: %w", err)
		}
		args = append(args, "--db-filename", dbFile)
	}
	for _, ns := range opts.Namespaces {
		if ns == "" {
			return nil, errors.New("temporalcli: empty namespace name")
		}
		args = append(args, "--namespace", ns)
	}
	names := make([]string, 0, len(opts.SearchAttributes))
	for name := range opts.SearchAttributes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		typ := opts.SearchAttributes[name]
		if name == "" || strings.ContainsAny(name, "= \t") {
			return nil, fmt.Errorf("temporalcli: invalid search attribute name %q", name)
		}
		if !slices.Contains(validSearchAttributeTypes, typ) {
			return nil, fmt.Errorf("temporalcli: search attribute %s has type %q, want one of %s",
				name, typ, strings.Join(validSearchAttributeTypes, ", "))
		}
		args = append(args, "--search-attribute", name+"="+typ)
	}

	host := ip
	if ip == "0.0.0.0" || ip == "::" {
		host = "127.0.0.1"
	}
	d := &DevServer{
		addr:        net.JoinHostPort(host, strconv.Itoa(port)),
		stopTimeout: opts.StopTimeout,
		logf:        logf,
		output:      &tailWriter{max: outputTailLines},
	}
	if d.stopTimeout <= 0 {
		d.stopTimeout = DefaultStopTimeout
	}
	if uiPort != -1 {
		d.uiURL = "http://" + net.JoinHostPort(host, strconv.Itoa(uiPort))
	}

	cmd := exec.Command(path, args...)
	cmd.Stdout = teeTail(d.output, opts.Stdout)
	cmd.Stderr = teeTail(d.output, opts.Stderr)
	d.cmd = cmd
	logf("temporalcli: starting %s %s", path, strings.Join(args, " "))
	proc, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		return nil, fmt.Errorf("temporalcli: starting %s: %w", path, err)
	}
	d.proc = proc

	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := d.waitReady(ctx, opts.Namespaces); err != nil {
		d.Stop()
		return nil, err
	}
	logf("temporalcli: Temporal dev server ready at %s (UI: %s)", d.addr, orNone(d.uiURL))
	return d, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// quietLogger discards the SDK's log output (connection retries and the
// like), which would otherwise go to stdout.
var quietLogger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))

// waitReady dials the frontend with the Temporal SDK and polls its health
// check, then DescribeNamespace for every namespace, until they succeed, the
// process exits or ctx is done.
func (d *DevServer) waitReady(ctx context.Context, namespaces []string) error {
	// Cancel in-flight probes as soon as the process exits: the SDK retries
	// unavailable errors until the deadline.
	probeCtx, cancelProbes := context.WithCancel(ctx)
	defer cancelProbes()
	go func() {
		select {
		case <-d.proc.Done():
			cancelProbes()
		case <-probeCtx.Done():
		}
	}()

	opts := client.Options{HostPort: d.addr, Logger: quietLogger}
	var c client.Client
	var nc client.NamespaceClient
	defer func() {
		if nc != nil {
			nc.Close()
		}
		if c != nil {
			c.Close()
		}
	}()
	check := func() error {
		cctx, cancel := context.WithTimeout(probeCtx, 2*time.Second)
		defer cancel()
		if c == nil {
			cl, err := client.DialContext(cctx, opts)
			if err != nil {
				return fmt.Errorf("dial: %w", err)
			}
			c = cl
		}
		if _, err := c.CheckHealth(cctx, &client.CheckHealthRequest{}); err != nil {
			return err
		}
		if nc == nil {
			cl, err := client.NewNamespaceClient(opts)
			if err != nil {
				return fmt.Errorf("namespace client: %w", err)
			}
			nc = cl
		}
		for _, ns := range append([]string{"default"}, namespaces...) {
			if _, err := nc.Describe(cctx, ns); err != nil {
				return fmt.Errorf("namespace %s: %w", ns, err)
			}
		}
		return nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		select {
		case <-d.proc.Done():
			return d.startError(errExitedDuringStartup, d.proc.Err())
		default:
		}
		if lastErr = check(); lastErr == nil {
			// Make sure it is our process answering, not a server that
			// grabbed the port while ours failed to bind.
			select {
			case <-d.proc.Done():
				return d.startError(errExitedDuringStartup, d.proc.Err())
			default:
				return nil
			}
		}
		select {
		case <-d.proc.Done():
			return d.startError(errExitedDuringStartup, d.proc.Err())
		case <-ctx.Done():
			return d.startError(fmt.Errorf("the dev server at %s did not become ready", d.addr),
				fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr))
		case <-tick.C:
		}
	}
}

func (d *DevServer) startError(what, cause error) error {
	err := fmt.Errorf("temporalcli: %w", what)
	if cause != nil {
		err = fmt.Errorf("%w: %v", err, cause)
	}
	if tail := d.output.String(); tail != "" {
		err = fmt.Errorf("%w\nlast lines of its output:\n%s", err, tail)
	}
	return err
}

// Address returns the host:port of the frontend gRPC service.
func (d *DevServer) Address() string { return d.addr }

// UIURL returns the Web UI's URL, or "" if the server is headless.
func (d *DevServer) UIURL() string { return d.uiURL }

// Output returns the last lines the server printed.
func (d *DevServer) Output() string { return d.output.String() }

// Stop interrupts the server (SIGINT to its process group), waits for it to
// exit and kills it if it has not exited after the stop timeout. Calling it
// more than once is fine.
func (d *DevServer) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

func (d *DevServer) stop() error {
	select {
	case <-d.proc.Done():
		return nil
	default:
	}
	pid := d.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
		d.cmd.Process.Signal(syscall.SIGINT)
	}
	select {
	case <-d.proc.Done():
		d.logf("temporalcli: dev server at %s stopped", d.addr)
		return nil
	case <-time.After(d.stopTimeout):
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	d.cmd.Process.Kill()
	<-d.proc.Done()
	return fmt.Errorf("temporalcli: the dev server at %s did not exit within %v of SIGINT and was killed", d.addr, d.stopTimeout)
}

func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("temporalcli: picking a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func checkPortFree(ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("temporalcli: port %d on %s is already in use (%v); choose another port or 0 for a free one", port, ip, err)
	}
	l.Close()
	return nil
}

// tailWriter keeps the last max lines written to it.
type tailWriter struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := append(t.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, strings.TrimRight(string(data[:i]), "\r"))
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
		data = data[i+1:]
	}
	if len(data) > 4096 { // an endless line: keep its end
		data = data[len(data)-4096:]
	}
	t.partial = append([]byte(nil), data...)
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.partial))
	}
	return strings.Join(lines, "\n")
}

func teeTail(tail *tailWriter, w io.Writer) io.Writer {
	if w == nil {
		return tail
	}
	return io.MultiWriter(tail, w)
}
