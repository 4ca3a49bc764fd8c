// Package validity says whether a found secret still works, per provider:
// which rules' secrets a provider's validator takes, the one documented
// HTTPS endpoint it asks, the request, and how its answer reads — valid,
// invalid, or unknown with the class of what stood in the way, and the
// non-secret facts the answer gives (the account, a key id, scopes).
//
// Pure: it builds requests and reads answers; sending them (fixed
// endpoints, limits, retries, redirects refused) is infra/validate's.
// A status reads as invalid only where the provider documents that it
// means the credential is not accepted: anything else is unknown, never a
// guess.
package validity

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// State is what a check found.
type State string

const (
	Valid   State = "valid"
	Invalid State = "invalid"
	Unknown State = "unknown"
)

// Class says why a check is unknown ("" when it is valid or invalid).
type Class string

const (
	ClassRateLimited Class = "rate-limited"      // 429 after the retries, or a Retry-After too long to wait
	ClassServer      Class = "server-error"      // 5xx after the retries
	ClassTimeout     Class = "timeout"           // no answer in time, after the retries
	ClassNetwork     Class = "network"           // no connection
	ClassRedirect    Class = "redirect-refused"  // the provider sent us elsewhere
	ClassStatus      Class = "unexpected-status" // a status whose meaning the provider does not document
	ClassMalformed   Class = "malformed-answer"  // a documented status with an answer we cannot read
	ClassNeedsPair   Class = "needs-pair"        // a key id without its secret (AWS, Twilio)
	ClassNotPlain    Class = "not-plain"         // found in decoded text or an archive: not re-read
	ClassUnreadable  Class = "unreadable"        // the blob could not be read from the mirror
	ClassChanged     Class = "changed"           // the span no longer holds the secret the finding hashed
	ClassProviderOff Class = "provider-off"      // GITFLEET_VALIDATE_<P>=off
	ClassUnsupported Class = "unsupported"       // no validator for the rule
	ClassCancelled   Class = "cancelled"
	ClassForbidden   Class = "forbidden" // 403 where the provider says it is not about the key's validity
)

// Facts are what a provider's answer says about a credential, never the
// credential: the account or login, a key id, scopes.
type Facts struct {
	Account string   `json:"account,omitempty"`
	KeyID   string   `json:"keyId,omitempty"`
	Scopes  []string `json:"scopes,omitempty"`
	// Note: a fact worth saying ("test mode", "restricted key").
	Note string `json:"note,omitempty"`
}

// Verdict is the reading of one answer.
type Verdict struct {
	State State `json:"state"`
	Class Class `json:"class,omitempty"`
	Facts Facts `json:"facts,omitzero"`
	// Detail is a short, non-secret word on an unknown: "HTTP 418".
	Detail string `json:"detail,omitempty"`
}

// Retry says whether a verdict is worth asking again after a wait: the
// provider was busy, failing or slow.
func (v Verdict) Retry() bool {
	return v.State == Unknown && (v.Class == ClassRateLimited || v.Class == ClassServer || v.Class == ClassTimeout || v.Class == ClassNetwork)
}

// Secret is what a validator checks: the secret and, for a provider that
// signs with a pair (AWS, Twilio), the other half found beside it.
type Secret struct {
	Value string
	Pair  string
}

// Request is one HTTPS request to a provider's endpoint. Header holds the
// secret: it lives as long as the check, in memory only.
type Request struct {
	Method string
	Path   string // below the endpoint, with its query
	Header map[string]string
	Body   string
}

// Answer is what came back.
type Answer struct {
	Status int
	Header map[string]string // canonical names (Retry-After, X-Oauth-Scopes)
	Body   []byte
}

// Validator is one provider's check.
type Validator struct {
	// Provider names it in settings (GITFLEET_VALIDATE_<PROVIDER>) and
	// rows: github, gitlab, ...
	Provider string
	// Rules are the gitleaks rule ids whose secrets it takes.
	Rules []string
	// PairRules find the other half of a pair in the same blob (AWS: the
	// secret access key beside the key id); empty when a secret stands
	// alone.
	PairRules []string
	// Endpoint is the provider's documented API origin, https only.
	Endpoint string
	// Build is the request checking s at now (a signature's time).
	Build func(s Secret, now time.Time) Request
	// Read reads the answer.
	Read func(a Answer) Verdict
}

// NeedsPair says whether the validator checks only a pair.
func (v *Validator) NeedsPair() bool { return len(v.PairRules) > 0 }

// ForRule is the validator of rule's secrets.
func ForRule(rule string) (*Validator, bool) {
	for i := range Table {
		if slices.Contains(Table[i].Rules, rule) {
			return &Table[i], true
		}
	}
	return nil, false
}

// ByProvider is the validator named provider.
func ByProvider(provider string) (*Validator, bool) {
	for i := range Table {
		if Table[i].Provider == provider {
			return &Table[i], true
		}
	}
	return nil, false
}

// Providers names every validator, in table order.
func Providers() []string {
	out := make([]string, len(Table))
	for i, v := range Table {
		out[i] = v.Provider
	}
	return out
}

// Rules is every rule some validator of providers takes, sorted (nil
// providers: every validator).
func Rules(providers []string) []string {
	var out []string
	for _, v := range Table {
		if providers == nil || slices.Contains(providers, v.Provider) {
			out = append(out, v.Rules...)
		}
	}
	sort.Strings(out)
	return out
}

// unknown is an unknown verdict of class with a detail.
func unknown(c Class, detail string) Verdict {
	return Verdict{State: Unknown, Class: c, Detail: detail}
}

// ByStatus reads what every provider shares: 429 rate-limited, 5xx a
// server error, a redirect refused; ok reports that the status was one of
// these (and the verdict is final).
func ByStatus(a Answer) (Verdict, bool) {
	switch {
	case a.Status == 429:
		return unknown(ClassRateLimited, "HTTP 429"), true
	case a.Status >= 500:
		return unknown(ClassServer, fmt.Sprintf("HTTP %d", a.Status)), true
	case a.Status >= 300 && a.Status < 400:
		return unknown(ClassRedirect, fmt.Sprintf("HTTP %d", a.Status)), true
	}
	return Verdict{}, false
}

// statusReader is the usual reading: 200 valid with facts from the body,
// the documented statuses invalid, everything else unknown.
func statusReader(invalid []int, facts func(a Answer) (Facts, error)) func(Answer) Verdict {
	return func(a Answer) Verdict {
		if v, ok := ByStatus(a); ok {
			return v
		}
		switch {
		case a.Status == 200:
			f, err := facts(a)
			if err != nil {
				return unknown(ClassMalformed, "HTTP 200: "+err.Error())
			}
			return Verdict{State: Valid, Facts: f}
		case slices.Contains(invalid, a.Status):
			return Verdict{State: Invalid, Detail: fmt.Sprintf("HTTP %d", a.Status)}
		case a.Status == 403:
			return unknown(ClassForbidden, "HTTP 403")
		}
		return unknown(ClassStatus, fmt.Sprintf("HTTP %d", a.Status))
	}
}

// jsonFacts decodes the body into T and takes facts from it; a body that
// is not such JSON is malformed.
func jsonFacts[T any](pick func(T) (Facts, bool)) func(Answer) (Facts, error) {
	return func(a Answer) (Facts, error) {
		var t T
		if err := json.Unmarshal(a.Body, &t); err != nil {
			return Facts{}, fmt.Errorf("not JSON")
		}
		f, ok := pick(t)
		if !ok {
			return Facts{}, fmt.Errorf("missing fields")
		}
		return f, nil
	}
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// scopes splits a comma-separated header ("repo, read:org").
func scopes(h string) []string {
	var out []string
	for _, s := range strings.Split(h, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
