package vcs

import (
	"strings"
	"testing"
)

// The credentials' settings reach the host; an App id that is not a
// positive number is refused at start.
func TestHostsFromEnvReadsCredentialSettings(t *testing.T) {
	env := map[string]string{EnvAppID: "12", EnvAppKeyFile: "/run/secrets/app.pem", EnvTokensFile: "/etc/gitfleet/tokens"}
	hs, err := HostsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	h, _ := hs.Lookup("github.com")
	if h.AppID != 12 || h.AppKeyFile != "/run/secrets/app.pem" || h.TokensFile != "/etc/gitfleet/tokens" {
		t.Fatalf("host %+v", h)
	}
	for _, bad := range []string{"abc", "0", "-3"} {
		env[EnvAppID] = bad
		if _, err := HostsFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), EnvAppID) {
			t.Errorf("%s=%q: %v, want refused", EnvAppID, bad, err)
		}
	}
}
