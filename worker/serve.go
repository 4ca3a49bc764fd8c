package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/logging"
	"gitfleet/internal/infra/metrics"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// dial connects to Temporal with the SDK's environment configuration
// (address, namespace, API key, TLS and mTLS; see config.TemporalEnvVars),
// reporting the SDK's metrics to sdk, with dialOpts on its connection.
func dial(ctx context.Context, cfg config.Config, log *zap.Logger, sdk *metrics.SDK, dialOpts ...grpc.DialOption) (client.Client, error) {
	opts, err := cfg.TemporalOptions()
	if err != nil {
		return nil, err
	}
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, dialOpts...)
	opts.Logger = logging.Temporal(log.Named("temporal"))
	opts.MetricsHandler = sdk.Handler()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// serveMetrics serves /metrics, /livez and /readyz on addr ("" : not at
// all) until the returned stop; ready when Temporal and PostgreSQL answer.
func serveMetrics(addr string, sdk *metrics.SDK, c client.Client, st *store.Store, log *zap.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address (%s or --metrics-addr): %w", config.EnvMetricsAddr, err)
	}
	checks := []metrics.Check{
		{Name: "temporal", Check: func(ctx context.Context) error {
			_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}},
		{Name: "postgresql", Check: func(ctx context.Context) error { return st.Pool().Ping(ctx) }},
		{Name: "schema", Check: schemaCurrent(st)},
	}
	h := metrics.Handler(sdk, checks, 5*time.Second, func(name string, err error) {
		log.Debug("not ready", zap.String("check", name), zap.Error(err))
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics and health listening", zap.String("metricsAddr", ln.Addr().String()))
	return func() { _ = srv.Close() }, nil
}

// checkSearchAttributes fails when the namespace lacks any of gitfleet's
// search attributes, naming them; `starter setup` registers them. (Workers
// do not register them: on Temporal Cloud, only the account can.) When
// they cannot be listed (no permission), it warns and goes on.
func checkSearchAttributes(ctx context.Context, c client.Client, namespace string, log *zap.Logger) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		var denied *serviceerror.PermissionDenied
		var unimpl *serviceerror.Unimplemented
		if errors.As(err, &denied) || errors.As(err, &unimpl) {
			log.Warn("search attributes not checked: cannot list them", zap.Error(err))
			return nil
		}
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	for name, typ := range workflows.SearchAttributes {
		if got, ok := have.GetCustomAttributes()[name]; !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", name, typeName(typ)))
		} else if got != typ {
			missing = append(missing, fmt.Sprintf("%s (%s, registered as %s)", name, typeName(typ), typeName(got)))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("namespace %s lacks search attributes %s: register them with 'starter setup' "+
		"(or 'temporal operator search-attribute create'; on Temporal Cloud, tcld or the Cloud UI)",
		namespace, strings.Join(missing, ", "))
}

func typeName(t enumspb.IndexedValueType) string {
	return strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
}

// schemaCurrent is ready once every migration this binary carries is
// applied; then it stays so without asking again (a schema never goes
// back).
func schemaCurrent(st *store.Store) func(context.Context) error {
	var current atomic.Bool
	return func(ctx context.Context) error {
		if current.Load() {
			return nil
		}
		s, err := st.Schema(ctx)
		if err != nil {
			return err
		}
		if !s.Current() {
			return fmt.Errorf("migrations %v not applied: run 'starter migrate'", s.Pending)
		}
		current.Store(true)
		return nil
	}
}

// waitForSchema waits until `starter migrate` has applied every migration
// this binary carries, saying what it waits for.
func waitForSchema(ctx context.Context, st *store.Store, log *zap.Logger) error {
	err := st.WaitForSchema(ctx, 2*time.Second, func(s store.SchemaStatus, err error) {
		if err != nil {
			log.Warn("cannot read the database's schema version; trying again", zap.Error(err))
			return
		}
		log.Info(fmt.Sprintf("waiting for the database schema: migrations %v are not applied (the database is at version %d, "+
			"this binary needs %d); run 'starter migrate' (the compose job gitfleet-migrate does)", s.Pending, s.Version, s.Want),
			zap.Int64("schemaVersion", s.Version), zap.Int64("schemaWanted", s.Want))
	})
	if err != nil {
		return fmt.Errorf("waiting for the database schema: %w", err)
	}
	return nil
}
