package vcs_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/vcs"
)

// What the forge answers when GitHub limits a client, each the way GitHub
// (or HTTP) says when to come back, and what gitfleet makes of it: the
// class, and the wait before the next request — never at once for a
// limit, never a minute when the answer says five seconds, never a
// permission error for a 403 that only says "later".
func TestRateLimitAnswersAreFollowed(t *testing.T) {
	const admin = "ghp_forgeAdminToken0123456789abcdefghijk"
	fg, err := forge.Start(forge.Options{Dir: t.TempDir(), Token: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	header := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	reset := time.Now().Add(2 * time.Minute)
	for i, tc := range []struct {
		name     string
		fault    forge.Fault
		reason   string
		min, max time.Duration
	}{
		{"403 with Retry-After and no documentation link", forge.Fault{Status: 403, Message: "You have been temporarily blocked.",
			Headers: header("Retry-After", "7")}, errclass.ReasonRateLimited, 7 * time.Second, 7 * time.Second},
		{"429 with Retry-After", forge.Fault{Status: 429, Headers: header("Retry-After", "5")},
			errclass.ReasonRateLimited, 5 * time.Second, 5 * time.Second},
		{"502 with Retry-After", forge.Fault{Status: 502, Headers: header("Retry-After", "3")},
			"server error 502", 3 * time.Second, 3 * time.Second},
		{"503 with an HTTP-date Retry-After", forge.Fault{Status: 503, Headers: header("Retry-After", time.Now().Add(time.Minute).UTC().Format(http.TimeFormat))},
			"server error 503", 50 * time.Second, 61 * time.Second},
		{"429 with Remaining 0 waits for the reset", forge.Fault{Status: 429,
			Headers: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))},
			errclass.ReasonRateLimited, 100 * time.Second, 130 * time.Second},
		{"primary limit (403, Remaining 0)", forge.Fault{RateLimit: true, ResetIn: 90 * time.Second},
			errclass.ReasonRateLimited, 80 * time.Second, 95 * time.Second},
		{"secondary limit with Retry-After", forge.Fault{RetryAfter: 11 * time.Second},
			errclass.ReasonRateLimited, 11 * time.Second, 11 * time.Second},
		{"secondary limit message, no header: a minute", forge.Fault{Status: 403,
			Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."},
			errclass.ReasonRateLimited, time.Minute, time.Minute},
		{"bare 429: a minute", forge.Fault{Status: 429}, errclass.ReasonRateLimited, time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := fg.AddUser(fmt.Sprintf("limited%d", i)) // a token of its own: the limit holds the token
			if err != nil {
				t.Fatal(err)
			}
			ft := tc.fault
			ft.Kind, ft.Path, ft.Times = forge.API, "/api/v3/user/repos", 1
			defer fg.AddFault(ft)()
			a, err := vcs.NewAccount(vcs.Host{Name: fg.Host(), GitURL: fg.URL() + "/", APIURL: fg.APIURL()}, u.Token, vcs.AccountOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = a.FetchList(context.Background(), "/user/repos", "user/repos", vcs.ListOptions{})
			c := errclass.Classify(err)
			if c == nil || c.Class != errclass.Retryable || c.Reason != tc.reason || c.RetryAfter < tc.min || c.RetryAfter > tc.max+time.Second {
				t.Fatalf("got %+v, want Retryable %q waiting %s–%s (%v)", c, tc.reason, tc.min, tc.max, err)
			}
		})
	}
}
