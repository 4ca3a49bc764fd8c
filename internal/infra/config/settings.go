package config

import (
	"slices"
	"strconv"
	"strings"

	"gitfleet/internal/domain/notify"
	"gitfleet/internal/domain/validity"
	"gitfleet/internal/infra/validate"
	"gitfleet/internal/infra/vcs"
)

// Setting is one environment variable gitfleet reads: the one place its
// type, default, unit, readers and help are written. `worker --help`,
// `starter --help` and docs/settings.md are made from the table, and the
// compose file is checked against it (settings_test.go, compose_test.go).
type Setting struct {
	Name string
	Kind Kind
	// Default is the value as it would be written in the environment, the
	// one the code uses when the variable is unset or empty ("": none, or
	// DefaultNote says what). settings_test.go checks Load against it.
	Default string
	// DefaultNote says what the default is when no single value is it
	// ("2 × CPUs, at least 4", "derived from GITHUB_API_URL").
	DefaultNote string
	// Unit of a number ("blobs", "requests"); durations and sizes carry
	// their own.
	Unit    string
	Readers Reader
	// Secret: never logged, never in a workflow. FileForm: NAME_FILE may
	// name a file that holds the value instead (SecretFileVars).
	Secret, FileForm bool
	// Help is one line, for --help and the docs; Doc, more for the docs.
	Help, Doc string
	// Via names what reads it when config.Load does not (Vars lists only
	// Load's): another package, the Go runtime, a library.
	Via string
	// family: Name ends in <PROVIDER>, one variable per validity provider.
	family bool
	// fileOf: this is the NAME_FILE form of the setting fileOf.
	fileOf string
}

// Kind is a setting's type: how its value is written.
type Kind string

// The kinds of settings.
const (
	Duration Kind = "duration" // a Go duration: 90s, 10m, 1h
	Size     Kind = "size"     // bytes: 256MiB, 8GiB
	Int      Kind = "int"
	OnOff    Kind = "on/off"
	Bool     Kind = "bool" // the setting says which values
	String   Kind = "string"
	URL      Kind = "url"
	Address  Kind = "address" // host:port
	File     Kind = "file"    // a path
	Dir      Kind = "directory"
	List     Kind = "list" // comma-separated
)

// Reader says which of gitfleet's processes read a setting (a runner is
// `worker --runner-id`).
type Reader uint8

// The readers.
const (
	Worker Reader = 1 << iota
	Runner
	Starter
)

const all = Worker | Runner | Starter

func (r Reader) String() string {
	var out []string
	for _, n := range []struct {
		r    Reader
		name string
	}{{Worker, "worker"}, {Runner, "runner"}, {Starter, "starter"}} {
		if r&n.r != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ", ")
}

// FileOf is the setting whose NAME_FILE form s is ("": none).
func (s Setting) FileOf() string { return s.fileOf }

// FileName is the NAME_FILE setting of a FileForm setting.
func (s Setting) FileName() string { return FileVar(s.Name) }

// ShownDefault is the default as help and docs show it.
func (s Setting) ShownDefault() string {
	d := s.Default
	if d != "" && s.Unit != "" {
		d += " " + s.Unit
	}
	switch {
	case d != "" && s.DefaultNote != "":
		return d + " (" + s.DefaultNote + ")"
	case d != "":
		return d
	}
	return s.DefaultNote
}

// Settings is every setting gitfleet's processes read, in the order the
// docs show them: the one source for help, docs and the compose file's
// check. A FileForm setting's NAME_FILE is an entry of its own, after it.
func Settings() []Setting {
	var out []Setting
	for _, s := range settings {
		out = append(out, s)
		if s.FileForm {
			out = append(out, Setting{Name: s.FileName(), Kind: File, Readers: s.Readers, fileOf: s.Name,
				Help: "a file holding " + s.Name + " (trailing white space dropped; an empty file is unset; not both)"})
		}
	}
	return out
}

// Lookup is the setting named name, a family's member included
// (GITFLEET_VALIDATE_GITHUB), or the tool variable (GITFLEET_BENCH_* names
// a prefix).
func Lookup(name string) (Setting, bool) {
	for _, s := range Settings() {
		if s.Name == name || s.family && slices.Contains(s.members(), name) {
			return s, true
		}
	}
	for _, s := range ToolVars {
		if prefix, ok := strings.CutSuffix(s.Name, "*"); s.Name == name || ok && strings.HasPrefix(name, prefix) {
			return s, true
		}
	}
	return Setting{}, false
}

// declared is the setting named name, which must be in the table: Load
// reads only declared settings (TestVarsMatchLoad runs every read).
func declared(name string) Setting {
	s, ok := byName[name]
	if !ok {
		panic("config: " + name + " is read but not declared in settings.go")
	}
	return s
}

var byName = func() map[string]Setting {
	m := map[string]Setting{}
	for _, s := range Settings() {
		m[s.Name] = s
	}
	return m
}()

// value is name's value in the environment, else its declared default:
// Load takes every fixed default from the table.
func value(getenv func(string) string, name string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return declared(name).Default
}

// members are a family's variables, or the setting itself.
func (s Setting) members() []string {
	if !s.family {
		return []string{s.Name}
	}
	prefix := strings.TrimSuffix(s.Name, "<PROVIDER>")
	var out []string
	for _, p := range validateProviders() {
		out = append(out, prefix+strings.ToUpper(p))
	}
	return out
}

var settings = []Setting{
	// Temporal.
	{Name: EnvTemporalAddress, Kind: Address, Default: DefaultTemporalAddress, Readers: all, Help: "the Temporal frontend"},
	{Name: EnvTemporalNamespace, Kind: String, Default: DefaultNamespace, Readers: all, Help: "the Temporal namespace"},
	{Name: "TEMPORAL_CONFIG_FILE", Kind: File, Readers: all, Help: "a Temporal client TOML profile file (the SDK's envconfig; the variables below override it)"},
	{Name: "TEMPORAL_PROFILE", Kind: String, DefaultNote: "default", Readers: all, Help: "the profile to use in TEMPORAL_CONFIG_FILE"},
	{Name: "TEMPORAL_API_KEY", Kind: String, Readers: all, Secret: true, Help: "an API key, for Temporal Cloud"},
	{Name: "TEMPORAL_CLIENT_AUTHORITY", Kind: String, Readers: all, Help: "the gRPC :authority the client sends"},
	{Name: "TEMPORAL_TLS", Kind: Bool, DefaultNote: "on when a TLS setting or an API key is given", Readers: all, Help: "true: speak TLS to the frontend"},
	{Name: "TEMPORAL_TLS_CLIENT_CERT_PATH", Kind: File, Readers: all, Help: "mTLS: the client certificate (PEM)"},
	{Name: "TEMPORAL_TLS_CLIENT_CERT_DATA", Kind: String, Readers: all, Help: "mTLS: the client certificate itself, instead of a file"},
	{Name: "TEMPORAL_TLS_CLIENT_KEY_PATH", Kind: File, Readers: all, Secret: true, Help: "mTLS: the client certificate's key (PEM)"},
	{Name: "TEMPORAL_TLS_CLIENT_KEY_DATA", Kind: String, Readers: all, Secret: true, Help: "mTLS: the key itself, instead of a file"},
	{Name: "TEMPORAL_TLS_SERVER_CA_CERT_PATH", Kind: File, DefaultNote: "the system's roots", Readers: all, Help: "the CA the frontend's certificate chains to"},
	{Name: "TEMPORAL_TLS_SERVER_CA_CERT_DATA", Kind: String, Readers: all, Help: "that CA itself, instead of a file"},
	{Name: "TEMPORAL_TLS_SERVER_NAME", Kind: String, DefaultNote: "the address's host", Readers: all, Help: "the name the frontend's certificate must carry"},
	{Name: "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", Kind: Bool, Readers: all, Help: "true: accept any server name (tests only)"},
	{Name: "TEMPORAL_CODEC_ENDPOINT", Kind: URL, Readers: all, Help: "a remote payload codec's endpoint"},
	{Name: "TEMPORAL_CODEC_AUTH", Kind: String, Readers: all, Secret: true, Help: "the Authorization header sent to the codec endpoint"},
	{Name: EnvTemporalUI, Kind: URL, Default: DefaultUIURL, Readers: Starter, Help: "the Temporal Web UI, for the links the starter prints"},

	// gitfleet's database.
	{Name: EnvDatabaseURL, Kind: URL, Default: DefaultDatabaseURL, Readers: all, Secret: true, FileForm: true,
		Help: "gitfleet's PostgreSQL database (not Temporal's)",
		Doc:  "A worker's pool holds 2 connections per Git slot, 1 per control slot, + 2; `pool_max_conns` in the URL overrides it."},
	{Name: EnvDatabasePasswordFile, Kind: File, Readers: all,
		Help: "a file holding the password of DATABASE_URL's user, for a URL that names the user and carries none"},

	// GitHub and Git hosts.
	{Name: vcs.EnvAPIURL, Kind: URL, Default: "https://api.github.com/", Readers: all, Help: "GitHub's or GitHub Enterprise's REST API"},
	{Name: vcs.EnvToken, Kind: String, Readers: Worker, Secret: true, FileForm: true,
		Help: "a GitHub token for public repositories (optional: anonymous rate limits otherwise)"},
	{Name: vcs.EnvHost, Kind: String, DefaultNote: "derived from GITHUB_API_URL", Readers: all, Help: "the host name used in repository names"},
	{Name: vcs.EnvGitURL, Kind: URL, DefaultNote: "derived from GITHUB_API_URL", Readers: all, Help: "the base of clone URLs"},
	{Name: vcs.EnvAllowPlainHTTPToken, Kind: Bool, Readers: all, Help: "1: tokens may go to a plain-http API that is not on this machine"},
	{Name: vcs.EnvAppID, Kind: Int, Readers: Worker,
		Help: "a GitHub App whose installations read private repositories: its id (docs/github.md)",
		Doc:  "Clones, scans, the sweep's checks and identity lookups use its installations' tokens."},
	{Name: vcs.EnvAppKeyFile, Kind: File, Readers: Worker, Secret: true, Help: "that App's private key (PEM)"},
	{Name: vcs.EnvTokensFile, Kind: File, Readers: Worker,
		Help: `without an App: a file of "OWNER TOKEN-FILE" lines, "*" for any other owner`},
	{Name: EnvGitHubConcurrency, Kind: Int, Default: "10", Unit: "requests", Readers: Worker, Help: "GitHub API requests in flight per user token (1 to 100)"},
	{Name: EnvTokenKey, Kind: String, Readers: Worker | Starter, Secret: true, FileForm: true,
		Help: "32-byte key (base64 or hex) sealing users' GitHub tokens in the database (AES-GCM)",
		Doc:  "Needed by `starter users add` and the worker; `starter dev` generates one into `.data/token.key`. Keep it: a new key cannot open tokens sealed with the old one."},

	// Where a worker may reach.
	{Name: EnvAllowedHosts, Kind: List, DefaultNote: "the Git host only", Readers: Worker | Starter,
		Help: "hosts Git fetches may reach besides the Git host: names, addresses, CIDR ranges, * for any public host",
		Doc: "Loopback, private and link-local addresses only for a host listed by name or address, checked as each address is dialed. " +
			"With a proxy (`HTTPS_PROXY`/`HTTP_PROXY` not bypassed by `NO_PROXY`) `*` cannot be held and is refused at start. " +
			"Others fail Permanent \"host x is not in GITFLEET_ALLOWED_HOSTS\" (docs/architecture.md §11)."},
	{Name: EnvLocalRoot, Kind: Dir, DefaultNote: "none opened", Readers: Worker | Starter,
		Help: "the directory local scan targets must lie under",
		Doc:  "Links are resolved first. Unset, a worker refuses every local path; set for the starter, it refuses such paths before starting (exit 2)."},

	// Workers: identity, mirrors, bounds.
	{Name: EnvWorkerID, Kind: String, DefaultNote: "claimed in the mirror directory", Readers: Worker,
		Help: "this worker's name: its row in workers and its task queue gitfleet:git:<id>",
		Doc: "Unset, the worker claims an id once and keeps it beside the mirrors (`<GITFLEET_MIRROR_DIR>/.worker-ids/`, locked while it runs): " +
			"a restart on the same directory is the same worker, with its repositories and mirrors. Never the host name."},
	{Name: EnvWorkerOffline, Kind: Duration, Default: "1m", Readers: Worker | Starter,
		Help: "a worker silent this long (at least 10s) hands its repositories on",
		Doc:  "A worker heartbeats only while Temporal answers it and its polls do not fail; a stopping worker leaves at once."},
	{Name: EnvMirrorDir, Kind: Dir, DefaultNote: "the user cache directory's gitfleet/mirrors", Readers: all, Help: "where a worker keeps its mirrors"},
	{Name: EnvMirrorQuota, Kind: Size, DefaultNote: "no bound", Readers: Worker,
		Help: "bytes a worker's mirrors may hold (at least 1MiB): past it, others' repositories go first, then the least recently used"},
	{Name: EnvActivitySlots, Kind: Int, DefaultNote: "2 × CPUs, at least 4", Readers: Worker,
		Help: "Git activity tasks (syncs, scans, builds) a worker runs at once (1 to 1000)"},
	{Name: EnvControlSlots, Kind: Int, Default: "16", Readers: Worker,
		Help: "other activity tasks (database, API requests, starts) a worker runs at once (1 to 1000)"},
	{Name: EnvWorkflowSlots, Kind: Int, DefaultNote: "2 × CPUs, at least 4", Readers: Worker, Help: "workflow tasks a worker runs at once (1 to 1000)"},
	{Name: EnvScanParallelism, Kind: Int, DefaultNote: "CPUs", Readers: Worker, Help: "blobs a worker reads and scans at once, all its scans together (1 to 256)"},
	{Name: EnvStopTimeout, Kind: Duration, Default: "30s", Readers: Worker | Runner,
		Help: "on SIGTERM or SIGINT, how long running activities may finish"},
	{Name: EnvMetricsAddr, Kind: Address, Default: DefaultMetricsAddr, Readers: Worker | Runner,
		Help: "where /metrics, /livez and /readyz listen; off for nowhere (--metrics-addr overrides)"},
	{Name: EnvLogLevel, Kind: String, Default: "info", Readers: Worker | Runner, Help: "debug, info, warn or error"},
	{Name: EnvLogFormat, Kind: String, Default: "console", Readers: Worker | Runner, Help: "console, or json for machines"},
	{Name: "GOGC", Kind: Int, Default: "50", Readers: Worker, Via: "the Go runtime (TuneGC)",
		Help: "Go's garbage collector target; a worker sets 50 when it is unset",
		Doc:  "A scan's heap is mostly caches that stay live: 50 lowers its peak by a fifth for 2% more CPU."},
	{Name: "GOMEMLIMIT", Kind: Size, DefaultNote: "none", Readers: Worker | Runner, Via: "the Go runtime",
		Help: "Go's soft memory limit: keep it below the container's"},

	// Scans.
	{Name: EnvRules, Kind: File, DefaultNote: "the built-in rules", Readers: Worker | Starter,
		Help: "a gitleaks-format rule file (gitleaks v8.30's format; check one with starter rules check FILE)"},
	{Name: EnvHashKeyFile, Kind: File, Readers: Worker | Starter, Secret: true,
		Help: "a file holding the key of the findings' secret hashes (starter admin finding-key new); a worker needs it",
		Doc: "`v<N>:base64:<key>`; never kept in the database; `starter dev`: `.data/finding.key`. A new version starts new scopes: " +
			"every repository's next scan hashes its secrets again (docs/architecture.md §11, \"The findings' key\")."},
	{Name: EnvHashKey, Kind: String, Readers: Worker | Starter, Secret: true,
		Help: "the findings' key itself, instead of a file (not both)"},
	{Name: EnvShardLease, Kind: Duration, Default: "1m", Readers: Worker, Help: "a scan shard's lease between renewals (at least 1s)"},
	{Name: EnvScanBatch, Kind: Int, Default: "8000", Unit: "blobs", Readers: Worker,
		Help: "blobs a scan handles between durable writes (also the window in which reads follow the pack's order)"},
	{Name: EnvScanDecodeDepth, Kind: Int, Default: "5", Unit: "levels", Readers: Worker,
		Help: "levels of base64, hex and percent encoding a scan undoes to find secrets (0: none; at most 100)"},
	{Name: EnvScanArchiveDepth, Kind: Int, Default: "8", Unit: "levels", Readers: Worker,
		Help: "levels of archives (zip, jar, tar, gzip…) a scan opens to scan the files inside (0: none; at most 100)",
		Doc:  "Within fixed bounds per blob (64 MiB decompressed, 10,000 entries, 100:1); a finding is at `archive!file`."},
	{Name: EnvMaxObjectBytes, Kind: Size, Default: "256MiB", Readers: Worker | Runner,
		Help: "the largest Git object held in memory; one that needs more is refused alone, recorded as a hole",
		Doc:  "A repository of which nothing else could be read is refused, Permanent \"over a limit: object size\" (docs/architecture.md, \"Threat model\")."},
	{Name: EnvMaxPackBytes, Kind: Size, Default: "8GiB", Readers: Worker | Runner,
		Help: "the largest pack a fetch receives; a larger one stops the fetch, Permanent \"over a limit: pack size\""},

	// Schedules and retention.
	{Name: EnvSweepEvery, Kind: Duration, Default: "1h", Readers: Worker | Starter, Help: "how often the recollection-sweep schedule fires (at least 1m)"},
	{Name: EnvSweepMaxRunning, Kind: Int, Default: "100", Unit: "collections", Readers: Worker | Starter,
		Help: "the sweep and collect --org start collections only while fewer Collect runs run, fleet-wide"},
	{Name: EnvSweepRanges, Kind: String, Default: "auto", Readers: Worker | Starter,
		Help: "a sweep pass's ranges, a sweep each (recollection-sweep:3-of-16): auto, one per live worker, or 1 to 256",
		Doc:  "Each pass splits the fleet by a hash of the codebase id; the check rate grows with the ranges. The number is fixed for a pass: a change applies from the next (architecture §5)."},
	{Name: EnvDecay, Kind: List, Default: "7d=6h,14d=12h,30d=24h,60d=3d,90d=7d", Readers: Worker,
		Help: "refresh interval by whole days since a repository was last viewed; idle longer: not refreshed"},
	{Name: EnvCleanupEvery, Kind: Duration, Default: "24h", Readers: Worker | Starter, Help: "how often the stale-cleanup schedule fires (at least 1m)"},
	{Name: EnvRetainCollections, Kind: Duration, Default: "90d", Readers: Worker,
		Help: "how long the cleanup keeps collection history (the newest under each name stays)",
		Doc:  "Days (`90d`) or a Go duration of at least `1h`; `0` or `forever` keeps it forever, as for every GITFLEET_RETAIN_* setting."},
	{Name: EnvRetainReceipts, Kind: Duration, Default: "30d", Readers: Worker, Help: "how long scan receipts are kept (a shard's checkpoint stays)"},
	{Name: EnvRetainOldScopes, Kind: Duration, Default: "7d", Readers: Worker, Help: "how long results under rules a newer rule set replaced are kept"},
	{Name: EnvRetainScans, Kind: Duration, Default: "90d", Readers: Worker, Help: "how long a scan request's results are kept after it was last scanned"},

	// Push-time detection, code scanning, alerts.
	{Name: EnvWebhookAddr, Kind: Address, DefaultNote: "none", Readers: Worker, Help: "where the GitHub App's webhook deliveries are received (/webhook)"},
	{Name: EnvWebhookSecret, Kind: String, Readers: Worker, Secret: true, FileForm: true, Help: "the App's webhook secret, at least 16 characters"},
	{Name: EnvCodeScanning, Kind: OnOff, Default: "off", Readers: Worker,
		Help: "on: upload each repository's findings to GitHub code scanning when they change (the App needs Code scanning alerts: write)"},
	{Name: EnvCodeScanningPerHour, Kind: Int, Default: itoa(DefaultCodeScanningPerHour), Unit: "uploads", Readers: Worker,
		Help: "code scanning uploads per App installation in any hour, all workers together"},
	{Name: EnvNotifyURL, Kind: List, DefaultNote: "no alerts", Readers: Worker, Secret: true, FileForm: true,
		Help: "alerts' receivers: hooks.slack.com or slack+https:// URLs get Slack's format, others gitfleet's JSON",
		Doc:  "A secret: a Slack webhook's URL is its credential."},
	{Name: EnvNotifyPerMinute, Kind: Int, Default: itoa(notify.DefaultPerMinute), Unit: "messages", Readers: Worker,
		Help: "messages to one receiver in a minute, all workers together"},

	// Validity checks (package validate reads them).
	{Name: validate.EnvValidate, Kind: OnOff, Default: "off", Readers: Worker, Via: "validate.FromEnv",
		Help: "on: check found secrets with their providers' APIs (off: nothing is sent; docs/architecture.md §11)"},
	{Name: validate.EnvProviderPrefix + "<PROVIDER>", Kind: OnOff, Default: "on", Readers: Worker, Via: "validate.FromEnv", family: true,
		Help: "off: one provider's checks off (" + strings.ToUpper(strings.Join(validateProviders(), ", ")) + ")"},
	{Name: validate.EnvInFlight, Kind: Int, Default: "2", Unit: "requests", Readers: Worker, Via: "validate.FromEnv",
		Help: "each provider's checks in flight from one worker"},
	{Name: validate.EnvPerMinute, Kind: Int, Default: "30", Unit: "requests", Readers: Worker, Via: "validate.FromEnv",
		Help: "each provider's checks a minute from one worker"},
	{Name: EnvRevalidateEvery, Kind: Duration, Default: "24h", Readers: Worker | Starter,
		Help: "how often the secret-revalidation schedule checks every open secret again (at least 1m)"},
	{Name: validate.EnvEndpointPrefix + "<PROVIDER>", Kind: URL, DefaultNote: "the provider's API", Readers: Worker, Via: "validate.FromEnv", family: true,
		Help: "tests and demos: a loopback origin standing in for the provider (others are refused)"},

	// Snapshots and runners.
	{Name: EnvRegistry, Kind: String, Readers: all,
		Help: "workers: where snapshot builds are pushed, host[:port]/path; runners: the registry they pull from",
		Doc:  "A worker without it refuses builds. Set the same on workers and runners."},
	{Name: EnvInsecure, Kind: List, Readers: all, Help: "registry hosts (host:port) spoken to over plain HTTP besides loopback and private addresses"},
	{Name: EnvSnapshotSources, Kind: List, DefaultNote: "GITFLEET_REGISTRY's host", Readers: all,
		Help: "registries (host[:port][/path]) snapshots and base images may come from besides GITFLEET_REGISTRY's host"},
	{Name: EnvPeerToken, Kind: String, Readers: Runner, Secret: true, FileForm: true,
		Help: "runners: the fleet's token for the peer ports, at least 16 characters; required off loopback"},
	{Name: EnvRunnerHeartbeat, Kind: Duration, Default: "10s", Readers: all, Help: "how often a runner refreshes its row; 3 missed: silent"},
	{Name: EnvRunnerOffline, Kind: Duration, Default: "2m", Readers: Worker | Starter, Help: "a runner silent this long is taken offline by the reconcile"},
	{Name: EnvPullAttempt, Kind: Duration, Default: "10m", Readers: Worker | Starter, Help: "one attempt of a snapshot pull"},
	{Name: EnvPullWindow, Kind: Duration, Default: "1h", Readers: Worker | Starter, Help: "all attempts of a pull, from its last state change"},
	{Name: EnvPullQueue, Kind: Duration, Default: "2m", Readers: Worker | Starter, Help: "how long a pull waits for its runner to pick it up"},
	{Name: EnvPullFanout, Kind: Int, Default: "3", Unit: "pulls", Readers: Worker | Starter, Help: "pulls one ready runner serves to its peers at once (1 to 64)"},
	{Name: EnvReconcileEvery, Kind: Duration, Default: "5m", Readers: Worker | Starter, Help: "how often the runner-reconcile schedule fires"},

	// Libraries' own.
	{Name: "HTTPS_PROXY", Kind: URL, Readers: all, Via: "Go's HTTP clients; Load refuses GITFLEET_ALLOWED_HOSTS=* with it",
		Help: "a proxy for https requests (HTTP_PROXY for http, NO_PROXY exempts hosts; lower-case forms too)"},
	{Name: "HTTP_PROXY", Kind: URL, Readers: all, Via: "Go's HTTP clients; Load refuses GITFLEET_ALLOWED_HOSTS=* with it", Help: "a proxy for http requests"},
	{Name: "NO_PROXY", Kind: List, Readers: all, Via: "Go's HTTP clients", Help: "hosts requests reach without the proxy"},
	{Name: "DOCKER_CONFIG", Kind: Dir, DefaultNote: "~/.docker", Readers: Worker | Runner, Via: "go-containerregistry's keychain",
		Help: "where config.json holds registry credentials"},
	{Name: "SSL_CERT_DIR", Kind: Dir, Readers: all, Via: "Go's crypto/x509", Help: "directories of CA certificates trusted besides the system's"},
}

// ToolVars are GITFLEET_* variables that are no setting of a gitfleet
// process: the deployment's and the tests'. Declared so that the unknown
// variable warning stays quiet about them.
var ToolVars = []Setting{
	{Name: "GITFLEET_DB_ADMIN_PASSWORD", Via: "docker-compose.yml", Help: "gitfleet-db's superuser password"},
	{Name: "GITFLEET_DB_PASSWORD", Via: "docker-compose.yml", Help: "role gitfleet's password (migrations, grants)"},
	{Name: "GITFLEET_WORKER_DB_PASSWORD", Via: "docker-compose.yml", Help: "role gitfleet_worker's password"},
	{Name: "GITFLEET_STARTER_DB_PASSWORD", Via: "docker-compose.yml", Help: "role gitfleet_starter's password"},
	{Name: "GITFLEET_RUNNER_DB_PASSWORD", Via: "docker-compose.yml", Help: "role gitfleet_runner's password"},
	{Name: "GITFLEET_SEARCH_ATTRIBUTES", Via: "docker-compose.yml", Help: "the search attributes temporal-setup registers"},
	{Name: "GITFLEET_PKI_DIR", Via: "deploy/pki/make-pki.sh", Help: "where the certificates are written"},
	{Name: "GITFLEET_PKI_DAYS", Via: "deploy/pki/make-pki.sh", Help: "the certificates' lifetime in days"},
	{Name: "GITFLEET_SECRETS_DIR", Via: "deploy/gitfleet-db/init-roles.sh", Help: "where the roles' passwords are read"},
	{Name: "GITFLEET_ROLES_SQL", Via: "deploy/gitfleet-db/init-roles.sh", Help: "the roles' SQL file"},
	{Name: "GITFLEET_DOCS_UPDATE", Via: "tests", Help: "1: tests rewrite the checked docs instead of failing"},
	{Name: "GITFLEET_RECORD_HISTORIES", Via: "tests", Help: "record workflow histories for the replay tests"},
	{Name: "GITFLEET_TEST_LOG_LEVEL", Via: "tests", Help: "the test stack's log level"},
	{Name: "GITFLEET_GITLEAKS_SAMPLES_OUT", Via: "tests", Help: "where the gitleaks samples' helper writes"},
	{Name: "GITFLEET_MIRROR_HELPER", Via: "tests", Help: "a test's child process"},
	{Name: "GITFLEET_SCAN_HELPER", Via: "tests", Help: "a test's child process"},
	{Name: "GITFLEET_SCAN_HELPER_CPUPROFILE", Via: "tests", Help: "a test's child process's CPU profile"},
	{Name: "GITFLEET_BENCH_*", Via: "benchmarks (Makefile)", Help: "the benchmarks' parameters (docs/benchmarks.md)"},
	{Name: "GITFLEET_BETTERLEAKS", Via: "benchmarks", Help: "the Betterleaks binary the scan benchmark compares with"},
	{Name: "GITFLEET_MANYREFS", Via: "tests", Help: "set: TestManyRefsRescanWritesWhatMoved runs with 50,000 refs instead of 2,000"},
}

// validateProviders are the providers a GITFLEET_VALIDATE_<PROVIDER>
// family names.
func validateProviders() []string { return validity.Providers() }

func itoa(n int) string { return strconv.Itoa(n) }
