package store_test

import (
	"context"
	"testing"
	"time"
)

// A delivery is handled once recorded, recorded twice harmlessly, and
// forgotten with the old ones.
func TestWebhookDeliveries(t *testing.T) {
	ctx := context.Background()
	const guid = "0b4a8e80-0000-11f0-8000-webhooks-test"
	if handled, err := env.Store.DeliveryHandled(ctx, guid); err != nil || handled {
		t.Fatalf("before: handled %t, %v", handled, err)
	}
	for range 2 {
		if err := env.Store.RecordDelivery(ctx, guid, "push"); err != nil {
			t.Fatal(err)
		}
	}
	if handled, err := env.Store.DeliveryHandled(ctx, guid); err != nil || !handled {
		t.Fatalf("recorded: handled %t, %v", handled, err)
	}
	if n, err := env.Store.ForgetDeliveries(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("forgetting older than an hour: %d, %v", n, err)
	}
	if n, err := env.Store.ForgetDeliveries(ctx, time.Now().Add(time.Minute)); err != nil || n < 1 {
		t.Fatalf("forgetting older than now: %d, %v", n, err)
	}
	if handled, _ := env.Store.DeliveryHandled(ctx, guid); handled {
		t.Fatal("a forgotten delivery is still handled")
	}
}
