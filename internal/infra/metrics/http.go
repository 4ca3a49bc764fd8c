package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Check is a readiness check: nil when the dependency answers.
type Check struct {
	Name  string
	Check func(context.Context) error
}

// Handler serves /metrics (gitfleet's counters and, if sdk is not nil, the
// Temporal SDK's metrics), /livez (200 while the process serves) and
// /readyz (200 when every check passes within timeout, else 503 naming the
// failing checks; their errors go to failed, if not nil, never to the
// response).
func Handler(sdk *SDK, checks []Check, timeout time.Duration, failed func(name string, err error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var b strings.Builder
		if err := WriteText(&b); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if sdk != nil {
			if err := sdk.WriteText(&b); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte(b.String()))
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		errs := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, c := range checks {
			wg.Go(func() { errs[i] = c.Check(ctx) })
		}
		wg.Wait()
		var bad []string
		for i, err := range errs {
			if err != nil {
				bad = append(bad, checks[i].Name)
				if failed != nil {
					failed(checks[i].Name, err)
				}
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(bad) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %s\n", strings.Join(bad, ", "))
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	return mux
}
