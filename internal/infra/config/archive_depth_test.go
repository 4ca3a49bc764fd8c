package config

import (
	"testing"

	"gitfleet/internal/domain/scan"
)

func TestScanArchiveDepth(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvScanArchiveDepth {
				return v
			}
			return ""
		}
	}
	c, err := Load(env(""))
	if err != nil || c.ScanArchiveDepth == nil || *c.ScanArchiveDepth != scan.DefaultArchiveDepth { // the scanner's own, from the table
		t.Fatalf("unset: %v, %v", c.ScanArchiveDepth, err)
	}
	for v, want := range map[string]int{"0": 0, "3": 3, "100": 100} {
		c, err := Load(env(v))
		if err != nil || c.ScanArchiveDepth == nil || *c.ScanArchiveDepth != want {
			t.Errorf("%s: %v, %v", v, c.ScanArchiveDepth, err)
		}
	}
	for _, v := range []string{"-1", "x", "101"} {
		if _, err := Load(env(v)); err == nil {
			t.Errorf("%s accepted", v)
		}
	}
}
