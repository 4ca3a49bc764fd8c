package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"gitfleet/internal/domain/placement"
)

// Many workers (architecture §2, "Repository affinity").
const (
	// EnvWorkerID names this worker: its row in the workers table and its
	// own task queue, gitfleet:git:<id>. Keep it with the mirror directory
	// across restarts: the mirrors it holds are found again under it.
	EnvWorkerID = "GITFLEET_WORKER_ID"
	// EnvWorkerOffline is how long a silent worker keeps its repositories.
	EnvWorkerOffline = "GITFLEET_WORKER_OFFLINE_AFTER"
	// EnvMirrorQuota bounds a worker's mirror directory.
	EnvMirrorQuota = "GITFLEET_MIRROR_QUOTA"
)

// Fleet is a worker's place among the others.
type Fleet struct {
	// WorkerID: default the host name, with what a worker id cannot hold
	// replaced by '-'.
	WorkerID string
	// WorkerOffline: default 1m.
	WorkerOffline time.Duration
	// MirrorQuota: bytes the mirrors may hold, the least recently used
	// evicted past it; 0, no bound.
	MirrorQuota int64
}

func loadFleet(getenv func(string) string) (Fleet, error) {
	f := Fleet{WorkerID: getenv(EnvWorkerID), WorkerOffline: time.Minute}
	if f.WorkerID == "" {
		host, _ := os.Hostname()
		f.WorkerID = workerIDFrom(host)
	}
	if err := placement.ValidWorkerID(f.WorkerID); err != nil {
		return f, fmt.Errorf("%s: %w", EnvWorkerID, err)
	}
	if v := getenv(EnvWorkerOffline); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			return f, fmt.Errorf("%s=%q: want a duration of at least 10s", EnvWorkerOffline, v)
		}
		f.WorkerOffline = d
	}
	if v := getenv(EnvMirrorQuota); v != "" {
		n, err := ParseBytes(v)
		if err != nil || n < 1<<20 {
			return f, fmt.Errorf("%s=%q: want a size of at least 1MiB, e.g. 500GiB", EnvMirrorQuota, v)
		}
		f.MirrorQuota = n
	}
	return f, nil
}

// workerIDFrom makes a worker id of a host name.
func workerIDFrom(host string) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	if len(id) > 64 {
		id = id[:64]
	}
	if id == "" {
		id = "worker"
	}
	return id
}
