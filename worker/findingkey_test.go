package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/infra/config"
)

// A worker given no finding key does not start: it exits at once, before
// it connects to anything (its database here answers nobody), with an
// error that names the settings; a runner, which hashes nothing, needs
// none.
func TestWorkerRefusesToStartWithoutFindingKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, workerBin)
	cmd.Env = append(baseEnv(t, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"),
		config.EnvHashKey+"=", config.EnvHashKeyFile+"=") // later entries win: both unset
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker without a finding key: %v (context %v)\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{config.EnvHashKeyFile, config.EnvHashKey, "starter admin finding-key"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error does not name %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "database") && strings.Contains(string(out), "waiting") {
		t.Errorf("the worker waited for its database first:\n%s", out)
	}
}
