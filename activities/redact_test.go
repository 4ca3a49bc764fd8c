package activities

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	msg := `ref "refs/heads/secret-branch" tip 0123456789abcdef0123456789abcdef01234567: blob 89abcdef0123456789abcdef0123456789abcdef at deploy/prod.env in commit 0123456789abcdef0123456789abcdef01234567 (open /srv/repos/acme.git: fetch https://ghe.example.com/acme/app.git)`
	got := redact(msg)
	for _, leak := range []string{"secret-branch", "0123456789abcdef", "89abcdef01234567", "deploy/prod.env", "/srv/repos", "acme/app"} {
		if strings.Contains(got, leak) {
			t.Errorf("redacted message still holds %q: %s", leak, got)
		}
	}
	for _, kept := range []string{"ref", "tip", "blob", "in commit", "open", "fetch"} {
		if !strings.Contains(got, kept) {
			t.Errorf("redacted message lost %q: %s", kept, got)
		}
	}
	// The same name redacts the same way, so messages still correlate.
	if strings.Count(got, "‹"+digest("0123456789abcdef0123456789abcdef01234567")+"›") != 2 {
		t.Errorf("equal ids do not redact equally: %s", got)
	}
}
