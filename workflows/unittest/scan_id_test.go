package unittest

import (
	"strings"
	"testing"

	"gitfleet/internal/domain/target"
	"gitfleet/workflows"
)

// A local scan's workflow id names the repository by its path, so two bare
// mirrors (every one a "repo" directory) read apart; a long path keeps its
// tail. Before, both were "scan:repo:<digest>". The legacy id (base name)
// is what a scan started by an older starter may still run under.
func TestScanWorkflowIDNamesTheRepository(t *testing.T) {
	long := "/srv/" + strings.Repeat("deeply-nested-directory/", 8) + "team/service.git"
	url := target.Target{Location: "https://github.com/acme/api"}
	tests := []struct {
		name       string
		t          target.Target
		wantPrefix string
		legacy     string
	}{
		{"bare mirror a", target.Target{Location: "/mirrors/a/repo", Local: true}, "scan:/mirrors/a/repo:", "scan:repo:"},
		{"bare mirror b", target.Target{Location: "/mirrors/b/repo", Local: true}, "scan:/mirrors/b/repo:", "scan:repo:"},
		{"a work tree's .git", target.Target{Location: "/home/alice/app/.git", Local: true}, "scan:/home/alice/app/.git:", "scan:.git:"},
		{"long path keeps its tail", target.Target{Location: long, Local: true}, "scan:.../", "scan:service.git:"},
		{"URL unchanged", url, "scan:github.com/acme/api:", "scan:github.com/acme/api:"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		id := workflows.ScanWorkflowID(tt.t)
		digest := id[strings.LastIndexByte(id, ':')+1:]
		if !strings.HasPrefix(id, tt.wantPrefix) || len(digest) != 12 || strings.Count(id, ":") != 2 {
			t.Errorf("%s: id %q, want %s<12 hex digits>", tt.name, id, tt.wantPrefix)
		}
		if tt.name == "long path keeps its tail" && (!strings.HasSuffix(id, "/team/service.git:"+digest) || len(id) > len("scan:...:")+100+12) {
			t.Errorf("%s: id %q (%d bytes) does not keep the path's tail within 100 bytes", tt.name, id, len(id))
		}
		if legacy := workflows.LegacyScanWorkflowID(tt.t); legacy != tt.legacy+digest {
			t.Errorf("%s: legacy id %q, want %s%s", tt.name, legacy, tt.legacy, digest)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share the id %q", other, tt.name, id)
		}
		seen[id] = tt.name
		// A selection is a different target, with its own id.
		sel := tt.t
		sel.Selection = target.Selection{Refs: []string{"refs/heads/main"}}
		if workflows.ScanWorkflowID(sel) == id {
			t.Errorf("%s: a selection shares the id %q", tt.name, id)
		}
	}
}
