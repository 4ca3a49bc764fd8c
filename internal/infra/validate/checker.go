package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"gitfleet/internal/domain/validity"
	"gitfleet/internal/infra/metrics"
)

// Checks counts the requests sent, by provider and what they read as.
var Checks = metrics.NewCounter("gitfleet_validity_requests_total",
	"Validity check requests sent to providers, by provider and verdict (valid, invalid, unknown class).", "provider", "verdict")

// maxBody bounds what is read of an answer.
const maxBody = 1 << 20

// Checker sends checks. Safe for concurrent use; one per process, so that
// its limits hold for every activity of the worker.
type Checker struct {
	s    Settings
	http *http.Client
	// Sleep waits (tests record it); nil: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of signatures and rate windows; nil: time.Now.
	Now func() time.Time

	mu     sync.Mutex
	limits map[string]*limit
}

// limit is a provider's: slots in flight, and the earliest time the next
// request may start (one every minute/PerMinute).
type limit struct {
	slots chan struct{}
	mu    sync.Mutex
	next  time.Time
}

var errRedirect = errors.New("redirect to another origin refused")

// New is a Checker with settings s. Endpoints are checked again here (a
// test may set them without FromEnv): only loopback origins stand in.
func New(s Settings) (*Checker, error) {
	for p, e := range s.Endpoints {
		if err := loopbackOrigin(e); err != nil {
			return nil, fmt.Errorf("endpoint of %s: %w", p, err)
		}
	}
	s = s.withDefaults()
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: s.Timeout}).DialContext,
		TLSHandshakeTimeout: s.Timeout,
		MaxIdleConnsPerHost: s.InFlight,
		ForceAttemptHTTP2:   true,
	}
	c := &Checker{s: s, limits: map[string]*limit{}}
	c.http = &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		// Within the origin asked only (a header such as PRIVATE-TOKEN or
		// x-api-key would follow the request anywhere).
		if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host || len(via) > 3 {
			return errRedirect
		}
		return nil
	}}
	return c, nil
}

// Settings are the checker's.
func (c *Checker) Settings() Settings { return c.s }

// Enabled reports whether provider's checks are sent.
func (c *Checker) Enabled(provider string) bool { return c != nil && c.s.Enabled(provider) }

// Endpoint is where provider's checks go.
func (c *Checker) Endpoint(v *validity.Validator) string {
	if e, ok := c.s.Endpoints[v.Provider]; ok {
		return e
	}
	return v.Endpoint
}

// Check asks v's provider about s. Off, it sends nothing. A busy, failing
// or slow provider is asked again (Retry-After, else 1s, 2s, 4s…) within
// the settings' attempts; what is left unknown says why.
func (c *Checker) Check(ctx context.Context, v *validity.Validator, s validity.Secret) validity.Verdict {
	if !c.Enabled(v.Provider) {
		return validity.Verdict{State: validity.Unknown, Class: validity.ClassProviderOff}
	}
	if v.NeedsPair() && s.Pair == "" {
		return validity.Verdict{State: validity.Unknown, Class: validity.ClassNeedsPair, Detail: "a key id alone cannot be checked"}
	}
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		verdict, retryAfter := c.once(ctx, v, s)
		if !verdict.Retry() || attempt >= c.s.Attempts || ctx.Err() != nil {
			return verdict
		}
		wait := backoff
		backoff *= 2
		if retryAfter > 0 {
			if retryAfter > c.s.MaxRetryAfter {
				verdict.Detail += fmt.Sprintf(", Retry-After %s", retryAfter)
				return verdict
			}
			wait = retryAfter
		}
		if err := c.sleep(ctx, wait); err != nil {
			return validity.Verdict{State: validity.Unknown, Class: validity.ClassCancelled}
		}
	}
}

// once sends one request within the provider's limits; it returns the
// verdict and the Retry-After the answer asked for (0: none).
func (c *Checker) once(ctx context.Context, v *validity.Validator, s validity.Secret) (validity.Verdict, time.Duration) {
	l := c.limit(v.Provider)
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return validity.Verdict{State: validity.Unknown, Class: validity.ClassCancelled}, 0
	}
	defer func() { <-l.slots }()
	if err := c.pace(ctx, l); err != nil {
		return validity.Verdict{State: validity.Unknown, Class: validity.ClassCancelled}, 0
	}
	r := v.Build(s, c.now())
	rctx, cancel := context.WithTimeout(ctx, c.s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, r.Method, c.Endpoint(v)+r.Path, strings.NewReader(r.Body))
	if err != nil {
		return validity.Verdict{State: validity.Unknown, Class: validity.ClassNetwork, Detail: "bad request"}, 0
	}
	for k, val := range r.Header {
		req.Header.Set(k, val)
	}
	req.Header.Set("User-Agent", "gitfleet-validity")
	resp, err := c.http.Do(req)
	if err != nil {
		verdict := validity.Verdict{State: validity.Unknown, Class: validity.ClassNetwork, Detail: "no connection"}
		switch {
		case errors.Is(err, errRedirect):
			verdict = validity.Verdict{State: validity.Unknown, Class: validity.ClassRedirect, Detail: "redirect to another origin refused"}
		case ctx.Err() != nil:
			verdict = validity.Verdict{State: validity.Unknown, Class: validity.ClassCancelled}
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			verdict = validity.Verdict{State: validity.Unknown, Class: validity.ClassTimeout, Detail: "no answer within " + c.s.Timeout.String()}
		}
		Checks.Inc(v.Provider, verdictLabel(verdict))
		return verdict, 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		verdict := validity.Verdict{State: validity.Unknown, Class: validity.ClassTimeout, Detail: "the answer stopped"}
		Checks.Inc(v.Provider, verdictLabel(verdict))
		return verdict, 0
	}
	a := validity.Answer{Status: resp.StatusCode, Body: body, Header: map[string]string{}}
	for k := range resp.Header {
		a.Header[k] = resp.Header.Get(k)
	}
	verdict := v.Read(a)
	if verdict.State == validity.Invalid {
		// Invalid where it was asked: a token of a self-hosted instance
		// (GHES, a GitLab of one's own) is refused by the public API.
		verdict.Detail = strings.TrimSpace(verdict.Detail + " at " + req.URL.Host)
	}
	Checks.Inc(v.Provider, verdictLabel(verdict))
	return verdict, retryAfter(resp.Header.Get("Retry-After"), c.now())
}

func verdictLabel(v validity.Verdict) string {
	if v.State == validity.Unknown {
		return "unknown:" + string(v.Class)
	}
	return string(v.State)
}

func isTimeout(err error) bool {
	var ne net.Error
	var ue *url.Error
	return (errors.As(err, &ne) && ne.Timeout()) || (errors.As(err, &ue) && ue.Timeout())
}

// retryAfter reads Retry-After: seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (c *Checker) limit(provider string) *limit {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.limits[provider]
	if !ok {
		l = &limit{slots: make(chan struct{}, c.s.InFlight)}
		c.limits[provider] = l
	}
	return l
}

// pace waits for the provider's next start: requests start at least
// minute/PerMinute apart.
func (c *Checker) pace(ctx context.Context, l *limit) error {
	every := time.Minute / time.Duration(c.s.PerMinute)
	l.mu.Lock()
	now := c.now()
	start := l.next
	if start.Before(now) {
		start = now
	}
	l.next = start.Add(every)
	l.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		return c.sleep(ctx, d)
	}
	return nil
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
