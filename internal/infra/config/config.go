package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/domain/sweeprange"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/vcs"
)

// Environment variables, besides the host settings read by vcs.HostsFromEnv
// (GITHUB_API_URL, GITHUB_TOKEN, GITFLEET_HOST, GITFLEET_GIT_URL).
const (
	EnvTemporalAddress   = "TEMPORAL_ADDRESS"
	EnvTemporalNamespace = "TEMPORAL_NAMESPACE"
	EnvTemporalUI        = "GITFLEET_UI_URL"
	EnvDatabaseURL       = "DATABASE_URL"
	EnvMirrorDir         = "GITFLEET_MIRROR_DIR"
	EnvLogLevel          = "GITFLEET_LOG_LEVEL"
	EnvLogFormat         = "GITFLEET_LOG_FORMAT"
	EnvRules             = "GITFLEET_RULES"
	EnvShardLease        = "GITFLEET_SHARD_LEASE"
	EnvScanBatch         = "GITFLEET_SCAN_BATCH"
	EnvScanDecodeDepth   = "GITFLEET_SCAN_DECODE_DEPTH"
	EnvScanArchiveDepth  = "GITFLEET_SCAN_ARCHIVE_DEPTH"
	// What reading a repository may cost (gitread.Limits).
	EnvMaxObjectBytes  = gitread.SettingMaxObjectBytes
	EnvMaxPackBytes    = gitread.SettingMaxPackBytes
	EnvSweepEvery      = "GITFLEET_SWEEP_EVERY"
	EnvCleanupEvery    = "GITFLEET_CLEANUP_EVERY"
	EnvRevalidateEvery = "GITFLEET_REVALIDATE_EVERY"
	EnvDecay           = "GITFLEET_DECAY"
	EnvSweepMaxRunning = "GITFLEET_SWEEP_MAX_RUNNING"
	// EnvSweepRanges splits each sweep pass into ranges: "auto" (the
	// default) one per live worker, or a number from 1 to 256.
	EnvSweepRanges       = "GITFLEET_SWEEP_RANGES"
	EnvHashKey           = "GITFLEET_FINDING_KEY"
	EnvHashKeyFile       = "GITFLEET_FINDING_KEY_FILE"
	EnvTokenKey          = secrets.KeyEnv
	EnvGitHubConcurrency = "GITFLEET_GITHUB_CONCURRENCY"
	// Where workers reach on a request's behalf (package reach).
	EnvAllowedHosts = reach.SettingAllowedHosts
	EnvLocalRoot    = reach.SettingLocalRoot

	// Retention: how long the daily cleanup keeps what is no longer
	// current.
	EnvRetainCollections = "GITFLEET_RETAIN_COLLECTIONS"
	EnvRetainReceipts    = "GITFLEET_RETAIN_RECEIPTS"
	EnvRetainOldScopes   = "GITFLEET_RETAIN_OLD_SCOPES"
	EnvRetainScans       = "GITFLEET_RETAIN_SCANS"

	// Snapshots and runners.
	EnvRegistry        = "GITFLEET_REGISTRY"
	EnvInsecure        = "GITFLEET_INSECURE_REGISTRIES"
	EnvRunnerHeartbeat = "GITFLEET_RUNNER_HEARTBEAT"
	EnvRunnerOffline   = "GITFLEET_RUNNER_OFFLINE_AFTER"
	EnvPullAttempt     = "GITFLEET_PULL_ATTEMPT_TIMEOUT"
	EnvPullWindow      = "GITFLEET_PULL_WINDOW"
	EnvPullQueue       = "GITFLEET_PULL_QUEUE_TIMEOUT"
	EnvPullFanout      = "GITFLEET_PULL_FANOUT"
	EnvReconcileEvery  = "GITFLEET_RECONCILE_EVERY"

	// Workers: bounds, drain and the metrics and health endpoint.
	EnvActivitySlots   = "GITFLEET_ACTIVITY_SLOTS"
	EnvControlSlots    = "GITFLEET_CONTROL_SLOTS"
	EnvWorkflowSlots   = "GITFLEET_WORKFLOW_SLOTS"
	EnvScanParallelism = "GITFLEET_SCAN_PARALLELISM"
	EnvStopTimeout     = "GITFLEET_STOP_TIMEOUT"
	EnvMetricsAddr     = "GITFLEET_METRICS_ADDR"
)

// TemporalEnvVars are the Temporal SDK's client variables
// (go.temporal.io/sdk/contrib/envconfig), read besides TEMPORAL_ADDRESS and
// TEMPORAL_NAMESPACE: a TOML profile file and API key, TLS and mTLS
// settings, for Temporal Cloud and mTLS clusters. An empty value is unset.
var TemporalEnvVars = []string{
	"TEMPORAL_CONFIG_FILE",
	"TEMPORAL_PROFILE",
	"TEMPORAL_API_KEY",
	"TEMPORAL_CLIENT_AUTHORITY",
	"TEMPORAL_TLS",
	"TEMPORAL_TLS_CLIENT_CERT_PATH",
	"TEMPORAL_TLS_CLIENT_CERT_DATA",
	"TEMPORAL_TLS_CLIENT_KEY_PATH",
	"TEMPORAL_TLS_CLIENT_KEY_DATA",
	"TEMPORAL_TLS_SERVER_CA_CERT_PATH",
	"TEMPORAL_TLS_SERVER_CA_CERT_DATA",
	"TEMPORAL_TLS_SERVER_NAME",
	"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
	"TEMPORAL_CODEC_ENDPOINT",
	"TEMPORAL_CODEC_AUTH",
}

// Defaults: the dev stack's addresses.
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
	DefaultUIURL           = "http://localhost:8233"
	DefaultDatabaseURL     = "postgres://postgres@127.0.0.1:54329/gitfleet?sslmode=disable"
	DefaultMetricsAddr     = ":9090"
)

// Config is the shared configuration.
type Config struct {
	TemporalAddress string
	Namespace       string
	UIURL           string
	DatabaseURL     string
	MirrorDir       string
	Fleet           Fleet
	Webhook         Webhook
	CodeScanning    CodeScanning
	Notify          Notify
	LogLevel        string
	LogFormat       string
	Hosts           vcs.Hosts
	// RulesFile is a gitleaks-format rule file; "" means the default rules.
	RulesFile string
	// ShardLease is how long a shard lease lasts between renewals.
	ShardLease time.Duration
	// ScanBatch is how many blobs a scan handles between durable writes.
	ScanBatch int
	// ScanDecodeDepth is how many levels of base64, hex and percent
	// encoding the scanner undoes (0 disables decoding); Load sets it, nil
	// (a Config made by hand) means the scanner's default.
	ScanDecodeDepth *int
	// ScanArchiveDepth is how many levels of archives (zip, jar, tar,
	// gzip…) the scanner opens to scan the files inside (0 disables
	// opening them); as ScanDecodeDepth, nil means the scanner's default.
	ScanArchiveDepth *int
	// Limits bound what reading a repository may cost a worker, whatever
	// its data says: the largest object held in memory and the largest
	// pack a fetch receives.
	Limits gitread.Limits
	// SweepEvery and CleanupEvery are the schedules' intervals.
	SweepEvery, CleanupEvery time.Duration
	// RevalidateEvery is the secret-revalidation schedule's interval.
	RevalidateEvery time.Duration
	// Decay is the re-collection decay table.
	Decay decay.Table
	// SweepMaxRunning bounds the Collect runs running at once before the
	// sweep starts more.
	SweepMaxRunning int
	// SweepRanges is how many ranges a sweep pass has; 0: one per live
	// worker (GITFLEET_SWEEP_RANGES=auto).
	SweepRanges int
	// Retain is how long the daily cleanup keeps what is no longer current.
	Retain Retention
	// HashKeyFile is the file that holds the findings' key, unless
	// GITFLEET_FINDING_KEY holds it (hashKey: secret, never logged); the
	// worker reads it with FindingKey.
	HashKeyFile string
	hashKey     string
	// TokenBox seals and opens users' GitHub tokens; nil when no key is
	// configured (users cannot be added, caches not refreshed).
	TokenBox *secrets.Box
	// AllowedHosts are the hosts Git fetches may reach: the configured
	// Git hosts and GITFLEET_ALLOWED_HOSTS. LocalRoot is where local scan
	// targets must lie on a worker ("": none is opened).
	AllowedHosts reach.Hosts
	LocalRoot    string
	// GitHubConcurrency bounds each token's API requests in flight.
	GitHubConcurrency int
	// Snapshots: Registry is where workers push builds ("host:port/path"; a
	// build runs on the repository's worker) and runners may pull from.
	// The durations bound pulls (zero: the workflows' defaults), Fanout is
	// how many pulls a ready runner serves at once.
	Registry string
	// InsecureRegistries are registry hosts (host:port) spoken to over
	// plain HTTP besides loopback and private addresses (a registry:2 in a
	// compose network).
	InsecureRegistries                 []string
	RunnerHeartbeat, RunnerOffline     time.Duration
	PullAttempt, PullWindow, PullQueue time.Duration
	PullFanout                         int
	ReconcileEvery                     time.Duration
	// SnapshotSources are the registries runners pull snapshot and base
	// images from: Registry's host and GITFLEET_SNAPSHOT_SOURCES.
	SnapshotSources snapshot.Sources
	// PeerToken is the runners' shared secret for their peer ports ("" :
	// none, for runners on loopback only). Secret: never logged, never in
	// a workflow's input.
	PeerToken string

	// Temporal is the SDK's client profile: the TOML file's profile
	// (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) with the TEMPORAL_*
	// variables over it; TemporalAddress and Namespace are its address and
	// namespace with gitfleet's defaults. Secret (API key, keys): never
	// logged.
	Temporal envconfig.ClientConfigProfile

	// Workers: ActivitySlots bounds the Git activity tasks a worker runs at
	// once (syncs, scans: the Git task queue), ControlSlots the others
	// (database bookkeeping, API requests, starts: the main task queue),
	// WorkflowSlots its workflow tasks; ScanParallelism bounds the
	// blobs its scans read and scan at once, all scans together.
	// StopTimeout is how long a stopping worker lets running activities
	// finish. MetricsAddr is where /metrics, /livez and /readyz listen
	// ("" : nowhere).
	ActivitySlots, ControlSlots, WorkflowSlots, ScanParallelism int
	StopTimeout                                                 time.Duration
	MetricsAddr                                                 string
}

// DatabaseConns sizes a worker's (or runner's) database pool for its
// activity slots: two connections a slot (a scan writes one batch while it
// looks up the seen blobs of the next) and two for lease renewals and the
// health checks, so that no activity waits for a connection another holds.
// A pool_max_conns in DATABASE_URL overrides it.
func DatabaseConns(activitySlots int) int { return 2*activitySlots + 2 }

// Retention is how long the daily cleanup keeps what is no longer
// current; zero keeps it forever (see store.Retention).
type Retention struct {
	// Collections: the collection history (the newest under each name a
	// codebase had stays). Receipts: scan receipts (a shard's checkpoint
	// stays). OldScopes: results under a rule set a newer one replaced.
	// Scans: a scan request's results after its last use.
	Collections, Receipts, OldScopes, Scans time.Duration
}

// DefaultRetention is the retention when no GITFLEET_RETAIN_* is set: the
// table's defaults.
var DefaultRetention = func() Retention {
	var r Retention
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{{EnvRetainCollections, &r.Collections}, {EnvRetainReceipts, &r.Receipts}, {EnvRetainOldScopes, &r.OldScopes}, {EnvRetainScans, &r.Scans}} {
		v, err := parseRetention(d.env, declared(d.env).Default)
		if err != nil {
			panic(err) // the table's own default: TestDeclaredDefaultsParse
		}
		*d.dst = v
	}
	return r
}()

const day = 24 * time.Hour

// parseRetention reads a retention setting: a number of days ("90d"), a
// Go duration of at least an hour ("36h"), or "0" or "forever" to keep
// everything.
func parseRetention(env, v string) (time.Duration, error) {
	switch v {
	case "0", "forever":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * day
	}
	if err != nil || d < time.Hour {
		return 0, fmt.Errorf("%s=%q: want days (90d), a duration of at least 1h (36h), or 0 to keep forever", env, v)
	}
	return d, nil
}

// TemporalOptions are the client options of the Temporal profile, with
// gitfleet's defaults for the address and the namespace.
func (c Config) TemporalOptions() (client.Options, error) {
	p := c.Temporal
	p.Address, p.Namespace = c.TemporalAddress, c.Namespace
	opts, err := p.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("Temporal client configuration: %w", err)
	}
	return opts, nil
}

// getenvLookup gives envconfig the variables through getenv; an empty one
// is unset, as everywhere in gitfleet.
type getenvLookup func(string) string

func (g getenvLookup) Environ() []string { return nil }
func (g getenvLookup) LookupEnv(k string) (string, bool) {
	v := g(k)
	return v, v != ""
}

// Load reads the configuration through getenv (os.Getenv in binaries).
// Every setting it reads is declared in settings.go, and an unset one
// takes the default declared there (value): zero values in a Config made
// by hand still mean the readers' own defaults, which the table repeats
// (TestDeclaredDefaultsAreTheCodes).
func Load(getenv func(string) string) (Config, error) {
	getenv, err := withSecretFiles(getenv)
	if err != nil {
		return Config{}, err
	}
	hosts, err := vcs.HostsFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{EnvLookup: getenvLookup(getenv)})
	if err != nil {
		return Config{}, fmt.Errorf("Temporal client configuration: %w", err)
	}
	for _, k := range TemporalEnvVars {
		getenv(k) // read or not, depending on the profile: Vars lists them all
	}
	c := Config{
		Temporal:        prof,
		TemporalAddress: or(prof.Address, DefaultTemporalAddress),
		Namespace:       or(prof.Namespace, DefaultNamespace),
		UIURL:           value(getenv, EnvTemporalUI),
		DatabaseURL:     value(getenv, EnvDatabaseURL),
		MirrorDir:       getenv(EnvMirrorDir),
		LogLevel:        value(getenv, EnvLogLevel),
		LogFormat:       value(getenv, EnvLogFormat),
		Hosts:           hosts,
		RulesFile:       getenv(EnvRules),
	}
	if c.DatabaseURL, err = withDatabasePassword(c.DatabaseURL, getenv(EnvDatabasePasswordFile)); err != nil {
		return Config{}, err
	}
	if v := value(getenv, EnvShardLease); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return Config{}, fmt.Errorf("%s=%q: want a duration of at least 1s", EnvShardLease, v)
		}
		c.ShardLease = d
	}
	if v := value(getenv, EnvScanBatch); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("%s=%q: want a positive number", EnvScanBatch, v)
		}
		c.ScanBatch = n
	}
	if v := value(getenv, EnvScanDecodeDepth); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return Config{}, fmt.Errorf("%s=%q: want a number from 0 (no decoding) to 100", EnvScanDecodeDepth, v)
		}
		c.ScanDecodeDepth = &n
	}
	if v := value(getenv, EnvScanArchiveDepth); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return Config{}, fmt.Errorf("%s=%q: want a number from 0 (archives not opened) to 100", EnvScanArchiveDepth, v)
		}
		c.ScanArchiveDepth = &n
	}
	for _, l := range []struct {
		env string
		dst *int64
	}{{EnvMaxObjectBytes, &c.Limits.MaxObjectBytes}, {EnvMaxPackBytes, &c.Limits.MaxPackBytes}} {
		if v := value(getenv, l.env); v != "" {
			n, err := ParseBytes(v)
			if err != nil || n < 1<<20 {
				return Config{}, fmt.Errorf("%s=%q: want a size of at least 1MiB, e.g. 256MiB or 8GiB", l.env, v)
			}
			*l.dst = n
		}
	}
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{{EnvSweepEvery, &c.SweepEvery}, {EnvCleanupEvery, &c.CleanupEvery}, {EnvRevalidateEvery, &c.RevalidateEvery}} {
		if v := value(getenv, d.env); v != "" {
			iv, err := time.ParseDuration(v)
			if err != nil || iv < time.Minute {
				return Config{}, fmt.Errorf("%s=%q: want a duration of at least 1m", d.env, v)
			}
			*d.dst = iv
		}
	}
	for _, r := range []struct {
		env string
		dst *time.Duration
	}{{EnvRetainCollections, &c.Retain.Collections}, {EnvRetainReceipts, &c.Retain.Receipts},
		{EnvRetainOldScopes, &c.Retain.OldScopes}, {EnvRetainScans, &c.Retain.Scans}} {
		if v := value(getenv, r.env); v != "" {
			d, err := parseRetention(r.env, v)
			if err != nil {
				return Config{}, err
			}
			*r.dst = d
		}
	}
	if v := value(getenv, EnvDecay); v != "" {
		t, err := decay.Parse(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvDecay, err)
		}
		c.Decay = t
	}
	c.hashKey, c.HashKeyFile = getenv(EnvHashKey), getenv(EnvHashKeyFile)
	if c.hashKey != "" && c.HashKeyFile != "" {
		return Config{}, fmt.Errorf("%s and %s are both set: set one", EnvHashKey, EnvHashKeyFile)
	}
	if c.hashKey != "" {
		if _, err := ParseFindingKey(c.hashKey); err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvHashKey, err)
		}
	}
	if k := getenv(EnvTokenKey); k != "" {
		box, err := secrets.ParseKey(k)
		if err != nil {
			return Config{}, err
		}
		c.TokenBox = box
	}
	if c.AllowedHosts, err = allowedHosts(hosts, getenv(EnvAllowedHosts)); err != nil {
		return Config{}, err
	}
	if err := reach.CheckProxy(c.AllowedHosts, getenv); err != nil {
		return Config{}, err
	}
	if v := getenv(EnvLocalRoot); v != "" {
		if !filepath.IsAbs(v) {
			return Config{}, fmt.Errorf("%s=%q: want an absolute directory", EnvLocalRoot, v)
		}
		c.LocalRoot = filepath.Clean(v)
	}
	if v := value(getenv, EnvSweepMaxRunning); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("%s=%q: want a number of collections, at least 1", EnvSweepMaxRunning, v)
		}
		c.SweepMaxRunning = n
	}
	if v := value(getenv, EnvSweepRanges); v != "" && v != "auto" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > sweeprange.MaxRanges {
			return Config{}, fmt.Errorf("%s=%q: want auto or a number of ranges from 1 to %d", EnvSweepRanges, v, sweeprange.MaxRanges)
		}
		c.SweepRanges = n
	}
	if v := value(getenv, EnvGitHubConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return Config{}, fmt.Errorf("%s=%q: want a number from 1 to 100", EnvGitHubConcurrency, v)
		}
		c.GitHubConcurrency = n
	}
	c.Registry = getenv(EnvRegistry)
	for _, h := range strings.Split(getenv(EnvInsecure), ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.InsecureRegistries = append(c.InsecureRegistries, h)
		}
	}
	if err := loadRunnerSettings(&c, getenv); err != nil {
		return Config{}, err
	}
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{{EnvRunnerHeartbeat, &c.RunnerHeartbeat}, {EnvRunnerOffline, &c.RunnerOffline}, {EnvPullAttempt, &c.PullAttempt},
		{EnvPullWindow, &c.PullWindow}, {EnvPullQueue, &c.PullQueue}, {EnvReconcileEvery, &c.ReconcileEvery}} {
		if v := value(getenv, d.env); v != "" {
			iv, err := time.ParseDuration(v)
			if err != nil || iv < time.Second {
				return Config{}, fmt.Errorf("%s=%q: want a duration of at least 1s", d.env, v)
			}
			*d.dst = iv
		}
	}
	if v := value(getenv, EnvPullFanout); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return Config{}, fmt.Errorf("%s=%q: want a number from 1 to 64", EnvPullFanout, v)
		}
		c.PullFanout = n
	}
	cpus := runtime.NumCPU()
	// Defaults that depend on the machine (DefaultNote in the table);
	// the others are the table's.
	for _, n := range []struct {
		env      string
		dst      *int
		def, max int
	}{{EnvActivitySlots, &c.ActivitySlots, max(4, 2*cpus), 1000}, {EnvControlSlots, &c.ControlSlots, 0, 1000}, {EnvWorkflowSlots, &c.WorkflowSlots, max(4, 2*cpus), 1000},
		{EnvScanParallelism, &c.ScanParallelism, cpus, 256}} {
		*n.dst = n.def
		if v := value(getenv, n.env); v != "" {
			iv, err := strconv.Atoi(v)
			if err != nil || iv < 1 || iv > n.max {
				return Config{}, fmt.Errorf("%s=%q: want a number from 1 to %d", n.env, v, n.max)
			}
			*n.dst = iv
		}
	}
	if v := value(getenv, EnvStopTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return Config{}, fmt.Errorf("%s=%q: want a duration, e.g. 30s or 10m", EnvStopTimeout, v)
		}
		c.StopTimeout = d
	}
	switch v := value(getenv, EnvMetricsAddr); v {
	case "off", "none", "-":
		c.MetricsAddr = ""
	default:
		c.MetricsAddr = v
	}
	fleet, err := loadFleet(getenv)
	if err != nil {
		return Config{}, err
	}
	c.Fleet = fleet
	if c.CodeScanning, err = loadCodeScanning(getenv); err != nil {
		return Config{}, err
	}
	if c.Webhook, err = loadWebhook(getenv); err != nil {
		return Config{}, err
	}
	if c.Notify, err = loadNotify(getenv); err != nil {
		return Config{}, err
	}
	if c.MirrorDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return Config{}, fmt.Errorf("no %s and no user cache directory: %w", EnvMirrorDir, err)
		}
		c.MirrorDir = filepath.Join(cache, "gitfleet", "mirrors")
	}
	return c, nil
}

// allowedHosts are the configured Git hosts and those the setting lists.
func allowedHosts(hosts vcs.Hosts, setting string) (reach.Hosts, error) {
	var list []string
	for _, n := range hosts.Names() {
		h, err := hosts.Lookup(n)
		if err != nil {
			return reach.Hosts{}, err
		}
		if u, err := url.Parse(h.GitURL); err == nil {
			list = append(list, u.Hostname())
		}
	}
	return reach.ParseHosts(append(list, strings.Split(setting, ",")...))
}

// ParseBytes reads a size: a number of bytes, or of KiB, MiB, GiB or TiB
// ("256MiB", "8GiB"; K, M, G, T mean the same).
func ParseBytes(s string) (int64, error) {
	num, unit := s, ""
	if i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	shift := map[string]uint{"": 0, "B": 0, "K": 10, "KiB": 10, "M": 20, "MiB": 20, "G": 30, "GiB": 30, "T": 40, "TiB": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q", s, unit)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n*float64(int64(1)<<sh) >= 1<<62 {
		return 0, fmt.Errorf("size %q: not a size", s)
	}
	return int64(n * float64(int64(1)<<sh)), nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
