package gitfleet

import (
	"context"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/secrets"
	"gitfleet/workflows"
)

// docker-compose.yml is validated with compose-go, the loader docker compose
// itself uses (there is no Docker engine here; `make compose-check` runs
// `docker compose config` where there is one), and checked for what a
// production deployment relies on.

// composeSecrets are the variables the compose file requires (${VAR:?...}),
// with sentinel values the tests look for.
var composeSecrets = map[string]string{
	"TEMPORAL_DB_PASSWORD":         "temporal-db-sentinel",
	"GITFLEET_DB_ADMIN_PASSWORD":   "gitfleet-db-admin-sentinel",
	"GITFLEET_DB_PASSWORD":         "gitfleet-db-sentinel",
	"GITFLEET_WORKER_DB_PASSWORD":  "gitfleet-worker-db-sentinel",
	"GITFLEET_STARTER_DB_PASSWORD": "gitfleet-starter-db-sentinel",
	"GITFLEET_RUNNER_DB_PASSWORD":  "gitfleet-runner-db-sentinel",
	"GITFLEET_TOKEN_KEY":           secrets.NewKey(),
	"GITFLEET_FINDING_KEY":         "finding-key-sentinel-0123456789",
	"GITFLEET_PEER_TOKEN":          "peer-token-sentinel-0123456789",
}

// gitfleetServices run gitfleet's binaries and read its configuration.
var gitfleetServices = []string{"gitfleet-migrate", "worker", "runner", "starter"}

// unsetOnPurpose lists variables gitfleet reads (config.Vars) that a service
// leaves unset, with the reason; "*" is every gitfleet service.
var unsetOnPurpose = map[string]map[string]string{
	"GITFLEET_ALLOW_PLAIN_HTTP_TOKEN": {"*": "a production deployment never sends GitHub tokens over plain http"},
	// Secrets reach a service as files (compose secrets), never in its
	// environment, and only the services that use them.
	"GITFLEET_TOKEN_KEY":   {"*": "a secret: GITFLEET_TOKEN_KEY_FILE names its file"},
	"GITFLEET_FINDING_KEY": {"*": "a secret: GITFLEET_FINDING_KEY_FILE names its file"},
	"GITHUB_TOKEN":         {"*": "a secret: GITHUB_TOKEN_FILE names its file"},
	"GITFLEET_PEER_TOKEN":  {"*": "a secret: GITFLEET_PEER_TOKEN_FILE names its file"},
	"GITFLEET_PEER_TOKEN_FILE": {
		"worker":           "only runners serve and pull from peers",
		"starter":          "only runners serve and pull from peers",
		"gitfleet-migrate": "only runners serve and pull from peers",
	},
	"DATABASE_URL_FILE": {"*": "the URL names no secret: DATABASE_PASSWORD_FILE gives the role's password"},
	// Push-time detection is opt-in: it needs a worker GitHub can reach.
	"GITFLEET_WEBHOOK_ADDR":        {"*": "opt-in: a deployment GitHub can reach sets it on one or more workers (docs/github.md, \"Push-time detection\")"},
	"GITFLEET_WEBHOOK_SECRET":      {"*": "a secret: GITFLEET_WEBHOOK_SECRET_FILE names its file"},
	"GITFLEET_WEBHOOK_SECRET_FILE": {"*": "opt-in, with GITFLEET_WEBHOOK_ADDR"},
	// Code scanning uploads are opt-in: they need an App granted Code scanning alerts: write.
	"GITFLEET_CODE_SCANNING":          {"*": "opt-in: on uploads each repository's SARIF to GitHub code scanning (docs/github.md, \"Code scanning\")"},
	"GITFLEET_CODE_SCANNING_PER_HOUR": {"*": "opt-in, with GITFLEET_CODE_SCANNING; the default bound suits GitHub"},
	// Alerts are opt-in: a deployment names its own receivers.
	"GITFLEET_NOTIFY_URL":        {"*": "a secret (a Slack webhook's URL is its credential): GITFLEET_NOTIFY_URL_FILE names its file"},
	"GITFLEET_NOTIFY_URL_FILE":   {"*": "opt-in: a deployment that wants alerts names its receivers (docs/github.md, \"Alerts\")"},
	"GITFLEET_NOTIFY_PER_MINUTE": {"*": "opt-in, with GITFLEET_NOTIFY_URL_FILE; the default bound holds"},
	"GITFLEET_TOKEN_KEY_FILE": {
		"runner":           "runners seal and open no users' tokens",
		"gitfleet-migrate": "migrations need no key",
	},
	"GITFLEET_FINDING_KEY_FILE": {
		"runner":           "runners hash no findings",
		"gitfleet-migrate": "migrations need no key",
	},
	"GITHUB_TOKEN_FILE": {
		"runner":           "runners call no GitHub API",
		"gitfleet-migrate": "migrations call no GitHub API",
		"starter":          "the starter calls the API with users' own tokens only",
	},
	"GITFLEET_MIRROR_DIR": {
		"starter":          "the starter keeps no mirrors",
		"gitfleet-migrate": "migrations keep no mirrors",
	},
}

func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{"docker-compose.yml"},
		cli.WithEnv(kv), cli.WithName("gitfleet"), cli.WithProfiles([]string{"cli"}))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

func composeProject(t *testing.T) *types.Project {
	t.Helper()
	env := maps.Clone(composeSecrets)
	env[githubToken] = "github-token-sentinel"
	p, err := loadCompose(t, env)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func TestComposeServices(t *testing.T) {
	p := composeProject(t)
	for _, name := range []string{"gitfleet-pki", "temporal-db", "temporal-schema", "temporal-cli", "temporal", "temporal-setup", "temporal-ui",
		"gitfleet-db", "gitfleet-pgbouncer", "gitfleet-migrate", "gitfleet-grants", "registry", "registry-pull", "worker", "runner", "starter"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
	w := p.Services["worker"]
	if !slices.Equal(w.Command, []string{"worker"}) || w.Build == nil {
		t.Errorf("worker: command %v, build %v", w.Command, w.Build)
	}
	if w.Deploy == nil || w.Deploy.Replicas == nil || *w.Deploy.Replicas < 2 {
		t.Errorf("worker: deploy %+v, want at least 2 replicas", w.Deploy)
	}
	r := p.Services["runner"]
	if len(r.Command) < 2 || r.Command[0] != "worker" || !slices.Contains(r.Command, "--runner-id") || !slices.Contains(r.Command, "--store") {
		t.Errorf("runner: command %v, want worker --runner-id ID --store DIR", r.Command)
	}
	if m := p.Services["gitfleet-migrate"]; !slices.Equal(m.Command, []string{"starter", "migrate"}) {
		t.Errorf("gitfleet-migrate: command %v, want starter migrate", m.Command)
	}
	if ui := p.Services["temporal-ui"]; len(ui.Ports) != 1 || ui.Ports[0].Published != "8233" {
		t.Errorf("temporal-ui ports %+v, want 8233", ui.Ports)
	}
	for name, s := range p.Services {
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q: unauthenticated services publish on 127.0.0.1 only", name, port.Published, port.HostIP)
			}
		}
	}
}

// githubToken is the one optional secret.
const githubToken = "GITHUB_TOKEN"

// A required secret left unset stops the file from loading, with its name
// (a compose secret's name is its variable's, in lower case).
func TestComposeRequiresSecrets(t *testing.T) {
	for name := range composeSecrets {
		t.Run(name, func(t *testing.T) {
			env := maps.Clone(composeSecrets)
			delete(env, name)
			if _, err := loadCompose(t, env); err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(name)) {
				t.Errorf("loads without %s (error %v)", name, err)
			}
		})
	}
}

// imageTag is the tag of an image reference ("" if it has none) and whether
// it is pinned by digest.
func imageTag(ref string) (tag string, digest bool) {
	if strings.Contains(ref, "@sha256:") {
		return "", true
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:], false
	}
	return "", false
}

var versioned = regexp.MustCompile(`^v?\d+(\.\d+)+`)

func TestComposeImagesPinned(t *testing.T) {
	p := composeProject(t)
	built := map[string]bool{}
	for _, s := range p.Services {
		if s.Build != nil {
			built[s.Image] = true
		}
	}
	refs := map[string]string{} // image -> where
	for name, s := range p.Services {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
			continue
		}
		if !built[s.Image] {
			refs[s.Image] = "service " + name
		}
		if s.Build != nil {
			for _, line := range strings.Split(s.Build.DockerfileInline, "\n") {
				if f := strings.Fields(line); len(f) >= 2 && strings.EqualFold(f[0], "FROM") {
					refs[f[1]] = "service " + name + "'s build"
				}
			}
		}
	}
	for ref, where := range refs {
		tag, digest := imageTag(ref)
		switch {
		case strings.Contains(ref, "auto-setup"):
			t.Errorf("%s: %s is the deprecated auto-setup image", where, ref)
		case digest:
		case tag == "" || tag == "latest":
			t.Errorf("%s: image %q is not pinned", where, ref)
		case !versioned.MatchString(tag):
			t.Errorf("%s: image %q: tag %q names no version (major.minor at least)", where, ref, tag)
		}
	}
	server, _ := imageTag(p.Services["temporal"].Image)
	if !strings.HasPrefix(p.Services["temporal"].Image, "temporalio/server:") || !strings.HasPrefix(server, "1.29.") {
		t.Errorf("temporal: image %q, want temporalio/server:1.29.x", p.Services["temporal"].Image)
	}
	for name, s := range p.Services {
		if strings.HasPrefix(s.Image, "temporalio/admin-tools:") {
			if tag, _ := imageTag(s.Image); tag != server {
				t.Errorf("%s: %s does not match the server's %s", name, s.Image, server)
			}
		}
	}
	if ui, _ := imageTag(p.Services["temporal-ui"].Image); !strings.HasPrefix(ui, "2.") {
		t.Errorf("temporal-ui: image %q, want temporalio/ui:2.x", p.Services["temporal-ui"].Image)
	}
}

// oneShot is a job that runs to completion: it does not restart.
func oneShot(s types.ServiceConfig) bool { return s.Restart == types.RestartPolicyNo }

func healthy(s types.ServiceConfig) bool { return s.HealthCheck != nil && !s.HealthCheck.Disable }

func TestComposeDependencies(t *testing.T) {
	p := composeProject(t)
	// Each dependency waits for the strongest condition its target offers.
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				t.Errorf("%s depends on unknown %s", name, dep)
				continue
			}
			want := types.ServiceConditionStarted
			switch {
			case healthy(target):
				want = types.ServiceConditionHealthy
			case oneShot(target):
				want = types.ServiceConditionCompletedSuccessfully
			}
			if d.Condition != want {
				t.Errorf("%s depends on %s with %q, want %q", name, dep, d.Condition, want)
			}
		}
		// Long-running services come back after a crash or a reboot.
		if !oneShot(s) && !slices.Contains(s.Profiles, "cli") && s.Restart != types.RestartPolicyUnlessStopped {
			t.Errorf("%s: restart %q, want unless-stopped (or \"no\" for a one-shot job)", name, s.Restart)
		}
	}
	for _, tc := range []struct {
		service string
		healthy bool     // has a health check
		oneShot bool     // runs to completion
		needs   []string // depends on at least these
	}{
		{"gitfleet-pki", false, true, nil},
		{"temporal-db", true, false, nil},
		{"temporal-schema", false, true, []string{"temporal-db"}},
		{"temporal-cli", false, true, nil},
		{"temporal", true, false, []string{"temporal-db", "temporal-schema", "temporal-cli", "gitfleet-pki"}},
		{"temporal-setup", false, true, []string{"temporal"}},
		{"temporal-ui", false, false, []string{"temporal"}},
		{"gitfleet-db", true, false, nil},
		{"gitfleet-pgbouncer", true, false, []string{"gitfleet-db"}},
		{"gitfleet-migrate", false, true, []string{"gitfleet-db"}},
		{"gitfleet-grants", false, true, []string{"gitfleet-migrate"}},
		{"registry", true, false, []string{"gitfleet-pki"}},
		{"registry-pull", true, false, []string{"gitfleet-pki"}},
		{"worker", false, false, []string{"temporal", "temporal-setup", "gitfleet-db", "gitfleet-pgbouncer", "gitfleet-migrate", "gitfleet-grants"}},
		{"runner", false, false, []string{"temporal", "temporal-setup", "gitfleet-db", "gitfleet-pgbouncer", "gitfleet-migrate", "gitfleet-grants",
			"registry-pull"}},
		{"starter", false, false, []string{"temporal", "temporal-setup", "gitfleet-db", "gitfleet-pgbouncer", "gitfleet-migrate", "gitfleet-grants"}},
	} {
		s := p.Services[tc.service]
		if healthy(s) != tc.healthy {
			t.Errorf("%s: health check %t, want %t", tc.service, healthy(s), tc.healthy)
		}
		if oneShot(s) != tc.oneShot {
			t.Errorf("%s: one-shot (restart \"no\") %t, want %t", tc.service, oneShot(s), tc.oneShot)
		}
		for _, dep := range tc.needs {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s does not depend on %s", tc.service, dep)
			}
		}
	}
}

func TestComposeHealthChecks(t *testing.T) {
	p := composeProject(t)
	for name, s := range p.Services {
		if s.HealthCheck == nil {
			continue
		}
		if test := strings.Join(s.HealthCheck.Test, " "); strings.Contains(test, "tctl") {
			t.Errorf("%s: health check %q uses tctl (gone from current images)", name, test)
		}
	}
	health := "operator cluster health --address temporal:7233"
	if test := strings.Join(p.Services["temporal"].HealthCheck.Test, " "); !strings.Contains(test, "temporal "+health) {
		t.Errorf("temporal: health check %q, want `temporal %s`", test, health)
	}
	// The CLI the server's health check runs comes from the copy job.
	cli := p.Services["temporal-cli"]
	if !strings.Contains(strings.Join(cli.Command, " "), "/opt/temporal-cli/temporal") {
		t.Errorf("temporal-cli: command %v does not install /opt/temporal-cli/temporal", cli.Command)
	}
}

// Temporal's schema job sets up both databases with the admin-tools' SQL tool.
func TestComposeTemporalSchema(t *testing.T) {
	p := composeProject(t)
	s := p.Services["temporal-schema"]
	script := strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " ")
	for _, want := range []string{"temporal-sql-tool", " create", "setup-schema -v 0.0", "update-schema -d",
		"/etc/temporal/schema/postgresql/v12/"} {
		if !strings.Contains(script, want) {
			t.Errorf("temporal-schema: script lacks %q", want)
		}
	}
	srv := p.Services["temporal"]
	for k, want := range map[string]string{"DB": "postgres12", "POSTGRES_SEEDS": "temporal-db", "DBNAME": "temporal",
		"VISIBILITY_DBNAME": "temporal_visibility", "POSTGRES_PWD": composeSecrets["TEMPORAL_DB_PASSWORD"]} {
		for _, svc := range []string{"temporal", "temporal-schema"} {
			if v := p.Services[svc].Environment[k]; v == nil || *v != want {
				t.Errorf("%s: %s = %v, want %q", svc, k, v, want)
			}
		}
	}
	if v := s.Environment["SQL_PASSWORD"]; v == nil || *v != composeSecrets["TEMPORAL_DB_PASSWORD"] {
		t.Error("temporal-schema: SQL_PASSWORD (read by temporal-sql-tool) is not TEMPORAL_DB_PASSWORD")
	}
	if !strings.Contains(strings.Join(srv.Command, " "), "temporal-server start") {
		t.Errorf("temporal: command %v does not start temporal-server", srv.Command)
	}
}

// The setup job registers exactly gitfleet's search attributes.
func TestComposeSearchAttributes(t *testing.T) {
	p := composeProject(t)
	s := p.Services["temporal-setup"]
	script := strings.Join(s.Command, " ")
	for _, want := range []string{"operator namespace create", "operator search-attribute create"} {
		if !strings.Contains(script, want) {
			t.Errorf("temporal-setup: script lacks %q", want)
		}
	}
	v := s.Environment["GITFLEET_SEARCH_ATTRIBUTES"]
	if v == nil {
		t.Fatal("temporal-setup: GITFLEET_SEARCH_ATTRIBUTES not set")
	}
	got := map[string]string{}
	for _, f := range strings.Fields(*v) {
		name, typ, _ := strings.Cut(f, "=")
		got[name] = typ
	}
	want := map[string]string{}
	for name, typ := range workflows.SearchAttributes {
		want[name] = typ.String()
	}
	if !maps.Equal(got, want) {
		t.Errorf("temporal-setup registers %v, workflows.SearchAttributes is %v", got, want)
	}
	for _, svc := range gitfleetServices {
		if ns := p.Services[svc].Environment["TEMPORAL_NAMESPACE"]; ns == nil || *ns != *s.Environment["TEMPORAL_NAMESPACE"] {
			t.Errorf("%s: TEMPORAL_NAMESPACE %v differs from temporal-setup's", svc, ns)
		}
	}
}

// gitfleet's services set every variable its configuration reads, or say
// why not, and the configuration loads from what they set.
func TestComposeGitfleetEnvironment(t *testing.T) {
	p := composeProject(t)
	vars := config.Vars()
	for v, why := range unsetOnPurpose {
		if !slices.Contains(vars, v) {
			t.Errorf("unsetOnPurpose lists %s, which gitfleet does not read (%v)", v, why)
		}
	}
	for _, name := range gitfleetServices {
		t.Run(name, func(t *testing.T) {
			env := p.Services[name].Environment
			for _, v := range vars {
				why := unsetOnPurpose[v][name] + unsetOnPurpose[v]["*"]
				_, set := env[v]
				switch {
				case why != "" && set:
					t.Errorf("%s is set, though listed as unset on purpose (%s)", v, why)
				case why == "" && !set:
					t.Errorf("%s is not set (set it, empty for the default, or list it in unsetOnPurpose with a reason)", v)
				}
			}
			for _, k := range []string{"TEMPORAL_ADDRESS", "DATABASE_URL", "DATABASE_PASSWORD_FILE", "GITFLEET_REGISTRY"} {
				if v := env[k]; v == nil || *v == "" {
					t.Errorf("%s is empty", k)
				}
			}
			// The owner migrates directly; the rest go through PgBouncer.
			host := "@gitfleet-pgbouncer:6432/gitfleet?"
			if name == "gitfleet-migrate" {
				host = "@gitfleet-db:5432/gitfleet?"
			}
			if db := *env["DATABASE_URL"]; !strings.Contains(db, host) {
				t.Errorf("DATABASE_URL %q does not reach gitfleet's database at %s", db, host)
			}
			// The configuration loads from this environment and the
			// secrets the service mounts, and finds each secret there.
			files := mountedSecrets(t, p, name)
			getenv := func(k string) string {
				v := env[k]
				if v == nil {
					if k == config.EnvMirrorDir {
						return t.TempDir() // Load falls back to the user cache directory
					}
					return ""
				}
				if f, ok := files[*v]; ok {
					return f
				}
				return *v
			}
			cfg, err := config.Load(getenv)
			if err != nil {
				t.Fatalf("gitfleet's configuration does not load from this environment: %v", err)
			}
			role := map[string]string{"gitfleet-migrate": "GITFLEET_DB_PASSWORD", "worker": "GITFLEET_WORKER_DB_PASSWORD",
				"starter": "GITFLEET_STARTER_DB_PASSWORD", "runner": "GITFLEET_RUNNER_DB_PASSWORD"}[name]
			if !strings.Contains(cfg.DatabaseURL, ":"+composeSecrets[role]+host) {
				t.Errorf("DATABASE_URL does not get %s's password", role)
			}
			if keys := name == "worker" || name == "starter"; (cfg.TokenBox != nil) != keys {
				t.Errorf("token key given: %t, want %t", cfg.TokenBox != nil, keys)
			}
			if name == "worker" {
				if k, err := cfg.FindingKey(); err != nil || string(k.Secret) != composeSecrets["GITFLEET_FINDING_KEY"] {
					t.Errorf("the findings' key: %v", err)
				}
				if h, _ := cfg.Hosts.Lookup(cfg.Hosts.Default()); h.Token != "github-token-sentinel" {
					t.Errorf("GITHUB_TOKEN is not taken from its secret")
				}
			}
		})
	}
	for _, name := range []string{"worker", "runner"} {
		if v := p.Services[name].Environment[config.EnvMirrorDir]; v == nil || !strings.HasPrefix(*v, "/var/lib/gitfleet/") {
			t.Errorf("%s: %s = %v, want a directory in its volume", name, config.EnvMirrorDir, v)
		}
	}
}

// No secret is written in the file: every password, token or key a service
// gets is one of the values given in the environment (or empty), and
// gitfleet's services and database get theirs as compose secrets only:
// none is in their environment, where `docker inspect` shows it.
func TestComposeSecretsFromEnvironment(t *testing.T) {
	p := composeProject(t)
	given := []string{"", "github-token-sentinel"}
	for _, v := range composeSecrets {
		given = append(given, v)
	}
	secretName := regexp.MustCompile(`PASSWORD|PWD|TOKEN$|_KEY$`)
	for name, s := range p.Services {
		for k, v := range s.Environment {
			// An absolute path names a mounted file (a key gitfleet-pki
			// made): it holds no secret itself.
			path := v != nil && strings.HasPrefix(*v, "/")
			if secretName.MatchString(k) && !strings.HasSuffix(k, "_FILE") && !path && v != nil && !slices.Contains(given, *v) {
				t.Errorf("%s: %s = %q is written in the file, not taken from the environment", name, k, *v)
			}
			if !strings.HasPrefix(name, "temporal") && v != nil && *v != "" && slices.Contains(given, *v) {
				t.Errorf("%s: %s holds a secret in the environment", name, k)
			}
		}
	}
	for name, sec := range p.Secrets {
		want := strings.ToUpper(name)
		if _, ok := composeSecrets[want]; !ok && want != githubToken {
			t.Errorf("secret %s comes from %q, which is not a secret this file documents", name, sec.Environment)
		}
		if sec.Environment != want || sec.File != "" {
			t.Errorf("secret %s: from %q (file %q), want the variable %s", name, sec.Environment, sec.File, want)
		}
	}
}

// mountedSecrets writes the secrets service mounts to files and maps the
// paths it sees them at (/run/secrets/NAME) to those files.
func mountedSecrets(t *testing.T, p *types.Project, service string) map[string]string {
	t.Helper()
	dir, out := t.TempDir(), map[string]string{}
	for _, ref := range p.Services[service].Secrets {
		target := ref.Target
		if target == "" {
			target = "/run/secrets/" + ref.Source
		}
		f := filepath.Join(dir, ref.Source)
		if err := os.WriteFile(f, []byte(p.Secrets[ref.Source].Content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out[target] = f
	}
	return out
}

// secretsFor lists the secrets a service mounts.
func secretsFor(s types.ServiceConfig) []string {
	var out []string
	for _, ref := range s.Secrets {
		out = append(out, ref.Source)
	}
	slices.Sort(out)
	return out
}

// Least privilege (docs/architecture.md §11): every service gains no
// privilege and has a memory limit; gitfleet's own drop every capability
// and write only to their volumes and /tmp; each gets only the secrets it
// uses and connects to the database as the role made for it (runners
// cannot read users' tokens: internal/infra/store's TestComposeRoles runs
// the roles for real); the superuser is the database's alone.
func TestComposeLeastPrivilege(t *testing.T) {
	p := composeProject(t)
	for name, s := range p.Services {
		if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: security_opt %v lacks no-new-privileges:true", name, s.SecurityOpt)
		}
		mem := s.MemLimit
		if s.Deploy != nil && s.Deploy.Resources.Limits != nil && s.Deploy.Resources.Limits.MemoryBytes > 0 {
			mem = s.Deploy.Resources.Limits.MemoryBytes
		}
		if mem <= 0 {
			t.Errorf("%s: no memory limit", name)
		}
	}
	for _, name := range append([]string{"gitfleet-grants"}, gitfleetServices...) {
		s := p.Services[name]
		if !slices.Equal(s.CapDrop, []string{"ALL"}) || len(s.CapAdd) != 0 {
			t.Errorf("%s: cap_drop %v, cap_add %v; want every capability dropped", name, s.CapDrop, s.CapAdd)
		}
		if !s.ReadOnly || !slices.Contains(s.Tmpfs, "/tmp") {
			t.Errorf("%s: read_only %t, tmpfs %v; want a read-only root with /tmp in memory", name, s.ReadOnly, s.Tmpfs)
		}
		if s.Privileged || s.User == "root" || s.User == "0:0" {
			t.Errorf("%s: privileged %t, user %q", name, s.Privileged, s.User)
		}
	}
	if db := p.Services["gitfleet-db"]; !slices.Equal(db.CapDrop, []string{"ALL"}) {
		t.Errorf("gitfleet-db: cap_drop %v, want ALL (and only what the entrypoint needs added)", db.CapDrop)
	}

	// Secrets only where used.
	for name, want := range map[string][]string{
		"gitfleet-db": {"gitfleet_db_admin_password", "gitfleet_db_password", "gitfleet_runner_db_password", "gitfleet_starter_db_password",
			"gitfleet_worker_db_password"},
		"gitfleet-migrate":   {"gitfleet_db_password"},
		"gitfleet-grants":    {"gitfleet_db_password"},
		"gitfleet-pgbouncer": {"gitfleet_runner_db_password", "gitfleet_starter_db_password", "gitfleet_worker_db_password"},
		"worker":             {"github_token", "gitfleet_finding_key", "gitfleet_token_key", "gitfleet_worker_db_password"},
		"starter":            {"gitfleet_finding_key", "gitfleet_token_key", "gitfleet_starter_db_password"},
		"runner":             {"gitfleet_peer_token", "gitfleet_runner_db_password"},
	} {
		slices.Sort(want)
		if got := secretsFor(p.Services[name]); !slices.Equal(got, want) {
			t.Errorf("%s mounts secrets %v, want %v", name, got, want)
		}
	}
	for name, s := range p.Services {
		if strings.HasPrefix(name, "temporal") || name == "registry" {
			if len(s.Secrets) != 0 {
				t.Errorf("%s mounts gitfleet's secrets %v", name, secretsFor(s))
			}
		}
	}

	// One role per kind of service; the superuser for none of them. The
	// starter's is not the workers': it may not write the workers table
	// (a row there attracts Git work; TestComposeRoles runs it).
	for name, role := range map[string]string{"gitfleet-migrate": "gitfleet", "worker": "gitfleet_worker",
		"starter": "gitfleet_starter", "runner": "gitfleet_runner"} {
		env := p.Services[name].Environment
		u, err := url.Parse(*env["DATABASE_URL"])
		if err != nil {
			t.Fatal(err)
		}
		if _, has := u.User.Password(); has || u.User.Username() != role {
			t.Errorf("%s: DATABASE_URL connects as %q (password in it: %t), want %s and no password", name, u.User.Username(), has, role)
		}
		if f := *env["DATABASE_PASSWORD_FILE"]; f != "/run/secrets/"+role+"_db_password" {
			t.Errorf("%s: DATABASE_PASSWORD_FILE %q, want %s's secret", name, f, role)
		}
	}
	db := p.Services["gitfleet-db"]
	if u := *db.Environment["POSTGRES_USER"]; u == "gitfleet" || strings.HasPrefix(u, "gitfleet_") {
		t.Errorf("gitfleet-db: the superuser is %q, a role gitfleet's services use", u)
	}
	if f := db.Environment["POSTGRES_PASSWORD_FILE"]; f == nil || *f != "/run/secrets/gitfleet_db_admin_password" {
		t.Errorf("gitfleet-db: POSTGRES_PASSWORD_FILE %v, want the admin password's secret", f)
	}
	mounts := map[string]string{}
	for _, name := range []string{"gitfleet-db", "gitfleet-grants"} {
		for _, v := range p.Services[name].Volumes {
			if v.Type == types.VolumeTypeBind {
				mounts[v.Target] = v.Source
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s mounts %s: %v", name, v.Source, err)
				}
			}
		}
	}
	for target, want := range map[string]string{
		"/docker-entrypoint-initdb.d/10-gitfleet-roles.sh": "deploy/gitfleet-db/init-roles.sh",
		"/etc/gitfleet/roles.sql":                          "deploy/gitfleet-db/roles.sql",
		"/etc/gitfleet/grants.sql":                         "deploy/gitfleet-db/grants.sql",
	} {
		if src := mounts[target]; !strings.HasSuffix(src, want) {
			t.Errorf("%s is %q, want %s", target, src, want)
		}
	}
	grants := p.Services["gitfleet-grants"]
	if script := strings.Join(grants.Command, " "); !strings.Contains(script, "psql") || !strings.Contains(script, "/etc/gitfleet/grants.sql") ||
		*grants.Environment["PGUSER"] != "gitfleet" {
		t.Errorf("gitfleet-grants: %q as %v, want psql -f /etc/gitfleet/grants.sql as the owner", script, grants.Environment["PGUSER"])
	}
}

// A worker's id stays with its mirror volume, never with the container's
// host name (which every recreate changes, moving the worker's
// repositories and leaving a dead row): the worker service sets no
// GITFLEET_WORKER_ID, so its configuration has none and the worker claims
// one stored in the mirror directory, which is on a named volume that
// outlives the containers. Replicas sharing the volume each claim their own.
func TestComposeWorkerIDStaysWithTheVolume(t *testing.T) {
	p := composeProject(t)
	w := p.Services["worker"]
	env := w.Environment
	if v := env[config.EnvWorkerID]; v != nil && *v != "" {
		t.Errorf("worker: %s = %q: an id is claimed in the mirror volume, one per replica", config.EnvWorkerID, *v)
	}
	cfg, err := config.Load(func(k string) string {
		if v := env[k]; v != nil && !strings.HasSuffix(k, "_FILE") {
			return *v
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Fleet.WorkerID != "" {
		t.Errorf("worker: the configuration names the worker %q (the host name?): want none, the id claimed beside the mirrors", cfg.Fleet.WorkerID)
	}
	dir := *env[config.EnvMirrorDir]
	onVolume := false
	for _, v := range w.Volumes {
		if _, named := p.Volumes[v.Source]; v.Type == types.VolumeTypeVolume && named && strings.HasPrefix(dir+"/", v.Target+"/") {
			onVolume = true
		}
	}
	if !onVolume {
		t.Errorf("worker: the mirror directory %s (and the ids beside it) is on no named volume: %+v", dir, w.Volumes)
	}
}

// `make compose-check` validates the file with Docker: it gives every
// required secret a placeholder, or compose refuses the file.
func TestComposeCheckSetsEverySecret(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, target, _ := strings.Cut(string(mk), "\ncompose-check:")
	target, _, _ = strings.Cut(target, "\n\n")
	for name := range composeSecrets {
		if !strings.Contains(target, name+`="$${`+name+`:-compose-check}"`) {
			t.Errorf("make compose-check gives %s no placeholder", name)
		}
	}
}

// PgBouncer (docs/architecture.md §10, "Connections"): in transaction mode
// in front of gitfleet-db, authenticating the three roles that pass
// through it from their secrets, on both networks (runners and the starter
// are on pull only); every service reaching it tells pgx to prepare no
// named statement, which another client would meet on the shared server
// connection (store.TestThroughPgBouncerInTransactionMode runs both ways
// through a real PgBouncer); the owner's migrations go direct: goose holds
// a session-level advisory lock, and lock_timeout is a startup parameter.
func TestComposePgBouncer(t *testing.T) {
	p := composeProject(t)
	b := p.Services["gitfleet-pgbouncer"]
	if !strings.HasPrefix(b.Image, "edoburu/pgbouncer:1.") {
		t.Errorf("gitfleet-pgbouncer: image %q, want edoburu/pgbouncer:1.x", b.Image)
	}
	mounts := map[string]string{}
	for _, v := range b.Volumes {
		mounts[v.Target] = v.Source
	}
	ini, err := os.ReadFile(mounts["/etc/gitfleet/pgbouncer.ini"])
	if err != nil {
		t.Fatalf("gitfleet-pgbouncer's configuration: %v", err)
	}
	start, err := os.ReadFile(mounts["/etc/gitfleet/start.sh"])
	if err != nil {
		t.Fatalf("gitfleet-pgbouncer's start script: %v", err)
	}
	settings := map[string]string{}
	for _, line := range strings.Split(string(ini), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(strings.TrimSpace(line), ";") {
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]string{"pool_mode": "transaction", "listen_port": "6432", "auth_type": "scram-sha-256",
		"gitfleet": "host=gitfleet-db port=5432 dbname=gitfleet"} {
		if settings[k] != want {
			t.Errorf("pgbouncer.ini: %s = %q, want %q", k, settings[k], want)
		}
	}
	if !strings.Contains(string(start), "exec pgbouncer /etc/gitfleet/pgbouncer.ini") || !strings.Contains(string(start), settings["auth_file"]) {
		t.Errorf("start.sh does not write the auth file %s and run PgBouncer on the mounted configuration", settings["auth_file"])
	}
	for _, role := range []string{"gitfleet_worker", "gitfleet_starter", "gitfleet_runner"} {
		if !strings.Contains(string(start), role) {
			t.Errorf("start.sh does not authenticate %s", role)
		}
	}
	if strings.Contains(string(start), "gitfleet_db_password") || strings.Contains(string(start), "admin") {
		t.Error("start.sh reads the owner's or the superuser's password: they do not pass through PgBouncer")
	}
	if !slices.Contains(b.Entrypoint, "/etc/gitfleet/start.sh") {
		t.Errorf("gitfleet-pgbouncer: entrypoint %v, want start.sh", b.Entrypoint)
	}
	if _, pull := b.Networks["pull"]; !pull || len(b.Networks) != 2 {
		t.Errorf("gitfleet-pgbouncer: networks %v, want default and pull", b.Networks)
	}
	if !slices.Equal(b.CapDrop, []string{"ALL"}) || !b.ReadOnly || b.User == "root" || b.User == "0:0" {
		t.Errorf("gitfleet-pgbouncer: cap_drop %v, read_only %t, user %q", b.CapDrop, b.ReadOnly, b.User)
	}
	for _, name := range []string{"worker", "runner", "starter"} {
		u, err := url.Parse(*p.Services[name].Environment["DATABASE_URL"])
		if err != nil {
			t.Fatal(err)
		}
		if u.Host != "gitfleet-pgbouncer:6432" {
			t.Errorf("%s: DATABASE_URL reaches %s, want gitfleet-pgbouncer:6432", name, u.Host)
		}
		switch mode := u.Query().Get("default_query_exec_mode"); mode {
		case "cache_describe", "describe_exec", "exec", "simple_protocol":
		default:
			t.Errorf("%s: default_query_exec_mode %q prepares named statements, which transaction pooling breaks", name, mode)
		}
	}
	for _, name := range []string{"gitfleet-migrate"} {
		if u, _ := url.Parse(*p.Services[name].Environment["DATABASE_URL"]); u.Host != "gitfleet-db:5432" {
			t.Errorf("%s: DATABASE_URL reaches %s, want gitfleet-db:5432 directly (session-level advisory lock)", name, u.Host)
		}
	}
	if h := *p.Services["gitfleet-grants"].Environment["PGHOST"]; h != "gitfleet-db" {
		t.Errorf("gitfleet-grants: PGHOST %q, want gitfleet-db", h)
	}
}

// The compose file's documented environment agrees with the settings table
// (internal/infra/config/settings.go): every GITFLEET_* it names, in its
// comments, its interpolations or a service's environment, is declared; a
// gitfleet service sets only variables the table declares a setting of
// its processes; and a default it writes for a setting (${VAR:-default})
// is the table's, so that "empty means gitfleet's default" holds.
func TestComposeEnvironmentIsDeclared(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range regexp.MustCompile(`GITFLEET_[A-Z0-9_]*[A-Z0-9]`).FindAllString(string(raw), -1) {
		if _, ok := config.Lookup(n); !ok {
			t.Errorf("docker-compose.yml names %s, which internal/infra/config/settings.go does not declare", n)
		}
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+):-([^}]*)\}`).FindAllStringSubmatch(string(raw), -1) {
		s, ok := config.Lookup(m[1])
		if ok && s.Readers != 0 && m[2] != "" && m[2] != s.Default {
			t.Errorf("docker-compose.yml defaults %s to %q, the table to %q", m[1], m[2], s.Default)
		}
	}
	p := composeProject(t)
	for _, name := range gitfleetServices {
		for k := range p.Services[name].Environment {
			if s, ok := config.Lookup(k); !ok || s.Readers == 0 {
				t.Errorf("%s sets %s, which is no declared setting of gitfleet's processes", name, k)
			}
		}
	}
}
