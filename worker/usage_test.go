package main

import (
	"fmt"
	"strings"
	"testing"

	"gitfleet/activities"
	"gitfleet/internal/infra/config"
)

// worker --help names every setting Load reads and states the defaults the
// code uses: it once said the scan batch was 2,000 (the code: 8,000) and left
// five settings out.
func TestUsageNamesEverySetting(t *testing.T) {
	var b strings.Builder
	usage(&b)
	help := b.String()
	for _, v := range config.Vars() {
		// The Temporal SDK's own client variables are named as a family.
		if strings.HasPrefix(v, "TEMPORAL_") && v != config.EnvTemporalAddress && v != config.EnvTemporalNamespace {
			continue
		}
		if !strings.Contains(help, v) {
			t.Errorf("worker --help does not name %s", v)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("GITFLEET_SCAN_BATCH  blobs per durable write of a scan (default %d)", activities.DefaultBatchBlobs),
	} {
		if !strings.Contains(help, want) {
			t.Errorf("worker --help lacks %q", want)
		}
	}
}
