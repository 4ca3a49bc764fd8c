package validate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/provideremu"
	"gitfleet/internal/domain/validity"
)

// sleeps records the waits a checker asks for, without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

func emulated(t *testing.T, e *provideremu.Emulator, s Settings) (*Checker, *sleeps) {
	t.Helper()
	s.On = true
	s.Endpoints = map[string]string{}
	for _, p := range validity.Providers() {
		s.Endpoints[p] = e.URL()
	}
	if s.PerMinute == 0 {
		s.PerMinute = 60_000
	}
	c, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	z := &sleeps{}
	c.Sleep = z.sleep
	return c, z
}

func TestCheckAgainstTheEmulator(t *testing.T) {
	e := provideremu.Start()
	defer e.Close()
	c, z := emulated(t, e, Settings{Timeout: 100 * time.Millisecond})
	secrets := map[string]string{
		"github": "ghp_valid", "gitlab": "glpat-valid", "slack": "xoxb-valid", "stripe": "sk_test_valid", "npm": "npm_valid",
		"openai": "sk-valid", "anthropic": "sk-ant-valid", "sendgrid": "SG.valid", "aws": "AKIAVALID",
	}
	for _, s := range secrets {
		e.Valid(s, "alice")
	}
	for p, s := range secrets {
		v, _ := validity.ByProvider(p)
		pair := ""
		if v.NeedsPair() {
			pair = "the-secret-key"
		}
		check := func() validity.Verdict {
			return c.Check(context.Background(), v, validity.Secret{Value: s, Pair: pair})
		}
		t.Run(p, func(t *testing.T) {
			if got := check(); got.State != validity.Valid {
				t.Errorf("valid: %+v", got)
			}
			e.Script(s, provideremu.RateLimited)
			z.d = nil
			if got := check(); got.State != validity.Valid || !slices.Contains(z.d, provideremu.RetryAfterSeconds*time.Second) {
				t.Errorf("429 then valid: %+v, waits %v (want Retry-After)", got, z.d)
			}
			e.Script(s, provideremu.ServerError, provideremu.ServerError)
			if got := check(); got.State != validity.Valid {
				t.Errorf("5xx then valid: %+v", got)
			}
			e.Script(s, provideremu.Hang)
			if got := check(); got.State != validity.Valid {
				t.Errorf("a timeout then valid: %+v", got)
			}
			e.Script(s, provideremu.Hang, provideremu.Hang, provideremu.Hang, provideremu.Hang)
			if got := check(); got.State != validity.Unknown || got.Class != validity.ClassTimeout {
				t.Errorf("timeouts: %+v", got)
			}
			e.Script(s, provideremu.Redirect)
			if got := check(); got.State != validity.Unknown || got.Class != validity.ClassRedirect || e.Elsewhere() != 0 {
				t.Errorf("redirect: %+v, %d requests elsewhere", got, e.Elsewhere())
			}
			e.Script(s, provideremu.Malformed)
			if got := check(); got.State != validity.Unknown || got.Class != validity.ClassMalformed {
				t.Errorf("malformed: %+v", got)
			}
			e.Revoke(s)
			if got := check(); got.State != validity.Invalid || !strings.HasSuffix(got.Detail, " at "+strings.TrimPrefix(e.URL(), "http://")) {
				t.Errorf("revoked: %+v (the detail names where it was refused)", got)
			}
			e.Valid(s, "alice")
		})
	}
}

// A Retry-After longer than the settings allow is not waited for: the
// check is unknown (rate-limited) and the next run asks again.
func TestLongRetryAfterIsNotWaited(t *testing.T) {
	e := provideremu.Start()
	defer e.Close()
	c, z := emulated(t, e, Settings{MaxRetryAfter: time.Second})
	v, _ := validity.ByProvider("github")
	e.Valid("ghp_x", "a")
	e.Script("ghp_x", provideremu.RateLimited)
	got := c.Check(context.Background(), v, validity.Secret{Value: "ghp_x"})
	if got.Class != validity.ClassRateLimited || !strings.Contains(got.Detail, "Retry-After 7s") || len(z.d) != 0 {
		t.Errorf("got %+v, waits %v", got, z.d)
	}
}

// Off (the default), or a provider turned off: nothing is sent.
func TestOffSendsNothing(t *testing.T) {
	e := provideremu.Start()
	defer e.Close()
	s, err := FromEnv(func(k string) string {
		if strings.HasPrefix(k, EnvEndpointPrefix) {
			return e.URL()
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range validity.Table {
		if got := c.Check(context.Background(), &v, validity.Secret{Value: "x", Pair: "y"}); got.Class != validity.ClassProviderOff {
			t.Errorf("%s: %+v", v.Provider, got)
		}
	}
	s, err = FromEnv(func(k string) string {
		switch {
		case k == EnvValidate:
			return "on"
		case k == EnvProviderPrefix+"GITHUB":
			return "off"
		case strings.HasPrefix(k, EnvEndpointPrefix):
			return e.URL()
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _ = New(s)
	v, _ := validity.ByProvider("github")
	if got := c.Check(context.Background(), v, validity.Secret{Value: "x"}); got.Class != validity.ClassProviderOff {
		t.Errorf("github off: %+v", got)
	}
	if e.Requests() != 0 {
		t.Errorf("%d requests reached the emulator while off", e.Requests())
	}
	if !slices.Equal(s.EnabledProviders(), slices.DeleteFunc(validity.Providers(), func(p string) bool { return p == "github" })) {
		t.Errorf("enabled %v", s.EnabledProviders())
	}
}

// Only a loopback origin may stand in for a provider.
func TestEndpointsAreLoopbackOnly(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080", true}, {"http://localhost:1", true}, {"https://[::1]:443", true},
		{"https://api.example.com", false}, {"http://10.0.0.1", false}, {"http://127.0.0.1/path", false},
		{"ftp://127.0.0.1", false}, {"http://user:pw@127.0.0.1", false},
	} {
		_, err := FromEnv(func(k string) string {
			if k == EnvEndpointPrefix+"GITHUB" {
				return c.url
			}
			return ""
		})
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.url, err)
		}
		if _, err := New(Settings{Endpoints: map[string]string{"github": c.url}}); (err == nil) != c.ok {
			t.Errorf("New %s: %v", c.url, err)
		}
	}
}

// The limits hold: with 2 in flight and 120 a minute, requests start half
// a second apart on the checker's clock.
func TestPace(t *testing.T) {
	e := provideremu.Start()
	defer e.Close()
	c, z := emulated(t, e, Settings{PerMinute: 120})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Now = func() time.Time { return now }
	v, _ := validity.ByProvider("npm")
	for range 3 {
		c.Check(context.Background(), v, validity.Secret{Value: "npm_x"})
	}
	if !slices.Equal(z.d, []time.Duration{500 * time.Millisecond, time.Second}) {
		t.Errorf("waits %v", z.d)
	}
}

// At most InFlight requests of a provider at once: six checks started
// together against answers that hang until the client gives up reach the
// emulator two at a time.
func TestInFlight(t *testing.T) {
	e := provideremu.Start()
	defer e.Close()
	c, _ := emulated(t, e, Settings{InFlight: 2, Attempts: 1, Timeout: 100 * time.Millisecond})
	v, _ := validity.ByProvider("gitlab")
	var wg sync.WaitGroup
	for i := range 6 {
		s := fmt.Sprintf("glpat-%d", i)
		e.Script(s, provideremu.Hang)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := c.Check(context.Background(), v, validity.Secret{Value: s}); got.Class != validity.ClassTimeout {
				t.Errorf("%s: %+v", s, got)
			}
		}()
	}
	wg.Wait()
	if n := e.MaxInFlight(); n != 2 {
		t.Errorf("%d requests at once, want 2", n)
	}
}
