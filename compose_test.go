package gitfleet

import (
	"context"
	"maps"
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
	"TEMPORAL_DB_PASSWORD": "temporal-db-sentinel",
	"GITFLEET_DB_PASSWORD": "gitfleet-db-sentinel",
	"GITFLEET_TOKEN_KEY":   secrets.NewKey(),
}

// gitfleetServices run gitfleet's binaries and read its configuration.
var gitfleetServices = []string{"gitfleet-migrate", "worker", "runner", "starter"}

// unsetOnPurpose lists variables gitfleet reads (config.Vars) that a service
// leaves unset, with the reason; "*" is every gitfleet service.
var unsetOnPurpose = map[string]map[string]string{
	"GITFLEET_ALLOW_PLAIN_HTTP_TOKEN": {"*": "a production deployment never sends GitHub tokens over plain http"},
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
	env["GITHUB_TOKEN"] = "github-token-sentinel"
	p, err := loadCompose(t, env)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func TestComposeServices(t *testing.T) {
	p := composeProject(t)
	for _, name := range []string{"temporal-db", "temporal-schema", "temporal-cli", "temporal", "temporal-setup", "temporal-ui",
		"gitfleet-db", "gitfleet-migrate", "registry", "worker", "runner", "starter"} {
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

// A required secret left unset stops the file from loading, with its name.
func TestComposeRequiresSecrets(t *testing.T) {
	for name := range composeSecrets {
		t.Run(name, func(t *testing.T) {
			env := maps.Clone(composeSecrets)
			delete(env, name)
			if _, err := loadCompose(t, env); err == nil || !strings.Contains(err.Error(), name) {
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
		{"temporal-db", true, false, nil},
		{"temporal-schema", false, true, []string{"temporal-db"}},
		{"temporal-cli", false, true, nil},
		{"temporal", true, false, []string{"temporal-db", "temporal-schema", "temporal-cli"}},
		{"temporal-setup", false, true, []string{"temporal"}},
		{"temporal-ui", false, false, []string{"temporal"}},
		{"gitfleet-db", true, false, nil},
		{"gitfleet-migrate", false, true, []string{"gitfleet-db"}},
		{"registry", true, false, nil},
		{"worker", false, false, []string{"temporal", "temporal-setup", "gitfleet-db", "gitfleet-migrate"}},
		{"runner", false, false, []string{"temporal", "temporal-setup", "gitfleet-db", "gitfleet-migrate", "registry"}},
		{"starter", false, false, []string{"temporal", "temporal-setup", "gitfleet-db", "gitfleet-migrate"}},
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
			for _, k := range []string{"TEMPORAL_ADDRESS", "DATABASE_URL", "GITFLEET_TOKEN_KEY", "GITFLEET_REGISTRY"} {
				if v := env[k]; v == nil || *v == "" {
					t.Errorf("%s is empty", k)
				}
			}
			if db := *env["DATABASE_URL"]; !strings.Contains(db, "@gitfleet-db:") || !strings.Contains(db, composeSecrets["GITFLEET_DB_PASSWORD"]) {
				t.Errorf("DATABASE_URL %q is not gitfleet's own database with GITFLEET_DB_PASSWORD", db)
			}
			for k, want := range map[string]string{"GITFLEET_TOKEN_KEY": composeSecrets["GITFLEET_TOKEN_KEY"], "GITHUB_TOKEN": "github-token-sentinel"} {
				if v := env[k]; v == nil || *v != want {
					t.Errorf("%s is not taken from the environment", k)
				}
			}
			getenv := func(k string) string {
				if v := env[k]; v != nil {
					return *v
				}
				if k == config.EnvMirrorDir {
					return t.TempDir() // Load falls back to the user cache directory
				}
				return ""
			}
			if _, err := config.Load(getenv); err != nil {
				t.Errorf("gitfleet's configuration does not load from this environment: %v", err)
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
// gets is one of the values given in the environment (or empty).
func TestComposeSecretsFromEnvironment(t *testing.T) {
	p := composeProject(t)
	given := []string{"", "github-token-sentinel"}
	for _, v := range composeSecrets {
		given = append(given, v)
	}
	secretName := regexp.MustCompile(`PASSWORD|PWD|TOKEN$|_KEY$`)
	for name, s := range p.Services {
		for k, v := range s.Environment {
			if secretName.MatchString(k) && v != nil && !slices.Contains(given, *v) {
				t.Errorf("%s: %s = %q is written in the file, not taken from the environment", name, k, *v)
			}
		}
	}
}
