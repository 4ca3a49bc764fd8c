package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/domain/notify"
)

// GITFLEET_NOTIFY_URL is read from the environment or its file, its
// errors never show a URL, and the rate bound defaults as documented.
func TestLoadNotify(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notify-url")
	if err := os.WriteFile(file, []byte("https://hooks.slack.com/services/T0/B0/fileToken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		env       map[string]string
		targets   []notify.Target
		perMinute int
		wantErr   string
	}{
		{"unset: no alerts", nil, nil, notify.DefaultPerMinute, ""},
		{"from the environment", map[string]string{EnvNotifyURL: "https://a.example/h,slack+https://b.example/s"},
			[]notify.Target{{URL: "https://a.example/h", Format: notify.FormatJSON}, {URL: "https://b.example/s", Format: notify.FormatSlack}},
			notify.DefaultPerMinute, ""},
		{"from its file", map[string]string{FileVar(EnvNotifyURL): file, EnvNotifyPerMinute: "5"},
			[]notify.Target{{URL: "https://hooks.slack.com/services/T0/B0/fileToken", Format: notify.FormatSlack}}, 5, ""},
		{"both", map[string]string{FileVar(EnvNotifyURL): file, EnvNotifyURL: "https://a.example/h"}, nil, 0, "both set"},
		{"not a URL", map[string]string{EnvNotifyURL: "ftp://user:hunter2@a.example/"}, nil, 0, "URL 1 is not an http(s) URL"},
		{"a bad bound", map[string]string{EnvNotifyURL: "https://a.example/h", EnvNotifyPerMinute: "0"}, nil, 0, EnvNotifyPerMinute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			c, err := Load(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %v, want %q and no URL", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Notify.Targets) != len(tt.targets) || c.Notify.PerMinute != tt.perMinute {
				t.Fatalf("%+v, want %+v and %d a minute", c.Notify, tt.targets, tt.perMinute)
			}
			for i := range tt.targets {
				if c.Notify.Targets[i] != tt.targets[i] {
					t.Errorf("target %d: %+v, want %+v", i, c.Notify.Targets[i], tt.targets[i])
				}
			}
		})
	}
}
