package config

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		gogc string
		want int
	}{{"", WorkerGCPercent}, {"200", 100}, {"off", 100}} {
		debug.SetGCPercent(100)
		TuneGC(func(k string) string {
			if k == "GOGC" {
				return c.gogc
			}
			return ""
		})
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: GC percent %d, want %d", c.gogc, got, c.want)
		}
	}
}
