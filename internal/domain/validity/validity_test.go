package validity

import (
	"gitfleet/internal/domain/scan"
	"strings"
	"testing"
	"time"
)

func TestReadAnswers(t *testing.T) {
	ok := func(body string) Answer { return Answer{Status: 200, Body: []byte(body)} }
	status := func(s int, body string) Answer { return Answer{Status: s, Body: []byte(body)} }
	for _, c := range []struct {
		provider string
		name     string
		answer   Answer
		want     Verdict
	}{
		{"github", "valid", Answer{Status: 200, Body: []byte(`{"login":"octocat"}`), Header: map[string]string{"X-Oauth-Scopes": "repo, read:org"}},
			Verdict{State: Valid, Facts: Facts{Account: "octocat", Scopes: []string{"repo", "read:org"}}}},
		{"github", "invalid", status(401, `{"message":"Bad credentials"}`), Verdict{State: Invalid, Detail: "HTTP 401"}},
		{"github", "403 is not invalid", status(403, `{}`), Verdict{State: Unknown, Class: ClassForbidden, Detail: "HTTP 403"}},
		{"github", "malformed", ok(`<html>`), Verdict{State: Unknown, Class: ClassMalformed, Detail: "HTTP 200: not JSON"}},
		{"github", "no login", ok(`{}`), Verdict{State: Unknown, Class: ClassMalformed, Detail: "HTTP 200: missing fields"}},
		{"github", "rate limited", status(429, ``), Verdict{State: Unknown, Class: ClassRateLimited, Detail: "HTTP 429"}},
		{"github", "server", status(502, ``), Verdict{State: Unknown, Class: ClassServer, Detail: "HTTP 502"}},
		{"github", "redirect", status(302, ``), Verdict{State: Unknown, Class: ClassRedirect, Detail: "HTTP 302"}},
		{"github", "teapot", status(418, ``), Verdict{State: Unknown, Class: ClassStatus, Detail: "HTTP 418"}},
		{"gitlab", "valid", ok(`{"username":"root"}`), Verdict{State: Valid, Facts: Facts{Account: "root"}}},
		{"gitlab", "invalid", status(401, ``), Verdict{State: Invalid, Detail: "HTTP 401"}},
		{"slack", "valid", ok(`{"ok":true,"user":"bot","team":"acme","user_id":"U1"}`), Verdict{State: Valid, Facts: Facts{Account: "bot@acme", KeyID: "U1"}}},
		{"slack", "revoked", ok(`{"ok":false,"error":"token_revoked"}`), Verdict{State: Invalid, Detail: "token_revoked"}},
		{"slack", "other error", ok(`{"ok":false,"error":"fatal_error\u001b[31m"}`), Verdict{State: Unknown, Class: ClassStatus, Detail: "fatal_error31m"}},
		{"slack", "no ok", ok(`{"user":"x"}`), Verdict{State: Unknown, Class: ClassMalformed, Detail: "HTTP 200: missing fields"}},
		{"stripe", "valid", ok(`{"object":"balance","livemode":false}`), Verdict{State: Valid, Facts: Facts{Note: "test mode"}}},
		{"stripe", "restricted", status(403, ``), Verdict{State: Valid, Facts: Facts{Note: "restricted key"}}},
		{"stripe", "invalid", status(401, ``), Verdict{State: Invalid, Detail: "HTTP 401"}},
		{"npm", "valid", ok(`{"username":"alice"}`), Verdict{State: Valid, Facts: Facts{Account: "alice"}}},
		{"npm", "invalid", status(401, ``), Verdict{State: Invalid, Detail: "HTTP 401"}},
		{"openai", "valid", ok(`{"data":[{},{}]}`), Verdict{State: Valid, Facts: Facts{Note: "2 models"}}},
		{"anthropic", "invalid", status(401, ``), Verdict{State: Invalid, Detail: "HTTP 401"}},
		{"sendgrid", "valid", ok(`{"scopes":["mail.send"]}`), Verdict{State: Valid, Facts: Facts{Scopes: []string{"mail.send"}}}},
		{"twilio", "invalid", status(401, ``), Verdict{State: Invalid, Detail: "HTTP 401"}},
		{"aws", "valid", ok(`<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>arn:aws:iam::1:user/a</Arn><UserId>AIDA1</UserId><Account>1</Account></GetCallerIdentityResult></GetCallerIdentityResponse>`),
			Verdict{State: Valid, Facts: Facts{Account: "arn:aws:iam::1:user/a", KeyID: "AIDA1"}}},
		{"aws", "invalid key", status(403, `<ErrorResponse><Error><Code>InvalidClientTokenId</Code></Error></ErrorResponse>`), Verdict{State: Invalid, Detail: "InvalidClientTokenId"}},
		{"aws", "wrong secret", status(403, `<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code></Error></ErrorResponse>`),
			Verdict{State: Unknown, Class: ClassNeedsPair, Detail: "the secret found beside it is not the key's"}},
	} {
		t.Run(c.provider+"/"+c.name, func(t *testing.T) {
			v, ok := ByProvider(c.provider)
			if !ok {
				t.Fatalf("no validator %s", c.provider)
			}
			got := v.Read(c.answer)
			if got.State != c.want.State || got.Class != c.want.Class || got.Detail != c.want.Detail ||
				got.Facts.Account != c.want.Facts.Account || got.Facts.KeyID != c.want.Facts.KeyID || got.Facts.Note != c.want.Facts.Note ||
				strings.Join(got.Facts.Scopes, ",") != strings.Join(c.want.Facts.Scopes, ",") {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// Every validator asks one fixed https origin, and its request carries
// the secret only in a header (never the path, where logs keep it).
func TestRequestsAreFixedAndCarryTheSecretInHeaders(t *testing.T) {
	const secret, pair = "SECRETVALUE1234567890", "PAIRSECRET0987654321"
	seen := map[string]bool{}
	for _, v := range Table {
		if !strings.HasPrefix(v.Endpoint, "https://") || strings.Count(v.Endpoint, "/") != 2 {
			t.Errorf("%s: endpoint %q is not an https origin", v.Provider, v.Endpoint)
		}
		for _, r := range v.Rules {
			if seen[r] {
				t.Errorf("rule %s taken twice", r)
			}
			seen[r] = true
			if got, _ := ForRule(r); got.Provider != v.Provider {
				t.Errorf("ForRule(%s) = %s", r, got.Provider)
			}
		}
		req := v.Build(Secret{Value: secret, Pair: pair}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		if strings.Contains(req.Path, secret) || strings.Contains(req.Body, secret) || strings.Contains(req.Path, pair) || strings.Contains(req.Body, pair) {
			t.Errorf("%s: the secret is in the path or body", v.Provider)
		}
		inHeader := false
		for _, h := range req.Header {
			inHeader = inHeader || strings.Contains(h, secret) || strings.Contains(h, basic(secret, pair))
		}
		if !inHeader {
			t.Errorf("%s: the request does not carry the secret", v.Provider)
		}
	}
}

// SigV4: the signature changes with the secret and the time, and the
// credential names the key id and the day's scope.
func TestSTSRequestIsSigned(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := stsRequest(Secret{Value: "AKIAIOSFODNN7EXAMPLE", Pair: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, at)
	b := stsRequest(Secret{Value: "AKIAIOSFODNN7EXAMPLE", Pair: "another"}, at)
	c := stsRequest(Secret{Value: "AKIAIOSFODNN7EXAMPLE", Pair: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, at.Add(time.Second))
	if !strings.HasPrefix(a.Header["Authorization"], "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260102/us-east-1/sts/aws4_request, ") {
		t.Errorf("authorization %q", a.Header["Authorization"])
	}
	if a.Header["Authorization"] == b.Header["Authorization"] || a.Header["Authorization"] == c.Header["Authorization"] {
		t.Error("the signature does not depend on the secret and the time")
	}
	if strings.Contains(a.Header["Authorization"], "wJalr") {
		t.Error("the secret access key is sent")
	}
}

// Every rule a validator takes is a built-in rule (a rule renamed by a
// gitleaks upgrade would silently stop being checked). Twilio's secret has
// no rule yet: its pair stays unknown.
func TestRulesAreBuiltIn(t *testing.T) {
	rs, err := scan.Default()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range rs.Rules() {
		ids[r.ID] = true
	}
	for _, v := range Table {
		for _, r := range append(append([]string{}, v.Rules...), v.PairRules...) {
			if !ids[r] && r != "twilio-api-secret" {
				t.Errorf("%s: rule %s is not built in", v.Provider, r)
			}
		}
	}
}

// The signer against the example of AWS's documentation ("Create a signed
// AWS API request": IAM ListUsers, 2015-08-30T12:36:00Z).
func TestSigV4KnownAnswer(t *testing.T) {
	got := sigV4(signing{method: "GET", host: "iam.amazonaws.com", path: "/", query: "Action=ListUsers&Version=2010-05-08",
		contentType: "application/x-www-form-urlencoded; charset=utf-8", region: "us-east-1", service: "iam",
		keyID: "AKIDEXAMPLE", secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", now: time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)})
	want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, " +
		"SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
