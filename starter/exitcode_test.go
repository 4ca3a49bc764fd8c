package main

import (
	"strings"
	"testing"
)

// One rule for every command: input that names nothing, or a command that
// does not exist, is a usage error (exit 2, nothing started); an operation
// that ran and failed is 1. Before, 'starter nosuchcmd' exited 1 and
// 'starter schedules nosuch' 0 (its help), and "has not been collected" was
// 1 from show and findings but 2 from shard retry and snapshot create.
func TestExitCodesFollowOneRule(t *testing.T) {
	o, _ := newRepo(t)
	never := fg.Host() + "/" + o + "/never-collected"
	unscanned, _ := gitRepo(t)
	tests := []struct {
		name string
		args []string
		code int
		want string // on stderr
	}{
		{"unknown command", []string{"nosuchcmd"}, exitUsage, `unknown command "nosuchcmd" for "starter"`},
		{"misspelt command", []string{"colect"}, exitUsage, "did you mean collect?"},
		{"unknown subcommand", []string{"schedules", "nosuch"}, exitUsage, `unknown command "nosuch" for "starter schedules"`},
		{"unknown subcommand, deeper", []string{"admin", "finding-key", "nosuch"}, exitUsage, `for "starter admin finding-key"`},
		{"unknown flag", []string{"show", "--nosuchflag", o + "/app"}, exitUsage, "unknown flag"},
		{"missing argument", []string{"show"}, exitUsage, "accepts 1 arg"},
		{"show, not collected", []string{"show", never}, exitUsage, "has not been collected"},
		{"shard retry, not collected", []string{"shard", "retry", never}, exitUsage, "has not been collected"},
		{"findings, not collected", []string{"findings", never}, exitUsage, "has not been collected"},
		{"findings show, not collected", []string{"findings", "show", never, "abcd"}, exitUsage, "has not been collected"},
		{"findings validate, not collected", []string{"findings", "validate", never}, exitUsage, "has not been collected"},
		{"snapshot create, not collected", []string{"snapshot", "create", "ok", "--from-repo", never}, exitUsage, "has not been collected"},
		{"findings, not scanned", []string{"findings", unscanned}, exitUsage, "has not been scanned yet"},
		{"findings resolve, not scanned", []string{"findings", "resolve", unscanned, "abcd", "--reason", "revoked"}, exitUsage, "has not been scanned yet"},
		// An operation that ran and failed: the repository is not on the forge.
		{"collect that fails", []string{"collect", o + "/missing"}, exitFailed, "1 of 1 collection failed"},
		{"a group alone shows its help", []string{"schedules"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := starter(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("starter %s: exit %d, want %d with %q on stderr\n%s%s", strings.Join(tt.args, " "), code, tt.code, tt.want, out, errOut)
			}
			if tt.code == exitUsage && (strings.Contains(out, "Collecting") || strings.Contains(out, "Scanning")) {
				t.Errorf("bad input started a workflow:\n%s", out)
			}
		})
	}
}
