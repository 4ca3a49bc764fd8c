package gitfleet

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestComposeFile validates docker-compose.yml with compose-go, the loader
// docker compose itself uses (no Docker engine here), and checks the parts
// gitfleet relies on.
func TestComposeFile(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"docker-compose.yml"},
		cli.WithEnv([]string{"GITHUB_TOKEN=token-from-env"}), cli.WithName("gitfleet"), cli.WithProfiles([]string{"cli"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	for _, name := range []string{"temporal-db", "temporal", "temporal-ui", "gitfleet-db", "registry", "worker", "runner", "starter"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
	for name, s := range p.Services {
		if s.Image != "" && (strings.HasSuffix(s.Image, ":latest") || !strings.Contains(s.Image, ":")) {
			t.Errorf("service %s: image %q is not pinned", name, s.Image)
		}
	}
	w := p.Services["worker"]
	if !slices.Equal(w.Command, []string{"worker"}) || w.Build == nil {
		t.Errorf("worker: command %v, build %v", w.Command, w.Build)
	}
	for _, k := range []string{"TEMPORAL_ADDRESS", "DATABASE_URL", "GITHUB_API_URL", "GITHUB_TOKEN", "GITFLEET_MIRROR_DIR"} {
		if v := w.Environment[k]; v == nil || *v == "" {
			t.Errorf("worker: %s not set", k)
		}
	}
	if v := w.Environment["GITHUB_TOKEN"]; v == nil || *v != "token-from-env" {
		t.Error("worker: GITHUB_TOKEN is not taken from the environment")
	}
	if db := *w.Environment["DATABASE_URL"]; !strings.Contains(db, "@gitfleet-db:") {
		t.Errorf("worker: DATABASE_URL %q is not gitfleet's own database", db)
	}
	r := p.Services["runner"]
	if len(r.Command) < 2 || r.Command[0] != "worker" || !slices.Contains(r.Command, "--runner-id") || !slices.Contains(r.Command, "--store") {
		t.Errorf("runner: command %v, want worker --runner-id ID --store DIR", r.Command)
	}
	for _, k := range []string{"GITFLEET_REGISTRY", "DATABASE_URL", "TEMPORAL_ADDRESS"} {
		if v := r.Environment[k]; v == nil || *v == "" {
			t.Errorf("runner: %s not set", k)
		}
	}
	if ui := p.Services["temporal-ui"]; len(ui.Ports) != 1 || ui.Ports[0].Published != "8233" {
		t.Errorf("temporal-ui ports %+v, want 8233", ui.Ports)
	}
}
