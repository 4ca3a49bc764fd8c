package workflows_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gitfleet/internal/domain/identity"
)

// benchRepo creates a repository with some history, so a first collection
// has a real pack to fetch.
func benchRepo(b *testing.B, commits int) (owner string) {
	b.Helper()
	owner = fmt.Sprintf("bench%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := fg.CreateRepo(owner, "app"); err != nil {
		b.Fatal(err)
	}
	for i := range commits {
		files := map[string]string{}
		for j := range 5 {
			files[fmt.Sprintf("dir%d/file%d.txt", j, i)] = fmt.Sprintf("commit %d file %d\n%s", i, j, bigText(i*5+j))
		}
		if _, err := fg.Commit(owner, "app", "main", files, fmt.Sprintf("commit %d", i)); err != nil {
			b.Fatal(err)
		}
	}
	return owner
}

func bigText(seed int) string {
	buf := make([]byte, 0, 4096)
	for i := 0; len(buf) < 4000; i++ {
		buf = fmt.Appendf(buf, "line %d of blob %d\n", i, seed)
	}
	return string(buf)
}

// BenchmarkCollect measures, for one repository of 50 commits and 250
// files, a first collection against a re-collection of the unchanged
// repository (API requests and wall time of each), then the median
// end-to-end latency of Collect over 20 re-collections on the dev server.
func BenchmarkCollect(b *testing.B) {
	owner := benchRepo(b, 50)
	t := &testing.T{}
	measure := func(want identity.Case) (time.Duration, int) {
		before := apiRequestsFor(owner)
		start := time.Now()
		res, err := collect(t, id(owner, "app"))
		took := time.Since(start)
		if err != nil || res.Case != want {
			b.Fatalf("collect: %+v, %v; want case %s", res, err, want)
		}
		return took, apiRequestsFor(owner) - before
	}
	firstTook, firstAPI := measure(identity.CaseNew)
	againTook, againAPI := measure(identity.CaseSame)

	const runs = 20
	lat := make([]time.Duration, runs)
	for i := range lat {
		lat[i], _ = measure(identity.CaseSame)
	}
	slices.Sort(lat)
	median := (lat[runs/2-1] + lat[runs/2]) / 2

	b.ReportMetric(float64(firstAPI), "first-api-requests")
	b.ReportMetric(float64(againAPI), "recollect-api-requests")
	b.ReportMetric(float64(firstTook.Milliseconds()), "first-ms")
	b.ReportMetric(float64(againTook.Milliseconds()), "recollect-ms")
	b.ReportMetric(float64(median.Microseconds())/1000, "median-ms")
	fmt.Printf("\nCollect, one repository (50 commits, 250 files)\n")
	fmt.Printf("  %-28s %8s %12s\n", "", "wall", "API requests")
	fmt.Printf("  %-28s %8s %12d\n", "first collection (case A)", firstTook.Round(time.Millisecond), firstAPI)
	fmt.Printf("  %-28s %8s %12d\n", "re-collection (case B)", againTook.Round(time.Millisecond), againAPI)
	fmt.Printf("  Collect end to end, %d runs: median %s, min %s, max %s\n\n", runs,
		median.Round(time.Millisecond), lat[0].Round(time.Millisecond), lat[runs-1].Round(time.Millisecond))
}
