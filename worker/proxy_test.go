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

// A worker told GITFLEET_ALLOWED_HOSTS=* while a proxy carries its
// requests does not start (exit 1, before it connects to anything), naming
// both settings: through the proxy it could not refuse internal names,
// which "*" promises. (Before, it started, and a scan of
// http://jenkins.corp/x.git went to the proxy.)
func TestWorkerRefusesAnyHostThroughAProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, workerBin)
	cmd.Env = append(baseEnv(t, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"),
		config.EnvAllowedHosts+"=*", "HTTPS_PROXY=http://proxy.corp.example:3128", "https_proxy=", "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker with * through a proxy: %v (context %v)\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{config.EnvAllowedHosts + "=*", "HTTPS_PROXY", "NO_PROXY"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error does not name %q:\n%s", want, out)
		}
	}
}
