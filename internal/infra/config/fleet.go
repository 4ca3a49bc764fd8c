package config

import (
	"fmt"
	"time"

	"gitfleet/internal/domain/placement"
)

// Many workers (architecture §2, "Repository affinity").
const (
	// EnvWorkerID names this worker: its row in the workers table and its
	// own task queue, gitfleet:git:<id>. Unset, the worker claims an id
	// stored in its mirror directory (mirror.ClaimWorkerID), so that it
	// stays with the mirrors across restarts.
	EnvWorkerID = "GITFLEET_WORKER_ID"
	// EnvWorkerOffline is how long a silent worker keeps its repositories.
	EnvWorkerOffline = "GITFLEET_WORKER_OFFLINE_AFTER"
	// EnvMirrorQuota bounds a worker's mirror directory.
	EnvMirrorQuota = "GITFLEET_MIRROR_QUOTA"
)

// Fleet is a worker's place among the others.
type Fleet struct {
	// WorkerID: "" when unset: the worker claims one in its mirror
	// directory (never the host name, which a recreated container changes).
	WorkerID string
	// WorkerOffline: default 1m.
	WorkerOffline time.Duration
	// MirrorQuota: bytes the mirrors may hold, the least recently used
	// evicted past it; 0, no bound.
	MirrorQuota int64
}

func loadFleet(getenv func(string) string) (Fleet, error) {
	f := Fleet{WorkerID: getenv(EnvWorkerID)}
	if f.WorkerID != "" {
		if err := placement.ValidWorkerID(f.WorkerID); err != nil {
			return f, fmt.Errorf("%s: %w", EnvWorkerID, err)
		}
	}
	if v := value(getenv, EnvWorkerOffline); v != "" {
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
