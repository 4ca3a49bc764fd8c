package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/infra/config"
)

// A runner's peer port serves what it pulled with its registry
// credentials: reachable from other hosts, the runner does not start
// without the fleet's token; with it, the port refuses requests that do
// not carry it, and the token shows in no log line. Before, the port was
// open to anyone who reached it.
func TestRunnerPeerPortNeedsTheToken(t *testing.T) {
	t.Parallel()
	const token = "peer-token-sentinel-0a9c3e1f"
	forget := func(id string) {
		t.Cleanup(func() { _, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM runners WHERE id = $1`, id) })
	}
	t.Run("reachable from other hosts, no token", func(t *testing.T) {
		forget("peer-open")
		w := startWorkerWith(t, []string{"--runner-id", "peer-open", "--store", t.TempDir(), "--peer-addr", "0.0.0.0:0"})
		select {
		case <-w.p.Done():
		case <-time.After(2 * time.Minute):
			t.Fatal("the runner runs with its peer port open to other hosts")
		}
		var exit *exec.ExitError
		if !errors.As(w.p.Err(), &exit) || exit.ExitCode() != 1 {
			t.Fatalf("runner exit: %v, want status 1", w.p.Err())
		}
		w.waitLine(t, "is reachable from other hosts: set GITFLEET_PEER_TOKEN")
	})
	t.Run("with the token", func(t *testing.T) {
		forget("peer-guarded")
		w := startWorkerWith(t, []string{"--runner-id", "peer-guarded", "--store", t.TempDir(), "--peer-addr", "127.0.0.1:0"},
			config.EnvPeerToken+"="+token)
		var l struct {
			Addr  string `json:"peerAddr"`
			Token bool   `json:"peerToken"`
		}
		if err := json.Unmarshal([]byte(w.waitLine(t, "runner starting")), &l); err != nil || l.Addr == "" || !l.Token {
			t.Fatalf("runner starting: %+v, %v", l, err)
		}
		for _, tc := range []struct {
			name   string
			auth   func(*http.Request)
			status int
		}{
			{"without the token", func(*http.Request) {}, http.StatusUnauthorized},
			{"with another", func(r *http.Request) { r.SetBasicAuth("runner", "not-the-token-at-all") }, http.StatusUnauthorized},
			{"with the token", func(r *http.Request) { r.SetBasicAuth("runner", token) }, http.StatusOK},
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+l.Addr+"/v2/", nil)
			tc.auth(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s: HTTP %d, want %d", tc.name, resp.StatusCode, tc.status)
			}
		}
		if strings.Contains(w.output(), token) {
			t.Errorf("the runner logged its peer token:\n%s", w.output())
		}
	})
}
