package config

import (
	"fmt"
	"strings"

	"gitfleet/internal/domain/snapshot"
)

// Runners' settings (architecture §7, §11): where snapshots may come from,
// and the peer port's shared token (a secret: GITFLEET_PEER_TOKEN_FILE may
// name a file that holds it, SecretFileVars).
const (
	EnvSnapshotSources = snapshot.SettingSources
	EnvPeerToken       = "GITFLEET_PEER_TOKEN"
)

// minPeerToken is the shortest peer token taken: anyone who reaches the
// port may guess at it.
const minPeerToken = 16

// loadRunnerSettings reads the snapshot sources (GITFLEET_REGISTRY's host
// and the listed registries) and the peer token. Errors never hold the
// token.
func loadRunnerSettings(c *Config, getenv func(string) string) error {
	src, err := snapshot.ParseSources(c.Registry, getenv(EnvSnapshotSources))
	if err != nil {
		return err
	}
	c.SnapshotSources = src
	tok := getenv(EnvPeerToken)
	if tok != "" && (len(tok) < minPeerToken || strings.ContainsAny(tok, " \t\r\n")) {
		return fmt.Errorf("the peer token (%s or %s) must be at least %d characters without spaces, e.g. openssl rand -hex 24",
			EnvPeerToken, FileVar(EnvPeerToken), minPeerToken)
	}
	c.PeerToken = tok
	return nil
}
