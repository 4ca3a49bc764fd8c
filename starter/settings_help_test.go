package main

import (
	"strings"
	"testing"

	"gitfleet/internal/infra/config"
)

// starter --help gives every setting the starter reads as the settings
// table declares it: its help, its default and its file form (it listed
// seven, by hand, without the file forms or most defaults).
func TestHelpGivesTheSettings(t *testing.T) {
	out, _, code := starter(t, "--help")
	if code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	help := strings.Join(strings.Fields(out), " ")
	n := 0
	for _, s := range config.Settings() {
		if s.Readers&config.Starter == 0 {
			if s.FileOf() == "" && strings.Contains(help, s.Name+" ") {
				t.Errorf("starter --help names %s, which the starter does not read", s.Name)
			}
			continue
		}
		n++
		want := s.HelpEntry()
		if s.FileOf() != "" {
			want = s.Name
		}
		if !strings.Contains(help, want) {
			t.Errorf("starter --help lacks %q", want)
		}
	}
	if n < 30 {
		t.Errorf("only %d settings for the starter", n)
	}
}
