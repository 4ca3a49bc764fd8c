package store_test

import (
	"context"
	"testing"

	"gitfleet/internal/infra/store"
)

// A worker's pool is sized for its activity slots, unless DATABASE_URL
// sizes it itself.
func TestPoolIsSizedForTheSlots(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, url string
		want      int32
	}{
		{"sized by the worker", env.DatabaseURL, 34},
		{"sized by the URL", env.DatabaseURL + "&pool_max_conns=3", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := store.Open(ctx, tt.url, store.MaxConns(34))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if got := st.Pool().Config().MaxConns; got != tt.want {
				t.Fatalf("pool of %d connections, want %d", got, tt.want)
			}
		})
	}
}
