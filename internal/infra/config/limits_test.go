package config

import (
	"testing"

	"gitfleet/internal/infra/gitread"
)

// The limits on what reading a repository may cost: sizes with units,
// refused below 1 MiB; unset, gitread's defaults (as the table declares them).
func TestLimits(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tt := range []struct {
		object, pack string
		want         gitread.Limits
		ok           bool
	}{
		{"", "", gitread.Limits{MaxObjectBytes: gitread.DefaultMaxObjectBytes, MaxPackBytes: gitread.DefaultMaxPackBytes}, true}, // the table's
		{"64MiB", "2GiB", gitread.Limits{MaxObjectBytes: 64 << 20, MaxPackBytes: 2 << 30}, true},
		{"1073741824", "1.5G", gitread.Limits{MaxObjectBytes: 1 << 30, MaxPackBytes: 3 << 29}, true},
		{"100", "", gitread.Limits{}, false},
		{"lots", "", gitread.Limits{}, false},
		{"", "8PiB", gitread.Limits{}, false},
		{"-1MiB", "", gitread.Limits{}, false},
	} {
		env := map[string]string{EnvMaxObjectBytes: tt.object, EnvMaxPackBytes: tt.pack}
		c, err := Load(func(k string) string { return env[k] })
		if (err == nil) != tt.ok || (err == nil && c.Limits != tt.want) {
			t.Errorf("%q, %q: %+v, %v; want %+v, ok %t", tt.object, tt.pack, c.Limits, err, tt.want, tt.ok)
		}
	}
}
