package workflows_test

import (
	"runtime"
	"testing"

	"gitfleet/internal/devstack/brokenrepo"
	"gitfleet/internal/domain/target"
)

// The hostile repositories of issue 20 (delta bombs, a delta cycle, a tree
// nested past git's limit, refs and packs that are links out of the
// repository, FIFOs), scanned the way `starter scan <path>` scans them:
// each ends Parked with the reason its case names, Complete with its
// unsafe refs ignored and counted, or — one crafted object of each kind
// beside two secrets (issue 31) — Done and Partial with the refused
// objects lost holes and both secrets found, each activity attempted once (the same
// data trips the same bound again: nothing is retried), and the worker
// allocates a bounded amount meanwhile (the nested bomb alone asks for
// 65 GiB).
func TestHostileRepositoriesEndCleanly(t *testing.T) {
	parent := t.TempDir()
	for _, c := range brokenrepo.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Build(parent)
			if err != nil {
				t.Fatal(err)
			}
			tg := normalized(t, target.Request{Location: dir})[0]
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res, run := scanToEnd(t, tg)
			runtime.ReadMemStats(&after)
			checkOutcome(t, c, res)
			checkAttempts(t, run)
			// The worker runs in this process: what it allocated for the
			// scan, with the rest of the process.
			if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
				t.Errorf("allocated %d MiB", n>>20)
			}
			if got := len(findings(t, tg.Key())); got != c.Findings {
				t.Errorf("%d findings, want %d (%s)", got, c.Findings, c.Broken)
			}
		})
	}
}
