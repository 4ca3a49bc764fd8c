package report

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// Code scanning reads a rule's properties.security-severity (a number
// from 0.0 to 10.0, as a string) and shows above 9.0 as critical, 7.0 to
// 8.9 as high, 4.0 to 6.9 as medium, below 4.0 as low (docs.github.com:
// "SARIF support for code scanning", reportingDescriptor object).
const (
	// SeverityValid is a secret its provider accepted at the last check:
	// anyone holding the history holds a working credential.
	SeverityValid = 9.5
	// SeverityProvider is a credential of a provider whose keys grant
	// access by themselves (cloud, forge, payment, messaging, a private
	// key): high until a check says otherwise.
	SeverityProvider = 8.0
	// SeverityOther is any other rule's secret, SeverityGeneric a
	// generic rule's (a password or key= assignment, often not one).
	SeverityOther   = 7.0
	SeverityGeneric = 5.0
	// SeverityLow is a secret that cannot be used against production: a
	// test-mode key, one its provider refused, one triaged as used in
	// tests or a false positive.
	SeverityLow = 2.0
)

// providerFamilies are the rule families (a rule id up to its first '-')
// whose keys grant access by themselves.
var providerFamilies = map[string]bool{
	"aws": true, "gcp": true, "azure": true, "github": true, "gitlab": true, "bitbucket": true, "private": true,
	"stripe": true, "slack": true, "twilio": true, "sendgrid": true, "npm": true, "pypi": true, "rubygems": true,
	"heroku": true, "digitalocean": true, "openai": true, "anthropic": true, "hashicorp": true, "vault": true,
	"shopify": true, "square": true, "okta": true, "databricks": true, "doppler": true, "pulumi": true,
	"dockerhub": true, "docker": true, "cloudflare": true, "atlassian": true, "jfrog": true, "1password": true,
}

// family is a rule's family: its id up to the first '-', gitfleet's own
// rules' after their prefix.
func family(ruleID string) string {
	f, _, _ := strings.Cut(strings.TrimPrefix(ruleID, "gitfleet-"), "-")
	return f
}

// RuleSeverity is a rule's security severity, from its family.
func RuleSeverity(ruleID string) float64 {
	switch f := family(ruleID); {
	case providerFamilies[f]:
		return SeverityProvider
	case f == "generic":
		return SeverityGeneric
	}
	return SeverityOther
}

// Severity is an occurrence's security severity: its rule's, unless a
// validity check or triage knows better — a valid secret is critical
// (unless the provider says it is a test-mode key), one refused by its
// provider, a test key or one triaged as such is low.
func (o Occurrence) Severity() float64 {
	switch {
	case o.TestKey, o.State == "used_in_tests", o.State == "false_positive":
		return SeverityLow
	case o.Validity == "valid":
		return SeverityValid
	case o.Validity == "invalid":
		return SeverityLow
	}
	return RuleSeverity(o.RuleID)
}

// level is the SARIF level of a severity.
func level(severity float64) string {
	if severity < 4 {
		return "note"
	}
	return "error"
}

func severityText(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) }

// BuildVersion is the version of the running binary: its module version,
// or the commit it was built from (with "+dirty" for uncommitted
// changes), or "dev".
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	return "0.0.0-" + rev[:min(12, len(rev))] + dirty
}
