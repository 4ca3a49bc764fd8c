package ghaccount

import (
	"strings"
	"testing"
	"time"
)

// A refusal says what GitHub's 403 means and what to do, and never
// passes GitHub's text on unbounded or with control characters.
func TestRefusalReason(t *testing.T) {
	for _, tc := range []struct{ message, want string }{
		{"Resource protected by organization SAML enforcement. You must grant your Personal Access token access to this organization.",
			"acme enforces SAML single sign-on: authorize the token for the organization"},
		{"Although you appear to have the correct authorization credentials, the `acme` organization has an IP allow list enabled, and your IP address is not permitted to access this resource.",
			"acme has an IP allow list that does not admit this worker's address"},
		{"", "acme refused the token (403)"},
		{"Must have admin rights\x1b[2J\r\n", "acme refused the token (403): Must have admin rights"},
		{strings.Repeat("x", 10000), "acme refused the token (403): xxx"},
	} {
		got := RefusalReason("acme", tc.message)
		if !strings.HasPrefix(got, tc.want) || strings.ContainsAny(got, "\x1b\r\n") || len(got) > 300 {
			t.Errorf("RefusalReason(%.40q) = %q, want it to start %q, printable and short", tc.message, got, tc.want)
		}
	}
}

// A refused token's message says whose, when (in UTC, whatever the
// zone the time came in) and what to do.
func TestTokenRefused(t *testing.T) {
	at := time.Date(2026, 12, 3, 15, 10, 0, 0, time.FixedZone("CET", 3600))
	for _, want := range []string{"GitHub refused user bob's token (401", "at 2026-12-03 14:10 UTC", "run `starter users add bob` with a new token"} {
		if got := TokenRefused("bob", at); !strings.Contains(got, want) {
			t.Errorf("TokenRefused = %q, want it to say %q", got, want)
		}
	}
}
