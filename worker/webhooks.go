package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/webhook"
	"gitfleet/workflows"
)

// serveWebhooks receives the GitHub App's webhook deliveries on
// cfg.Webhook.Addr ("" : not at all) until the returned stop. It runs in
// the worker, beside its Temporal client and database pool: any number of
// workers may receive (deliveries are idempotent by their id), behind
// whatever GitHub reaches.
func serveWebhooks(cfg config.Config, c client.Client, st *store.Store, log *zap.Logger) (stop func(), err error) {
	if cfg.Webhook.Addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.Webhook.Addr)
	if err != nil {
		return nil, fmt.Errorf("webhook address (%s): %w", config.EnvWebhookAddr, err)
	}
	rc := &webhook.Receiver{Secret: []byte(cfg.Webhook.Secret), Host: cfg.Hosts.Default(),
		Store: webhookStore{st}, Dispatcher: collections{c: c, host: cfg.Hosts.Default(), maxRunning: cfg.SweepMaxRunning}, Log: log.Named("webhook")}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", rc)
	// A delivery is answered within GitHub's 10 s or not at all.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 9 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = srv.Serve(ln) }()
	log.Info("receiving webhook deliveries", zap.String("webhookAddr", ln.Addr().String()), zap.String("path", "/webhook"))
	forgetting, forget := context.WithCancel(context.Background())
	go forgetDeliveries(forgetting, st, log)
	return func() { forget(); _ = srv.Close() }, nil
}

// keepDeliveries is how long a handled delivery's id is kept: GitHub
// redelivers for three days.
const keepDeliveries = 7 * 24 * time.Hour

// forgetDeliveries deletes the ids of deliveries older than
// keepDeliveries, hourly, until ctx ends.
func forgetDeliveries(ctx context.Context, st *store.Store, log *zap.Logger) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		if n, err := st.ForgetDeliveries(ctx, time.Now().Add(-keepDeliveries)); err != nil && ctx.Err() == nil {
			log.Warn("could not forget old webhook deliveries", zap.Error(err))
		} else if n > 0 {
			log.Info("forgot old webhook deliveries", zap.Int64("deliveries", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// collections hands a delivery's repository to its Collect run: signalled
// when one is in flight (it collects once more after it), started when
// none is, in one request Temporal makes durable before it answers.
type collections struct {
	c          client.Client
	host       string
	maxRunning int // an account's re-collection is bounded as the sweep is
}

func (d collections) Collect(ctx context.Context, repo repoid.ID, del webhook.Delivery) error {
	_, err := d.c.SignalWithStartWorkflow(ctx, workflows.CollectWorkflowID(repo), workflows.PushedSignal,
		workflows.Pushed{Delivery: del.GUID, Event: del.Event, After: del.After},
		workflows.CollectOptions(repo), workflows.Collect, workflows.CollectInput{Repo: repo, Trigger: workflows.TriggerPush})
	return err
}

// Recollect hands a delivery about a whole account to the account's
// re-collection, the same way.
func (d collections) Recollect(ctx context.Context, account string, del webhook.Delivery) error {
	opts := workflows.RecollectAccountOptions(d.host, account)
	_, err := d.c.SignalWithStartWorkflow(ctx, opts.ID, workflows.AccountChangedSignal,
		workflows.AccountChanged{Delivery: del.GUID, Event: del.Event, Action: del.Action}, opts,
		workflows.RecollectAccount, workflows.RecollectAccountInput{Host: d.host, Account: account, MaxRunning: d.maxRunning})
	return err
}

// webhookStore is what the receiver reads of the store.
type webhookStore struct{ *store.Store }

func (s webhookStore) Collected(ctx context.Context, host, externalID string) (bool, error) {
	cb, err := s.CodebaseByExternalID(ctx, host, externalID)
	return cb != nil, err
}
