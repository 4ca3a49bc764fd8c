package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gitfleet/internal/domain/decay"
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
	EnvSweepEvery        = "GITFLEET_SWEEP_EVERY"
	EnvCleanupEvery      = "GITFLEET_CLEANUP_EVERY"
	EnvDecay             = "GITFLEET_DECAY"
	EnvHashKey           = "GITFLEET_FINDING_KEY"
	EnvTokenKey          = secrets.KeyEnv
	EnvGitHubConcurrency = "GITFLEET_GITHUB_CONCURRENCY"

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
)

// Defaults: the dev stack's addresses.
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
	DefaultUIURL           = "http://localhost:8233"
	DefaultDatabaseURL     = "postgres://postgres@127.0.0.1:54329/gitfleet?sslmode=disable"
)

// Config is the shared configuration.
type Config struct {
	TemporalAddress string
	Namespace       string
	UIURL           string
	DatabaseURL     string
	MirrorDir       string
	LogLevel        string
	LogFormat       string
	Hosts           vcs.Hosts
	// RulesFile is a gitleaks-format rule file; "" means the default rules.
	RulesFile string
	// ShardLease is how long a shard lease lasts between renewals; 0 means
	// the default.
	ShardLease time.Duration
	// ScanBatch is how many blobs a scan handles between durable writes; 0
	// means the default.
	ScanBatch int
	// ScanDecodeDepth is how many levels of base64, hex and percent
	// encoding the scanner undoes (0 disables decoding); nil means the
	// scanner's default.
	ScanDecodeDepth *int
	// SweepEvery and CleanupEvery are the schedules' intervals.
	SweepEvery, CleanupEvery time.Duration
	// Decay is the re-collection decay table.
	Decay decay.Table
	// HashKey keys the findings' secret hashes; nil means the key the
	// database generates once per installation. Secret: never logged.
	HashKey []byte
	// TokenBox seals and opens users' GitHub tokens; nil when no key is
	// configured (users cannot be added, caches not refreshed).
	TokenBox *secrets.Box
	// GitHubConcurrency bounds each token's API requests in flight.
	GitHubConcurrency int
	// Snapshots: Registry is where runners push builds ("host:port/path").
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
}

// Load reads the configuration through getenv (os.Getenv in binaries).
func Load(getenv func(string) string) (Config, error) {
	hosts, err := vcs.HostsFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	c := Config{
		TemporalAddress: or(getenv(EnvTemporalAddress), DefaultTemporalAddress),
		Namespace:       or(getenv(EnvTemporalNamespace), DefaultNamespace),
		UIURL:           or(getenv(EnvTemporalUI), DefaultUIURL),
		DatabaseURL:     or(getenv(EnvDatabaseURL), DefaultDatabaseURL),
		MirrorDir:       getenv(EnvMirrorDir),
		LogLevel:        or(getenv(EnvLogLevel), "info"),
		LogFormat:       or(getenv(EnvLogFormat), "console"),
		Hosts:           hosts,
		RulesFile:       getenv(EnvRules),
	}
	if v := getenv(EnvShardLease); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return Config{}, fmt.Errorf("%s=%q: want a duration of at least 1s", EnvShardLease, v)
		}
		c.ShardLease = d
	}
	if v := getenv(EnvScanBatch); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("%s=%q: want a positive number", EnvScanBatch, v)
		}
		c.ScanBatch = n
	}
	if v := getenv(EnvScanDecodeDepth); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return Config{}, fmt.Errorf("%s=%q: want a number from 0 (no decoding) to 100", EnvScanDecodeDepth, v)
		}
		c.ScanDecodeDepth = &n
	}
	for _, d := range []struct {
		env string
		dst *time.Duration
		def time.Duration
	}{{EnvSweepEvery, &c.SweepEvery, time.Hour}, {EnvCleanupEvery, &c.CleanupEvery, 24 * time.Hour}} {
		*d.dst = d.def
		if v := getenv(d.env); v != "" {
			iv, err := time.ParseDuration(v)
			if err != nil || iv < time.Minute {
				return Config{}, fmt.Errorf("%s=%q: want a duration of at least 1m", d.env, v)
			}
			*d.dst = iv
		}
	}
	c.Decay = decay.Default
	if v := getenv(EnvDecay); v != "" {
		t, err := decay.Parse(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvDecay, err)
		}
		c.Decay = t
	}
	if k := getenv(EnvHashKey); k != "" {
		if len(k) < 16 {
			return Config{}, fmt.Errorf("%s must be at least 16 characters", EnvHashKey)
		}
		c.HashKey = []byte(k)
	}
	if k := getenv(EnvTokenKey); k != "" {
		box, err := secrets.ParseKey(k)
		if err != nil {
			return Config{}, err
		}
		c.TokenBox = box
	}
	c.GitHubConcurrency = 10
	if v := getenv(EnvGitHubConcurrency); v != "" {
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
	c.RunnerHeartbeat = 10 * time.Second
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{{EnvRunnerHeartbeat, &c.RunnerHeartbeat}, {EnvRunnerOffline, &c.RunnerOffline}, {EnvPullAttempt, &c.PullAttempt},
		{EnvPullWindow, &c.PullWindow}, {EnvPullQueue, &c.PullQueue}, {EnvReconcileEvery, &c.ReconcileEvery}} {
		if v := getenv(d.env); v != "" {
			iv, err := time.ParseDuration(v)
			if err != nil || iv < time.Second {
				return Config{}, fmt.Errorf("%s=%q: want a duration of at least 1s", d.env, v)
			}
			*d.dst = iv
		}
	}
	if v := getenv(EnvPullFanout); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return Config{}, fmt.Errorf("%s=%q: want a number from 1 to 64", EnvPullFanout, v)
		}
		c.PullFanout = n
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

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
