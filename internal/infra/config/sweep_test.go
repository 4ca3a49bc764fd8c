package config

import (
	"testing"

	"gitfleet/workflows"
)

func TestSweepMaxRunning(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvSweepMaxRunning {
				return v
			}
			return ""
		}
	}
	// Unset: the workflows' own default, from the table.
	if c, err := Load(env("")); err != nil || c.SweepMaxRunning != workflows.DefaultMaxRunning {
		t.Fatalf("unset: %d, %v", c.SweepMaxRunning, err)
	}
	if c, err := Load(env("250")); err != nil || c.SweepMaxRunning != 250 {
		t.Fatalf("250: %d, %v", c.SweepMaxRunning, err)
	}
	for _, v := range []string{"0", "-3", "x"} {
		if _, err := Load(env(v)); err == nil {
			t.Errorf("%s accepted", v)
		}
	}
}

func TestSweepRanges(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
		ok   bool
	}{
		{"", 0, true}, {"auto", 0, true}, {"1", 1, true}, {"16", 16, true}, {"256", 256, true},
		{"0", 0, false}, {"257", 0, false}, {"-1", 0, false}, {"many", 0, false},
	} {
		got, err := Load(func(k string) string {
			if k == EnvSweepRanges {
				return c.v
			}
			return ""
		})
		if (err == nil) != c.ok || err == nil && got.SweepRanges != c.want {
			t.Errorf("%s=%q: %d, %v; want %d (accepted %v)", EnvSweepRanges, c.v, got.SweepRanges, err, c.want, c.ok)
		}
	}
}
