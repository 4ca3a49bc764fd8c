package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitfleet/internal/domain/validity"
	"gitfleet/internal/infra/store"
)

// BenchmarkValidationCandidates pages through a fleet's secrets as the
// secret-revalidation schedule does (500 a page, the rules some validator
// takes), on the fleet BenchmarkFleetFindings seeds: 25,000 repositories
// (GITFLEET_BENCH_REPOS), 4 secrets each, 100,000 in all, of which those
// of github-pat, aws-access-token, slack-bot-token and stripe-access-token
// are candidates. It prints the pages, the slowest page and the whole
// pass, then the validity summary of the fleet.
func BenchmarkValidationCandidates(b *testing.B) {
	repos := benchRepos(b, 25_000)
	ctx := context.Background()
	for i := range b.N {
		b.StopTimer()
		st := cleanupDB(b, fmt.Sprintf("bench_validity_%d_%d", time.Now().UnixNano(), i))
		seedFleet(b, st, repos)
		secrets := sqlCount(b, st, `SELECT count(*) FROM secrets`)
		b.StartTimer()
		f := store.ValidationFilter{Rules: validity.Rules(nil)}
		var scope, finding int64
		pages, total := 0, 0
		slowest := time.Duration(0)
		start := time.Now()
		for {
			t := time.Now()
			cs, err := st.ValidationCandidates(ctx, f, scope, finding, 500)
			if err != nil {
				b.Fatal(err)
			}
			slowest = max(slowest, time.Since(t))
			pages++
			total += len(cs)
			if len(cs) < 500 {
				break
			}
			scope, finding = cs[len(cs)-1].ScopeID, cs[len(cs)-1].FindingID
		}
		pass := time.Since(start)
		t := time.Now()
		sum, err := st.SummarizeValidity(ctx, store.FleetFilter{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fmt.Printf("\nVALIDITY_CANDIDATES: %d secrets in %d repositories: %d candidates in %d pages of 500, %s in all, slowest page %s; validity summary of the fleet %s (%d unchecked)\n",
			secrets, repos, total, pages, pass.Round(time.Millisecond), slowest.Round(100*time.Microsecond), time.Since(t).Round(time.Millisecond), sum.Unchecked)
		b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-page-ms")
		b.StartTimer()
	}
}
