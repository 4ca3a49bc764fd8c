package pgcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"gitfleet/internal/devstack/childproc"
)

// Superuser is the name of the cluster's superuser role.
const Superuser = "postgres"

// LogFileName is the name of the server log file inside the data directory.
const LogFileName = "postgres.log"

// DefaultStartTimeout bounds how long Start waits for the server to accept
// connections when Options.StartTimeout is zero.
const DefaultStartTimeout = 60 * time.Second

// stopTimeout bounds how long Stop waits for a fast shutdown before it
// escalates to an immediate shutdown and then SIGKILL.
const stopTimeout = 30 * time.Second

// Options configures Start.
type Options struct {
	// DataDir is the cluster's data directory (required). If it already
	// holds a cluster (PG_VERSION exists) that cluster is reused; if it is
	// missing or empty a new cluster is created with initdb.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free port.
	Port int
	// BinDir overrides where the server binaries (initdb, postgres) are
	// looked up; see FindBinDir.
	BinDir string
	// Ephemeral trades durability for speed (fsync=off,
	// synchronous_commit=off, full_page_writes=off). Only for throw-away
	// clusters: a crash may corrupt the data.
	Ephemeral bool
	// StartTimeout bounds the wait for the server to accept connections
	// (default DefaultStartTimeout). The context passed to Start bounds
	// the whole start as well.
	StartTimeout time.Duration
	// Logf receives progress messages; nil discards them.
	Logf func(format string, args ...any)
}

// Cluster is a running PostgreSQL server started by Start.
type Cluster struct {
	dataDir string
	binDir  string
	port    int
	sockDir string
	logPath string
	logf    func(format string, args ...any)

	cmd  *exec.Cmd
	proc *childproc.Process

	stopOnce sync.Once
	stopErr  error
}

// FindBinDir returns the directory holding the PostgreSQL server binaries.
// It uses, in order: override if non-empty, $PG_BIN, the directory of
// pg_ctl on PATH, the newest /usr/lib/postgresql/*/bin. An explicit
// override or $PG_BIN that does not hold the binaries is an error (it is not
// silently skipped).
func FindBinDir(override string) (string, error) {
	if override != "" {
		if err := checkBinDir(override); err != nil {
			return "", fmt.Errorf("pgcluster: BinDir %q: %w", override, err)
		}
		return override, nil
	}
	if env := os.Getenv("PG_BIN"); env != "" {
		if err := checkBinDir(env); err != nil {
			return "", fmt.Errorf("pgcluster: $PG_BIN=%q: %w", env, err)
		}
		return env, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		dir := filepath.Dir(p)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			// Debian's /usr/bin/pg_ctl may be a wrapper symlink;
			// prefer the directory that really holds the server.
			if checkBinDir(filepath.Dir(real)) == nil {
				dir = filepath.Dir(real)
			}
		}
		if checkBinDir(dir) == nil {
			return dir, nil
		}
	}
	if dir := newestSystemBinDir("/usr/lib/postgresql"); dir != "" {
		return dir, nil
	}
	return "", errors.New("pgcluster: PostgreSQL server binaries (initdb, postgres) not found: " +
		"looked in $PG_BIN, next to pg_ctl on PATH and in /usr/lib/postgresql/*/bin; " +
		"install them (Debian/Ubuntu: apt-get install postgresql) or set PG_BIN to their directory")
}

// requiredBinaries are the programs this package runs.
var requiredBinaries = []string{"initdb", "postgres"}

func checkBinDir(dir string) error {
	var missing []string
	for _, name := range requiredBinaries {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no executable %s in it (install the PostgreSQL server, e.g. apt-get install postgresql)",
			strings.Join(missing, ", "))
	}
	return nil
}

// newestSystemBinDir returns the bin directory of the highest PostgreSQL
// version under root (Debian layout root/<version>/bin), or "".
func newestSystemBinDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type cand struct {
		ver []int
		dir string
	}
	var cands []cand
	for _, e := range entries {
		dir := filepath.Join(root, e.Name(), "bin")
		if checkBinDir(dir) != nil {
			continue
		}
		var ver []int
		for _, part := range strings.Split(e.Name(), ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				n = -1
			}
			ver = append(ver, n)
		}
		cands = append(cands, cand{ver, dir})
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i].ver, cands[j].ver
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		return len(a) > len(b)
	})
	return cands[0].dir
}

// runAs describes the identity the server binaries run as.
type runAs struct {
	cred *syscall.Credential // nil: the current user
	uid  int
	gids []int
	name string
}

func currentIdentity() (*runAs, error) {
	if os.Geteuid() != 0 {
		return &runAs{uid: os.Geteuid(), gids: []int{os.Getegid()}}, nil
	}
	u, err := user.Lookup(Superuser)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, but initdb/postgres refuse to run as root and there is no %q system user to run them as (it is created by apt-get install postgresql): %w", Superuser, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgcluster: user %q has non-numeric uid/gid %q/%q", u.Username, u.Uid, u.Gid)
	}
	gids := []int{gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if n, err := strconv.Atoi(s); err == nil {
				gids = append(gids, n)
			}
		}
	}
	return &runAs{
		// Empty (non-nil) Groups drops root's supplementary groups.
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
		uid:  uid,
		gids: gids,
		name: u.Username,
	}, nil
}

// Start starts (creating it first if needed) the cluster in opts.DataDir and
// waits until it accepts connections.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: Options.DataDir is required")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: invalid port %d", opts.Port)
	}
	binDir, err := FindBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.Port != 0 {
		if err := checkPortFree(opts.Port); err != nil {
			return nil, err
		}
	}
	id, err := currentIdentity()
	if err != nil {
		return nil, err
	}
	dataDir, err := prepareDataDir(opts.DataDir, id, logf)
	if err != nil {
		return nil, err
	}

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := initdb(ctx, binDir, dataDir, id, logf); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	} else {
		logf("pgcluster: reusing cluster in %s", dataDir)
	}
	if err := clearStalePidFile(dataDir, logf); err != nil {
		return nil, err
	}

	logPath := filepath.Join(dataDir, LogFileName)
	sockDir, err := os.MkdirTemp("", "pgcluster-sock-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: creating socket directory: %w", err)
	}
	if id.cred != nil {
		if err := os.Chown(sockDir, id.uid, id.gids[0]); err != nil {
			os.RemoveAll(sockDir)
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	}

	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// With an automatically chosen port there is a small window in which
	// another process may take it; retry with a new port in that case.
	attempts := 1
	if opts.Port == 0 {
		attempts = 3
	}
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				os.RemoveAll(sockDir)
				return nil, err
			}
		} else if err := checkPortFree(port); err != nil {
			os.RemoveAll(sockDir)
			return nil, err
		}
		c := &Cluster{
			dataDir: dataDir,
			binDir:  binDir,
			port:    port,
			sockDir: sockDir,
			logPath: logPath,
			logf:    logf,
		}
		portInUse, err := c.start(ctx, opts, id)
		if err == nil {
			logf("pgcluster: PostgreSQL listening on 127.0.0.1:%d (data %s, log %s)", port, dataDir, logPath)
			return c, nil
		}
		if portInUse && attempt < attempts && ctx.Err() == nil {
			logf("pgcluster: port %d was taken, retrying with another port", port)
			continue
		}
		os.RemoveAll(sockDir)
		return nil, err
	}
}

// prepareDataDir makes the data directory exist with the ownership and
// permissions postgres insists on and returns its absolute, symlink-free
// path.
func prepareDataDir(dir string, id *runAs, logf func(string, ...any)) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("pgcluster: creating %s: %w", parent, err)
	}
	if err := os.Mkdir(abs, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("pgcluster: creating data directory: %w", err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("pgcluster: data directory %s is not a directory", abs)
	}
	if id.cred != nil {
		if err := makeTraversable(filepath.Dir(abs), id, logf); err != nil {
			return "", err
		}
		if err := chownTree(abs, id.uid, id.gids[0]); err != nil {
			return "", fmt.Errorf("pgcluster: handing data directory to user %s: %w", id.name, err)
		}
	}
	// postgres requires 0700 (or 0750) on the data directory.
	if st.Mode().Perm()&0o027 != 0 {
		if err := os.Chmod(abs, 0o700); err != nil {
			return "", fmt.Errorf("pgcluster: %w", err)
		}
	}
	return abs, nil
}

// makeTraversable adds o+x to every directory from / down to dir that the
// server's user could not otherwise search.
func makeTraversable(dir string, id *runAs, logf func(string, ...any)) error {
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		d := chain[i]
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		mode := st.Mode().Perm()
		var can bool
		switch {
		case int(sys.Uid) == id.uid:
			can = mode&0o100 != 0
		case slices.Contains(id.gids, int(sys.Gid)):
			can = mode&0o010 != 0
		default:
			can = mode&0o001 != 0
		}
		if can {
			continue
		}
		if err := os.Chmod(d, st.Mode()|0o001); err != nil {
			return fmt.Errorf("pgcluster: making %s traversable for user %s: %w", d, id.name, err)
		}
		logf("pgcluster: added o+x to %s so that user %s can reach the data directory", d, id.name)
	}
	return nil
}

func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if sys, ok := info.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == uid && int(sys.Gid) == gid {
			return nil
		}
		return os.Lchown(path, uid, gid)
	})
}

func initdb(ctx context.Context, binDir, dataDir string, id *runAs, logf func(string, ...any)) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("pgcluster: %s is neither empty nor a PostgreSQL data directory (no PG_VERSION); refusing to initdb over it", dataDir)
	}
	logf("pgcluster: initializing new cluster in %s", dataDir)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"--pgdata="+dataDir,
		"--username="+Superuser,
		"--auth=trust",
		"--encoding=UTF8",
		"--locale=C",
		"--no-sync",
	)
	cmd.Dir = dataDir
	cmd.Env = childEnv()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: id.cred}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgcluster: initdb in %s failed: %w\n%s", dataDir, err, lastLines(out.Bytes(), 30))
	}
	// Keep the initdb transcript next to the server log.
	if f, err := os.OpenFile(filepath.Join(dataDir, LogFileName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		f.Write(out.Bytes())
		f.Close()
		if id.cred != nil {
			os.Chown(f.Name(), id.uid, id.gids[0])
		}
	}
	return nil
}

// childEnv is the environment of initdb/postgres: ours with a predictable
// locale and without variables that would redirect them elsewhere.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PGDATA" || k == "PGPORT" || k == "PGHOST" || k == "LC_ALL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// clearStalePidFile removes postmaster.pid when the process it names is gone
// (or is not a postgres process any more: the pid was reused) and reports a
// clear error when a postgres process still holds the directory.
func clearStalePidFile(dataDir string, logf func(string, ...any)) error {
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	data, err := os.ReadFile(pidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err == nil && pid > 0 && processAlive(pid) && isPostgresProcess(pid) {
		return fmt.Errorf("pgcluster: data directory %s is in use by a running postgres (pid %d, see %s); stop it first", dataDir, pid, pidFile)
	}
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: removing stale %s: %w", pidFile, err)
	}
	logf("pgcluster: removed stale %s (pid %s is not running)", pidFile, strings.TrimSpace(first))
	return nil
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isPostgresProcess reports whether pid looks like a postgres server. Where
// /proc is unavailable it errs on the side of "yes".
func isPostgresProcess(pid int) bool {
	if runtime.GOOS != "linux" {
		return true
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	name := strings.TrimSpace(string(comm))
	return strings.HasPrefix(name, "postgres") || strings.HasPrefix(name, "postmaster")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("pgcluster: port %d on 127.0.0.1 is already in use (%v); choose another Options.Port or 0 for a free one", port, err)
	}
	l.Close()
	return nil
}

// start launches the postmaster and waits until it accepts connections.
// portInUse reports a failure caused by the port being taken.
func (c *Cluster) start(ctx context.Context, opts Options, id *runAs) (portInUse bool, err error) {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return false, fmt.Errorf("pgcluster: opening server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	if id.cred != nil {
		os.Chown(c.logPath, id.uid, id.gids[0])
	}
	logStart, _ := logFile.Seek(0, io.SeekEnd)

	args := []string{
		"-D", c.dataDir,
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + c.sockDir,
		"-c", "logging_collector=off",
	}
	if opts.Ephemeral {
		args = append(args,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
		)
	}
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), args...)
	cmd.Dir = c.dataDir
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: id.cred}
	c.cmd = cmd
	// SIGINT if we die first: a fast shutdown leaves a clean cluster.
	proc, err := childproc.Start(cmd, syscall.SIGINT)
	if err != nil {
		return false, fmt.Errorf("pgcluster: starting postgres: %w", err)
	}
	c.proc = proc

	failed := func(what string, cause error) (bool, error) {
		c.kill()
		tail := c.logTail(logStart, 25)
		inUse := strings.Contains(tail, "could not bind") || strings.Contains(tail, "Address already in use")
		msg := fmt.Sprintf("pgcluster: %s", what)
		if inUse {
			msg += fmt.Sprintf(" (port %d on 127.0.0.1 is already in use)", c.port)
		}
		if cause != nil {
			msg += ": " + cause.Error()
		}
		if tail != "" {
			msg += "\nlast lines of " + c.logPath + ":\n" + tail
		}
		return inUse, errors.New(msg)
	}

	var lastErr error
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.proc.Done():
			return failed("postgres exited during startup", c.proc.Err())
		default:
		}
		if lastErr = c.ping(ctx); lastErr == nil {
			return false, nil
		}
		select {
		case <-c.proc.Done():
			return failed("postgres exited during startup", c.proc.Err())
		case <-ctx.Done():
			return failed("postgres did not accept connections in time", fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr))
		case <-tick.C:
		}
	}
}

// ping connects to the server and checks that it serves our data directory
// (and not some other server that happens to listen on the port).
func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if dir != c.dataDir {
		return fmt.Errorf("server on port %d serves %s, not %s", c.port, dir, c.dataDir)
	}
	return nil
}

// kill terminates a postmaster that failed to start properly.
func (c *Cluster) kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	select {
	case <-c.proc.Done():
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
	select {
	case <-c.proc.Done():
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.proc.Done()
	}
}

// logTail returns the last n lines written to the server log since offset.
func (c *Cluster) logTail(offset int64, n int) string {
	f, err := os.Open(c.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return lastLines(data, n)
}

func lastLines(data []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Port returns the TCP port the server listens on (on 127.0.0.1).
func (c *Cluster) Port() int { return c.port }

// DataDir returns the absolute path of the data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// LogPath returns the path of the server log file.
func (c *Cluster) LogPath() string { return c.logPath }

// URL returns a connection URL for database as the superuser.
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// maintenanceConn connects to the maintenance database "postgres", from
// which database name is created or dropped.
func (c *Cluster) maintenanceConn(ctx context.Context, name string) (*pgx.Conn, error) {
	if name == "" {
		return nil, errors.New("pgcluster: empty database name")
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	return conn, nil
}

// CreateDatabase creates database name; it is not an error if it exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := c.maintenanceConn(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: checking database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" /* duplicate_database */ || pgErr.Code == "23505" /* concurrent create */) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: creating database %q: %w", name, err)
	}
	return nil
}

// DropDatabase drops database name, terminating its connections; it is not
// an error if it does not exist.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	conn, err := c.maintenanceConn(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize()
	_, err = conn.Exec(ctx, drop+" WITH (FORCE)")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" { // syntax error: PostgreSQL < 13 has no FORCE
		_, err = conn.Exec(ctx, drop)
	}
	if err != nil {
		return fmt.Errorf("pgcluster: dropping database %q: %w", name, err)
	}
	return nil
}

// Stop shuts the server down (a fast shutdown, like pg_ctl stop -m fast:
// clients are disconnected, the cluster is checkpointed) and waits for it to
// exit. It escalates to an immediate shutdown and then SIGKILL if the server
// does not exit in time. Calling Stop more than once is fine.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = c.stop()
		os.RemoveAll(c.sockDir)
	})
	return c.stopErr
}

func (c *Cluster) stop() error {
	select {
	case <-c.proc.Done():
		return nil // already exited (crashed or killed)
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgcluster: signalling postgres: %w", err)
	}
	select {
	case <-c.proc.Done():
		c.logf("pgcluster: PostgreSQL on port %d stopped", c.port)
		return nil
	case <-time.After(stopTimeout):
	}
	c.logf("pgcluster: fast shutdown timed out after %v; doing an immediate shutdown", stopTimeout)
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.proc.Done():
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.proc.Done()
	}
	return fmt.Errorf("pgcluster: postgres did not shut down within %v and was terminated", stopTimeout)
}
