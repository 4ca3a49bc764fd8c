// Package validate sends the validity checks of package validity: to each
// provider's fixed https endpoint only, never following a redirect to
// another origin, within per-provider limits (requests in flight and per
// minute), honouring Retry-After, retrying 5xx and timeouts with backoff.
// Off unless the operator turns it on (GITFLEET_VALIDATE=on): off, a
// Checker sends nothing.
package validate

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gitfleet/internal/domain/validity"
)

// Settings, read from the environment by FromEnv.
const (
	// EnvValidate turns validity checks on ("on"); anything else, or
	// unset, leaves them off.
	EnvValidate = "GITFLEET_VALIDATE"
	// EnvProviderPrefix + the provider in upper case ("=off") turns one
	// provider off: GITFLEET_VALIDATE_GITHUB=off.
	EnvProviderPrefix = "GITFLEET_VALIDATE_"
	// EnvEndpointPrefix + the provider points it at another origin, which
	// must be a loopback address: a local emulator, for tests and demos.
	EnvEndpointPrefix = "GITFLEET_VALIDATE_ENDPOINT_"
	// EnvInFlight and EnvPerMinute bound each provider's requests from
	// one worker.
	EnvInFlight  = "GITFLEET_VALIDATE_IN_FLIGHT"
	EnvPerMinute = "GITFLEET_VALIDATE_PER_MINUTE"
)

// Settings say whether and how checks are sent.
type Settings struct {
	// On: checks are sent (GITFLEET_VALIDATE=on).
	On bool
	// Off are providers turned off on their own.
	Off map[string]bool
	// Endpoints point providers at a loopback emulator (tests).
	Endpoints map[string]string
	// InFlight (default 2) and PerMinute (default 30) bound each
	// provider's requests: well under every provider's published limits
	// (GitHub 5,000 an hour per token, Slack's auth.test tier 4 at 100 a
	// minute, Stripe 25 a second in test mode).
	InFlight, PerMinute int
	// Timeout bounds one request (default 10s); Attempts the requests
	// of one check (default 4); MaxRetryAfter the longest Retry-After
	// waited for within a check (default 1 min; longer: unknown,
	// rate-limited, and the next run asks again).
	Timeout       time.Duration
	Attempts      int
	MaxRetryAfter time.Duration
}

// FromEnv reads the settings. An endpoint that is not a loopback address
// is refused: a production worker sends secrets to the providers' own
// origins, and nowhere else.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{On: strings.EqualFold(strings.TrimSpace(getenv(EnvValidate)), "on"), Off: map[string]bool{}, Endpoints: map[string]string{}}
	for _, p := range validity.Providers() {
		up := strings.ToUpper(p)
		switch v := strings.ToLower(strings.TrimSpace(getenv(EnvProviderPrefix + up))); v {
		case "", "on":
		case "off":
			s.Off[p] = true
		default:
			return Settings{}, fmt.Errorf("%s%s=%q: on or off", EnvProviderPrefix, up, v)
		}
		if e := strings.TrimSpace(getenv(EnvEndpointPrefix + up)); e != "" {
			if err := loopbackOrigin(e); err != nil {
				return Settings{}, fmt.Errorf("%s%s: %w", EnvEndpointPrefix, up, err)
			}
			s.Endpoints[p] = strings.TrimRight(e, "/")
		}
	}
	for _, n := range []struct {
		name string
		to   *int
	}{{EnvInFlight, &s.InFlight}, {EnvPerMinute, &s.PerMinute}} {
		if v := strings.TrimSpace(getenv(n.name)); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil || i <= 0 {
				return Settings{}, fmt.Errorf("%s=%q: a positive number", n.name, v)
			}
			*n.to = i
		}
	}
	return s, nil
}

// Enabled reports whether provider's checks are sent.
func (s Settings) Enabled(provider string) bool { return s.On && !s.Off[provider] }

// EnabledProviders are the providers whose checks are sent (none when
// off).
func (s Settings) EnabledProviders() []string {
	out := []string{}
	for _, p := range validity.Providers() {
		if s.Enabled(p) {
			out = append(out, p)
		}
	}
	return out
}

// loopbackOrigin accepts an http(s) origin on a loopback address.
func loopbackOrigin(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.User != nil {
		return fmt.Errorf("%q is not an http(s) origin", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("refusing %s: only a loopback address (a local emulator) may stand in for a provider", u.Host)
}

func (s Settings) withDefaults() Settings {
	if s.InFlight <= 0 {
		s.InFlight = 2
	}
	if s.PerMinute <= 0 {
		s.PerMinute = 30
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Second
	}
	if s.Attempts <= 0 {
		s.Attempts = 4
	}
	if s.MaxRetryAfter <= 0 {
		s.MaxRetryAfter = time.Minute
	}
	return s
}
