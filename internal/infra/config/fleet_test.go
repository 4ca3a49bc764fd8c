package config

import (
	"testing"
	"time"
)

func TestFleet(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    Fleet
		wantErr bool
	}{
		{env: map[string]string{EnvWorkerID: "w-1"}, want: Fleet{WorkerID: "w-1", WorkerOffline: time.Minute}},
		{env: map[string]string{EnvWorkerID: "w-1", EnvWorkerOffline: "30s", EnvMirrorQuota: "500GiB"},
			want: Fleet{WorkerID: "w-1", WorkerOffline: 30 * time.Second, MirrorQuota: 500 << 30}},
		{env: map[string]string{EnvWorkerID: "w 1"}, wantErr: true},
		{env: map[string]string{EnvWorkerID: "w-1", EnvWorkerOffline: "1s"}, wantErr: true},
		{env: map[string]string{EnvWorkerID: "w-1", EnvMirrorQuota: "lots"}, wantErr: true},
	} {
		got, err := loadFleet(func(k string) string { return tc.env[k] })
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%v: %+v, %v; want %+v (error %t)", tc.env, got, err, tc.want, tc.wantErr)
		}
	}
	// Unset: none here; the worker claims one in its mirror directory.
	if got, err := loadFleet(func(string) string { return "" }); err != nil || got.WorkerID != "" {
		t.Errorf("default worker id = %q, %v; want none (claimed beside the mirrors)", got.WorkerID, err)
	}
}
