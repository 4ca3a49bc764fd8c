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
