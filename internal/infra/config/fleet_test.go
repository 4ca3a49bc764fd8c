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
	if got, err := loadFleet(func(string) string { return "" }); err != nil || got.WorkerID == "" {
		t.Errorf("default worker id = %q, %v; want the host name", got.WorkerID, err)
	}
	for host, want := range map[string]string{"ip-10-0-0-1.ec2.internal": "ip-10-0-0-1.ec2.internal", "my host!": "my-host-", "": "worker"} {
		if got := workerIDFrom(host); got != want {
			t.Errorf("workerIDFrom(%q) = %q, want %q", host, got, want)
		}
	}
}
