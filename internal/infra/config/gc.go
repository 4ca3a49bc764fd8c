package config

import "runtime/debug"

// WorkerGCPercent is the garbage collector's target a worker runs with
// unless GOGC says otherwise: the heap may grow by half its live size
// between collections, not by all of it. A scan's live heap is mostly
// caches (delta bases, trees, compiled rules) that stay live, so Go's
// default doubles the peak for them; at 50, a full scan of the real-code
// corpus peaks at 171 MB instead of 213 MB for 0.1 s more CPU time out
// of 5.6 s (make bench).
const WorkerGCPercent = 50

// TuneGC applies WorkerGCPercent when the environment sets no GOGC.
func TuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(WorkerGCPercent)
	}
}
