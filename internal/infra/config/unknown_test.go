package config

import (
	"slices"
	"testing"
)

// A GITFLEET_* variable no setting declares is warned about, naming the
// closest declared one; declared ones (a family's members, file forms,
// the tools' variables) and other variables are not.
func TestUnknownNamesTheClosest(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string // "": no warning
	}{
		{"GITFLEET_SCAN_BATCHES=100", "warning: GITFLEET_SCAN_BATCHES is not a gitfleet setting (did you mean GITFLEET_SCAN_BATCH?)"},
		{"GITFLEET_METRICS_ADR=:9091", "warning: GITFLEET_METRICS_ADR is not a gitfleet setting (did you mean GITFLEET_METRICS_ADDR?)"},
		{"GITFLEET_RETAIN_SCAN=30d", "warning: GITFLEET_RETAIN_SCAN is not a gitfleet setting (did you mean GITFLEET_RETAIN_SCANS?)"},
		{"GITFLEET_VALIDATE_GITHB=off", "warning: GITFLEET_VALIDATE_GITHB is not a gitfleet setting (did you mean GITFLEET_VALIDATE_GITHUB?)"},
		{"GITFLEET_GITHUB_TOKEN=x", "warning: GITFLEET_GITHUB_TOKEN is not a gitfleet setting (did you mean GITHUB_TOKEN?)"},
		{"GITFLEET_PEER_TOKEN_FIEL=/run/x", "warning: GITFLEET_PEER_TOKEN_FIEL is not a gitfleet setting (did you mean GITFLEET_PEER_TOKEN_FILE?)"},
		{"GITFLEET_SCAN_BATCH=100", ""},
		{"GITFLEET_SCAN_BATCH=", ""},
		{"GITFLEET_VALIDATE_GITHUB=off", ""},
		{"GITFLEET_VALIDATE_ENDPOINT_SLACK=http://127.0.0.1:1", ""},
		{"GITFLEET_PEER_TOKEN_FILE=/run/secrets/peer", ""},
		{"GITFLEET_BENCH_REPOS=3", ""},
		{"GITFLEET_DOCS_UPDATE=1", ""},
		{"PATH=/usr/bin", ""},
		{"gitfleet_scan_batch=1", ""},
	} {
		got := Unknown([]string{tc.env})
		var want []string
		if tc.want != "" {
			want = []string{tc.want}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", tc.env, got, want)
		}
	}
	if got := Unknown([]string{"GITFLEET_B=1", "GITFLEET_SCAN_BATCH=1", "GITFLEET_A=1"}); len(got) != 2 {
		t.Errorf("two unknown among three: %q", got)
	}
}
