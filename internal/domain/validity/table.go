package validity

import (
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// Table is every validator. Each endpoint is the provider's documented
// public API; a secret of a self-hosted instance (GitHub Enterprise, a
// GitLab of one's own) is checked at the public one, where "invalid"
// means "not accepted there".
var Table = []Validator{
	{
		// GET /user: 200 with the login; 401 "Bad credentials"
		// (docs.github.com, "Troubleshooting the REST API"). Scopes of a
		// classic token are in X-OAuth-Scopes. App installation tokens
		// (ghs_) cannot read /user, so github-app-token is not here.
		Provider: "github",
		Rules:    []string{"github-pat", "github-fine-grained-pat", "github-oauth"},
		Endpoint: "https://api.github.com",
		Build: func(s Secret, _ time.Time) Request {
			h := bearer(s.Value)
			h["Accept"] = "application/vnd.github+json"
			h["X-GitHub-Api-Version"] = "2022-11-28"
			return Request{Method: "GET", Path: "/user", Header: h}
		},
		Read: func(a Answer) Verdict {
			return statusReader([]int{401}, jsonFacts(func(u struct {
				Login string `json:"login"`
			}) (Facts, bool) {
				return Facts{Account: u.Login, Scopes: scopes(a.Header["X-Oauth-Scopes"])}, u.Login != ""
			}))(a)
		},
	},
	{
		// GET /api/v4/user with PRIVATE-TOKEN: 401 for a token that is
		// not accepted (docs.gitlab.com, REST API "Status codes").
		Provider: "gitlab",
		Rules:    []string{"gitlab-pat", "gitlab-pat-routable"},
		Endpoint: "https://gitlab.com",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/api/v4/user", Header: map[string]string{"PRIVATE-TOKEN": s.Value}}
		},
		Read: statusReader([]int{401}, jsonFacts(func(u struct {
			Username string `json:"username"`
		}) (Facts, bool) {
			return Facts{Account: u.Username}, u.Username != ""
		})),
	},
	{
		// POST /api/auth.test: always 200, {"ok": false, "error": ...};
		// invalid_auth, token_revoked, token_expired, account_inactive and
		// not_authed say the token is not accepted (api.slack.com,
		// auth.test "Errors").
		Provider: "slack",
		Rules:    []string{"slack-bot-token", "slack-user-token", "slack-legacy-bot-token", "slack-legacy-token", "slack-legacy-workspace-token"},
		Endpoint: "https://slack.com",
		Build: func(s Secret, _ time.Time) Request {
			h := bearer(s.Value)
			h["Content-Type"] = "application/x-www-form-urlencoded"
			return Request{Method: "POST", Path: "/api/auth.test", Header: h}
		},
		Read: func(a Answer) Verdict {
			if v, ok := ByStatus(a); ok {
				return v
			}
			if a.Status != 200 {
				return unknown(ClassStatus, fmt.Sprintf("HTTP %d", a.Status))
			}
			f, err := jsonFacts(func(r struct {
				OK     *bool  `json:"ok"`
				Error  string `json:"error"`
				User   string `json:"user"`
				Team   string `json:"team"`
				UserID string `json:"user_id"`
			}) (Facts, bool) {
				if r.OK == nil {
					return Facts{}, false
				}
				if !*r.OK {
					return Facts{Note: r.Error}, true
				}
				return Facts{Account: strings.Trim(r.User+"@"+r.Team, "@"), KeyID: r.UserID}, true
			})(a)
			switch {
			case err != nil:
				return unknown(ClassMalformed, "HTTP 200: "+err.Error())
			case f.Note == "":
				return Verdict{State: Valid, Facts: f}
			}
			switch f.Note {
			case "invalid_auth", "token_revoked", "token_expired", "account_inactive", "not_authed":
				return Verdict{State: Invalid, Detail: f.Note}
			case "ratelimited":
				return unknown(ClassRateLimited, f.Note)
			}
			return unknown(ClassStatus, safeWord(f.Note))
		},
	},
	{
		// GET /v1/balance: 401 "No valid API key provided"; 403 "The API
		// key doesn't have permissions" — a restricted key that works
		// (docs.stripe.com, "Errors").
		Provider: "stripe",
		Rules:    []string{"stripe-access-token"},
		Endpoint: "https://api.stripe.com",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/v1/balance", Header: bearer(s.Value)}
		},
		Read: func(a Answer) Verdict {
			if a.Status == 403 {
				return Verdict{State: Valid, Facts: Facts{Note: "restricted key"}}
			}
			return statusReader([]int{401}, jsonFacts(func(b struct {
				Object   string `json:"object"`
				Livemode *bool  `json:"livemode"`
			}) (Facts, bool) {
				f := Facts{Note: "live mode"}
				if b.Livemode != nil && !*b.Livemode {
					f.Note = "test mode"
				}
				return f, b.Object == "balance"
			}))(a)
		},
	},
	{
		// GET /-/whoami on the registry: 401 for a token it does not
		// accept (docs.npmjs.com, registry authentication).
		Provider: "npm",
		Rules:    []string{"npm-access-token"},
		Endpoint: "https://registry.npmjs.org",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/-/whoami", Header: bearer(s.Value)}
		},
		Read: statusReader([]int{401}, jsonFacts(func(u struct {
			Username string `json:"username"`
		}) (Facts, bool) {
			return Facts{Account: u.Username}, u.Username != ""
		})),
	},
	{
		// GET /v1/models: 401 "Invalid Authentication" / "Incorrect API
		// key provided" (platform.openai.com, "Error codes").
		Provider: "openai",
		Rules:    []string{"openai-api-key"},
		Endpoint: "https://api.openai.com",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/v1/models", Header: bearer(s.Value)}
		},
		Read: statusReader([]int{401}, modelList),
	},
	{
		// GET /v1/models: 401 authentication_error (docs.anthropic.com,
		// "Errors").
		Provider: "anthropic",
		Rules:    []string{"anthropic-api-key"},
		Endpoint: "https://api.anthropic.com",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/v1/models", Header: map[string]string{
				"x-api-key": s.Value, "anthropic-version": "2023-06-01"}}
		},
		Read: statusReader([]int{401}, modelList),
	},
	{
		// GET /v3/scopes: 200 with the key's scopes; 401 for a key not
		// accepted (docs.sendgrid.com, "API keys" / "Errors").
		Provider: "sendgrid",
		Rules:    []string{"sendgrid-api-token"},
		Endpoint: "https://api.sendgrid.com",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/v3/scopes", Header: bearer(s.Value)}
		},
		Read: statusReader([]int{401}, jsonFacts(func(r struct {
			Scopes []string `json:"scopes"`
		}) (Facts, bool) {
			return Facts{Scopes: r.Scopes}, r.Scopes != nil
		})),
	},
	{
		// An API key SID (SK…) works only with its secret, for which
		// gitleaks has no rule: it is unknown (needs-pair) until a rule
		// finds the secret beside it. GET the account list with basic
		// authentication SID:secret; 401 for a pair not accepted
		// (twilio.com, "API keys").
		Provider:  "twilio",
		Rules:     []string{"twilio-api-key"},
		PairRules: []string{"twilio-api-secret"},
		Endpoint:  "https://api.twilio.com",
		Build: func(s Secret, _ time.Time) Request {
			return Request{Method: "GET", Path: "/2010-04-01/Accounts.json?PageSize=1", Header: map[string]string{
				"Authorization": "Basic " + basic(s.Value, s.Pair)}}
		},
		Read: statusReader([]int{401}, jsonFacts(func(r struct {
			Accounts []struct {
				SID string `json:"sid"`
			} `json:"accounts"`
		}) (Facts, bool) {
			f := Facts{}
			if len(r.Accounts) > 0 {
				f.Account = r.Accounts[0].SID
			}
			return f, r.Accounts != nil
		})),
	},
	{
		// STS GetCallerIdentity, signed (SigV4) with the key id and the
		// secret access key found beside it in the same blob: a key id
		// alone is unknown (needs-pair). 403 InvalidClientTokenId says the
		// key id is not accepted (docs.aws.amazon.com, STS "Common
		// Errors"); SignatureDoesNotMatch says only that this secret is
		// not its (unknown).
		Provider:  "aws",
		Rules:     []string{"aws-access-token"},
		PairRules: []string{"gitfleet-aws-secret-access-key"},
		Endpoint:  "https://sts.amazonaws.com",
		Build:     stsRequest,
		Read: func(a Answer) Verdict {
			if v, ok := ByStatus(a); ok {
				return v
			}
			switch a.Status {
			case 200:
				var r struct {
					Result struct {
						Arn     string `xml:"Arn"`
						Account string `xml:"Account"`
						UserID  string `xml:"UserId"`
					} `xml:"GetCallerIdentityResult"`
				}
				if err := xml.Unmarshal(a.Body, &r); err != nil || r.Result.Arn == "" {
					return unknown(ClassMalformed, "HTTP 200: not a GetCallerIdentity answer")
				}
				return Verdict{State: Valid, Facts: Facts{Account: r.Result.Arn, KeyID: r.Result.UserID}}
			case 403:
				var e struct {
					Error struct {
						Code string `xml:"Code"`
					} `xml:"Error"`
				}
				if xml.Unmarshal(a.Body, &e) != nil {
					return unknown(ClassMalformed, "HTTP 403")
				}
				switch e.Error.Code {
				case "InvalidClientTokenId":
					return Verdict{State: Invalid, Detail: e.Error.Code}
				case "SignatureDoesNotMatch":
					return unknown(ClassNeedsPair, "the secret found beside it is not the key's")
				}
				return unknown(ClassForbidden, "HTTP 403 "+safeWord(e.Error.Code))
			}
			return unknown(ClassStatus, fmt.Sprintf("HTTP %d", a.Status))
		},
	},
}

// modelList reads a models listing (OpenAI's and Anthropic's share it).
var modelList = jsonFacts(func(r struct {
	Data []json0 `json:"data"`
}) (Facts, bool) {
	return Facts{Note: fmt.Sprintf("%d models", len(r.Data))}, r.Data != nil
})

type json0 = struct{}

// safeWord keeps a provider's error code to a short word of letters,
// digits and _-.: it is stored and printed.
func safeWord(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 40 {
			break
		}
		if r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
