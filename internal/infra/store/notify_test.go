package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/domain/notify"
	"gitfleet/internal/infra/store"
)

// The rate bound holds across the fleet: workers racing for one
// receiver's slots (here, forty at once from four stores of their own) get
// exactly the bound's, and the rest are told to wait at most a window;
// another receiver's slots are its own.
func TestReserveSendBoundsEveryWorkerTogether(t *testing.T) {
	ctx := context.Background()
	receiver := fmt.Sprintf("test-%d", time.Now().UnixNano())
	const perMinute, racing = 5, 40
	// Each its own worker: a store of its own, connections of its own.
	workers := make([]*store.Store, 4)
	for i := range workers {
		st, err := store.Open(ctx, env.DatabaseURL, store.MaxConns(racing/len(workers)))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		workers[i] = st
	}
	start := make(chan struct{})
	var mu sync.Mutex
	var sent, waiting int
	var wg sync.WaitGroup
	for i := range racing {
		wg.Go(func() {
			<-start
			wait, err := workers[i%len(workers)].ReserveSend(ctx, receiver, perMinute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case wait == 0:
				sent++
			case wait > notify.Window:
				t.Errorf("told to wait %v, more than the window", wait)
			default:
				waiting++
			}
		})
	}
	close(start)
	wg.Wait()
	if sent != perMinute || waiting != racing-perMinute {
		t.Errorf("%d sent and %d told to wait, want %d and %d", sent, waiting, perMinute, racing-perMinute)
	}
	if wait, err := env.Store.ReserveSend(ctx, receiver+"-other", perMinute); err != nil || wait != 0 {
		t.Errorf("another receiver: wait %v, %v", wait, err)
	}
}

// A message is written once per id, and claims each secret for its
// receiver and kind once: a second message finds nothing to claim, a
// retry of the first finds it as written, and a refused message releases
// its secrets.
func TestClaimNotificationClaimsEachSecretOnce(t *testing.T) {
	ctx := context.Background()
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	receiver, fps := "r-"+tag, []string{"a-" + tag, "b-" + tag}
	build := func(won map[string]bool) ([]byte, int, error) {
		return []byte(`{"n":` + fmt.Sprint(len(won)) + `}`), len(won), nil
	}
	first, err := env.Store.ClaimNotification(ctx, "m1-"+tag, receiver, notify.KindNew, 1, fps, build)
	if err != nil || first == nil || first.Alerts != 2 || string(first.Body) != `{"n":2}` {
		t.Fatalf("first: %+v, %v", first, err)
	}
	if again, err := env.Store.ClaimNotification(ctx, "m1-"+tag, receiver, notify.KindNew, 1, fps, build); err != nil || again == nil ||
		again.Alerts != 2 {
		t.Fatalf("a retry: %+v, %v", again, err)
	}
	if second, err := env.Store.ClaimNotification(ctx, "m2-"+tag, receiver, notify.KindNew, 1, append(fps, "c-"+tag), build); err != nil ||
		second == nil || second.Alerts != 1 {
		t.Fatalf("a second message with one new secret: %+v, %v", second, err)
	}
	if none, err := env.Store.ClaimNotification(ctx, "m3-"+tag, receiver, notify.KindNew, 1, fps, build); err != nil || none != nil {
		t.Fatalf("nothing left to claim: %+v, %v", none, err)
	}
	if valid, err := env.Store.ClaimNotification(ctx, "m4-"+tag, receiver, notify.KindValid, 1, fps, build); err != nil || valid == nil {
		t.Fatalf("another kind: %+v, %v", valid, err)
	}
	if err := env.Store.MessageAttempted(ctx, "m1-"+tag, "refused"); err != nil {
		t.Fatal(err)
	}
	if released, err := env.Store.ClaimNotification(ctx, "m5-"+tag, receiver, notify.KindNew, 1, fps, build); err != nil || released == nil ||
		released.Alerts != 2 {
		t.Fatalf("after a refusal: %+v, %v", released, err)
	}
}
