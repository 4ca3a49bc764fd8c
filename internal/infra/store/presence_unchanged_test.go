package store_test

import (
	"testing"

	"gitfleet/internal/infra/store"
)

// A finalize skips the presence write only when it would write what was
// written last: the same tips at the same commits, no finding since.
func TestPresenceBasisUnchanged(t *testing.T) {
	tips := map[string]string{"refs/heads/main": "c1", "refs/heads/b": "c2"}
	for _, tt := range []struct {
		name  string
		basis store.PresenceBasis
		tips  map[string]string
		want  bool
	}{
		{"same tips, no finding since", store.PresenceBasis{Tips: tips, UpTo: 7, Written: 7}, tips, true},
		{"no findings at all, written", store.PresenceBasis{Tips: tips, UpTo: 0, Written: 0}, tips, true},
		{"never written", store.PresenceBasis{Tips: map[string]string{}, UpTo: 0, Written: -1}, map[string]string{}, false},
		{"a finding since", store.PresenceBasis{Tips: tips, UpTo: 8, Written: 7}, tips, false},
		{"a tip moved", store.PresenceBasis{Tips: tips, UpTo: 7, Written: 7},
			map[string]string{"refs/heads/main": "c3", "refs/heads/b": "c2"}, false},
		{"a ref gone", store.PresenceBasis{Tips: tips, UpTo: 7, Written: 7}, map[string]string{"refs/heads/main": "c1"}, false},
		{"a ref new", store.PresenceBasis{Tips: tips, UpTo: 7, Written: 7},
			map[string]string{"refs/heads/main": "c1", "refs/heads/b": "c2", "refs/heads/c": "c2"}, false},
		{"a ref renamed", store.PresenceBasis{Tips: tips, UpTo: 7, Written: 7},
			map[string]string{"refs/heads/main": "c1", "refs/heads/x": "c2"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.basis.Unchanged(tt.tips); got != tt.want {
				t.Errorf("Unchanged = %t, want %t", got, tt.want)
			}
		})
	}
}
