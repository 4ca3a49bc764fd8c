package main

import (
	"fmt"
	"strings"
	"testing"

	"gitfleet/activities"
	"gitfleet/internal/infra/config"
)

// worker --help says what the settings table says: every setting a worker
// or a runner reads, with its help, its default and its file form. It once
// said the scan batch was 2,000 (the code: 8,000) and left five settings
// out; now it is written from the table (config.WriteHelp).
func TestUsageNamesEverySetting(t *testing.T) {
	var b strings.Builder
	usage(&b)
	help := strings.Join(strings.Fields(b.String()), " ")
	n := 0
	for _, s := range config.Settings() {
		if s.Readers&(config.Worker|config.Runner) == 0 {
			continue
		}
		n++
		if !strings.Contains(help, s.Name) {
			t.Errorf("worker --help does not name %s", s.Name)
		}
		if s.FileOf() != "" {
			continue // a secret's file form: named in its setting's entry
		}
		if !strings.Contains(help, s.HelpEntry()) {
			t.Errorf("worker --help lacks %q", s.HelpEntry())
		}
	}
	if n < 60 {
		t.Errorf("only %d settings for workers and runners", n)
	}
	batch, _ := config.Lookup(config.EnvScanBatch)
	if want := fmt.Sprintf("(default %d blobs)", activities.DefaultBatchBlobs); !strings.HasSuffix(batch.HelpEntry(), want) {
		t.Errorf("worker --help gives the scan batch as %q, want the code's default %s", batch.HelpEntry(), want)
	}
}
