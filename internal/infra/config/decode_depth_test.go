package config

import (
	"testing"

	"gitfleet/internal/domain/scan"
)

func TestScanDecodeDepth(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvScanDecodeDepth {
				return v
			}
			return ""
		}
	}
	c, err := Load(env(""))
	if err != nil || c.ScanDecodeDepth == nil || *c.ScanDecodeDepth != scan.DefaultDecodeDepth { // the scanner's own, from the table
		t.Fatalf("unset: %v, %v", c.ScanDecodeDepth, err)
	}
	for _, v := range []string{"0", "3"} {
		c, err := Load(env(v))
		if err != nil || c.ScanDecodeDepth == nil || *c.ScanDecodeDepth != int(v[0]-'0') {
			t.Errorf("%s: %v, %v", v, c.ScanDecodeDepth, err)
		}
	}
	for _, v := range []string{"-1", "x", "101"} {
		if _, err := Load(env(v)); err == nil {
			t.Errorf("%s accepted", v)
		}
	}
}
