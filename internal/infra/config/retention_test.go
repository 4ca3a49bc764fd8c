package config

import (
	"testing"
	"time"
)

func TestRetention(t *testing.T) {
	c, err := Load(func(string) string { return "" })
	if err != nil || c.Retain != DefaultRetention {
		t.Fatalf("unset: %+v, %v; want %+v", c.Retain, err, DefaultRetention)
	}
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"180d", 180 * 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"0", 0, true},
		{"forever", 0, true},
		{"30m", 0, false},
		{"-1d", 0, false},
		{"1.5d", 0, false},
		{"soon", 0, false},
	} {
		for _, env := range []string{EnvRetainCollections, EnvRetainReceipts, EnvRetainOldScopes, EnvRetainScans} {
			c, err := Load(func(k string) string {
				if k == env {
					return tc.v
				}
				return ""
			})
			if !tc.ok {
				if err == nil {
					t.Errorf("%s=%s accepted", env, tc.v)
				}
				continue
			}
			got := map[string]time.Duration{EnvRetainCollections: c.Retain.Collections, EnvRetainReceipts: c.Retain.Receipts,
				EnvRetainOldScopes: c.Retain.OldScopes, EnvRetainScans: c.Retain.Scans}[env]
			if err != nil || got != tc.want {
				t.Errorf("%s=%s: %v, %v; want %v", env, tc.v, got, err, tc.want)
			}
		}
	}
}
