// Package provideremu emulates the APIs validity checks ask (GitHub's
// /user, GitLab's /api/v4/user, Slack's auth.test, Stripe's balance, npm's
// whoami, OpenAI's and Anthropic's model lists, SendGrid's scopes, STS
// GetCallerIdentity) on one loopback server, answering as the providers
// document: the secrets it knows are valid, others invalid. Faults are
// scripted per secret (429 with Retry-After, 5xx, a hang, a redirect to
// another host, a malformed answer), and every request is counted.
package provideremu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
)

// Fault is one scripted answer, used once, before the normal one.
type Fault string

const (
	RateLimited Fault = "429"       // 429 with Retry-After: 7
	ServerError Fault = "500"       // 503
	Hang        Fault = "hang"      // no answer until the client gives up
	Redirect    Fault = "redirect"  // 307 to another host (Elsewhere)
	Malformed   Fault = "malformed" // 200 with a body that is not the API's
)

// RetryAfterSeconds is what RateLimited asks the client to wait.
const RetryAfterSeconds = 7

// Emulator is the server.
type Emulator struct {
	srv *httptest.Server
	// Elsewhere is the host Redirect sends clients to; it counts what
	// reaches it (nothing should).
	elsewhere *httptest.Server

	mu        sync.Mutex
	valid     map[string]string // secret -> account
	faults    map[string][]Fault
	requests  int
	bySecret  map[string]int
	redirects int
	hung      chan struct{}
	// inFlight and maxInFlight count requests being answered.
	inFlight, maxInFlight int
}

// Start starts the emulator on a loopback port.
func Start() *Emulator {
	e := &Emulator{valid: map[string]string{}, faults: map[string][]Fault{}, bySecret: map[string]int{}, hung: make(chan struct{})}
	e.elsewhere = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.redirects++
		e.mu.Unlock()
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"login":"elsewhere","username":"elsewhere","ok":true,"object":"balance","data":[],"scopes":[]}`))
	}))
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	return e
}

// URL is the emulator's origin.
func (e *Emulator) URL() string { return e.srv.URL }

// Close stops it (a hung request is let go).
func (e *Emulator) Close() {
	close(e.hung)
	e.srv.Close()
	e.elsewhere.Close()
}

// Valid makes secret valid, for account.
func (e *Emulator) Valid(secret, account string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.valid[secret] = account
}

// Revoke makes secret invalid.
func (e *Emulator) Revoke(secret string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.valid, secret)
}

// Script queues faults for secret's next requests.
func (e *Emulator) Script(secret string, faults ...Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults[secret] = append(e.faults[secret], faults...)
}

// Requests counts every request the emulator received.
func (e *Emulator) Requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}

// RequestsFor counts the requests carrying secret.
func (e *Emulator) RequestsFor(secret string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bySecret[secret]
}

// Elsewhere counts the requests that reached the host Redirect names.
func (e *Emulator) Elsewhere() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.redirects
}

var awsKeyID = regexp.MustCompile(`Credential=([A-Z0-9]+)/`)

// secretOf finds the credential a request carries.
func secretOf(r *http.Request) string {
	if t := r.Header.Get("PRIVATE-TOKEN"); t != "" {
		return t
	}
	if t := r.Header.Get("x-api-key"); t != "" {
		return t
	}
	a := r.Header.Get("Authorization")
	if m := awsKeyID.FindStringSubmatch(a); m != nil {
		return m[1]
	}
	return strings.TrimPrefix(a, "Bearer ")
}

// MaxInFlight is the most requests the emulator answered at once.
func (e *Emulator) MaxInFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxInFlight
}

func (e *Emulator) serve(w http.ResponseWriter, r *http.Request) {
	secret := secretOf(r)
	e.mu.Lock()
	e.inFlight++
	e.maxInFlight = max(e.maxInFlight, e.inFlight)
	defer func() {
		e.mu.Lock()
		e.inFlight--
		e.mu.Unlock()
	}()
	e.requests++
	e.bySecret[secret]++
	var fault Fault
	if q := e.faults[secret]; len(q) > 0 {
		fault, e.faults[secret] = q[0], q[1:]
	}
	account, ok := e.valid[secret]
	e.mu.Unlock()
	switch fault {
	case RateLimited:
		w.Header().Set("Retry-After", fmt.Sprint(RetryAfterSeconds))
		w.WriteHeader(429)
		return
	case ServerError:
		w.WriteHeader(503)
		return
	case Hang:
		select {
		case <-r.Context().Done():
		case <-e.hung:
		}
		return
	case Redirect:
		http.Redirect(w, r, e.elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
		return
	case Malformed:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>maintenance</html>"))
		return
	}
	path := r.URL.Path
	if path == "/" && r.Method == "POST" { // STS
		if !ok {
			w.WriteHeader(403)
			_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code></Error></ErrorResponse>`))
			return
		}
		_, _ = fmt.Fprintf(w, `<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/%s</Arn><UserId>AIDAEXAMPLE</UserId><Account>123456789012</Account></GetCallerIdentityResult></GetCallerIdentityResponse>`, account)
		return
	}
	if path == "/api/auth.test" { // Slack answers 200 either way
		if !ok {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "user": account, "team": "acme", "user_id": "U0001"})
		return
	}
	if !ok {
		writeJSON(w, 401, map[string]any{"message": "Bad credentials"})
		return
	}
	switch path {
	case "/user":
		w.Header().Set("X-OAuth-Scopes", "repo, read:org")
		writeJSON(w, 200, map[string]any{"login": account})
	case "/api/v4/user", "/-/whoami":
		writeJSON(w, 200, map[string]any{"username": account})
	case "/v1/balance":
		writeJSON(w, 200, map[string]any{"object": "balance", "livemode": false})
	case "/v1/models":
		writeJSON(w, 200, map[string]any{"data": []any{map[string]any{"id": "m1"}}})
	case "/v3/scopes":
		writeJSON(w, 200, map[string]any{"scopes": []string{"mail.send"}})
	default:
		w.WriteHeader(404)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
