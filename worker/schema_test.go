package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/infra/config"
)

// A worker never migrates: on a database without gitfleet's schema it
// says what it waits for, is alive (/livez) but not ready (/readyz), and
// starts once `starter migrate` has run.
func TestWorkerWaitsForTheSchema(t *testing.T) {
	if _, err := env.Store.Pool().Exec(context.Background(), `CREATE DATABASE w_schema`); err != nil {
		t.Fatal(err)
	}
	url := env.PG.URL("w_schema")
	w := startWorker(t, config.EnvDatabaseURL+"="+url)
	if line := w.waitLine(t, "waiting for the database schema"); !strings.Contains(line, "run 'starter migrate'") {
		t.Errorf("the waiting line does not say what to do: %s", line)
	}
	base := w.metricsURL(t)
	if code, body, err := get(base + "/livez"); err != nil || code != 200 {
		t.Fatalf("/livez while waiting: %d %q %v", code, body, err)
	}
	if code, body, err := get(base + "/readyz"); err != nil || code != 503 || !strings.Contains(body, "schema") {
		t.Fatalf("/readyz while waiting: %d %q %v; want 503 naming the schema", code, body, err)
	}

	migrate := exec.Command(starterBin, "migrate")
	migrate.Env = baseEnv(t, url)
	if out, err := migrate.CombinedOutput(); err != nil || !strings.Contains(string(out), "schema is at version") {
		t.Fatalf("starter migrate: %v\n%s", err, out)
	}
	w.waitLine(t, "Started Worker")
	poll.Until(t, "/readyz 200", 2*time.Minute, func() (bool, string) {
		code, body, err := get(base + "/readyz")
		return err == nil && code == 200, fmt.Sprint(code, body, err)
	})
	if out := w.output(); strings.Contains(out, "migration applied") {
		t.Errorf("the worker migrated:\n%s", out)
	}
}
