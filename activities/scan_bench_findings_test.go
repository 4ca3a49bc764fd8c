package activities_test

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"gitfleet/internal/infra/store"
)

// secretKey is what gitleaks' report and gitfleet's store both tell of a
// secret: the rule, the file's path and the secret's keyed hash (gitfleet
// keeps no secret; the hash of gitleaks' secret is computed with the same
// key). Empty for a path-only rule. Lines differ by design (gitleaks reports
// the line in the commit that added it, gitfleet in each blob holding it),
// so they are shown, not compared.
type secretKey struct{ rule, path, hash string }

// secretAt is where one tool met a secret, to show a difference.
type secretAt struct {
	line    int
	commit  string
	preview string
}

// gitleaksFinding is the part of a finding in gitleaks' JSON report read
// here.
type gitleaksFinding struct {
	RuleID    string
	File      string
	StartLine int
	Secret    string
	Commit    string
}

// compareFindings prints the distinct (rule, path, secret) of gitleaks'
// report beside those gitfleet recorded under gitleaks' configuration (the
// scope glScope), and the first differences. Measured only: another test
// asserts parity.
func compareFindings(b *testing.B, c corpus, report string, defaultScope, glScope int64) {
	b.Helper()
	theirs, reported := gitleaksFindings(b, report, testFindingKey.Secret)
	ours, occurrences := gitfleetFindings(b, glScope)
	defaults, defaultOccurrences := gitfleetFindings(b, defaultScope)

	onlyTheirs, onlyOurs := difference(theirs, ours), difference(ours, theirs)
	fmt.Printf("  findings as distinct (rule, path, secret), gitleaks git vs gitfleet with gitleaks' rules:\n")
	fmt.Printf("    gitleaks %d (of %d reported), gitfleet %d (of %d occurrences), both %d; only gitleaks %d, only gitfleet %d\n",
		len(theirs), reported, len(ours), occurrences, len(theirs)-len(onlyTheirs), len(onlyTheirs), len(onlyOurs))
	fmt.Printf("    (gitfleet with its default rules: %d, of %d occurrences)\n", len(defaults), defaultOccurrences)
	b.ReportMetric(float64(len(onlyTheirs)), c.name+"-findings-only-gitleaks")
	b.ReportMetric(float64(len(onlyOurs)), c.name+"-findings-only-gitfleet")
	const shown = 10
	for _, d := range []struct {
		who  string
		keys []secretKey
		at   map[secretKey]secretAt
	}{{"only gitleaks", onlyTheirs, theirs}, {"only gitfleet", onlyOurs, ours}} {
		for i, k := range d.keys[:min(shown, len(d.keys))] {
			at := d.at[k]
			if i == 0 {
				fmt.Printf("    %s, the first %d:\n", d.who, min(shown, len(d.keys)))
			}
			fmt.Printf("      %-28s %s:%d  %s  commit %.10s\n", k.rule, k.path, at.line, at.preview, at.commit)
		}
	}
}

// difference lists the keys of a not in b, ordered by path, rule and hash.
func difference(a, b map[secretKey]secretAt) []secretKey {
	var out []secretKey
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(x, y secretKey) int {
		return cmp.Or(strings.Compare(x.path, y.path), strings.Compare(x.rule, y.rule), strings.Compare(x.hash, y.hash))
	})
	return out
}

// gitleaksFindings reads gitleaks' JSON report: its distinct secrets (the
// first report of each) and how many findings it reported.
func gitleaksFindings(b *testing.B, report string, hashKey []byte) (map[secretKey]secretAt, int) {
	b.Helper()
	raw, err := os.ReadFile(report)
	if err != nil {
		b.Fatal(err)
	}
	var fs []gitleaksFinding
	if err := json.Unmarshal(raw, &fs); err != nil {
		b.Fatalf("gitleaks' report: %v", err)
	}
	out := map[secretKey]secretAt{}
	for _, f := range fs {
		k := secretKey{rule: f.RuleID, path: f.File}
		if f.Secret != "" {
			mac := hmac.New(sha256.New, hashKey)
			mac.Write([]byte(f.Secret))
			k.hash = hex.EncodeToString(mac.Sum(nil))
		}
		if _, ok := out[k]; !ok {
			out[k] = secretAt{line: f.StartLine, commit: f.Commit, preview: secretPreview(f.Secret)}
		}
	}
	return out, len(fs)
}

// gitfleetFindings reads a scope's findings back from the store: a secret
// counts at every path its blob was introduced at (gitleaks reports a file
// added again, or copied, at each path), and how many occurrences there are.
func gitfleetFindings(b *testing.B, scope int64) (map[secretKey]secretAt, int) {
	b.Helper()
	page, err := env.Store.Occurrences(context.Background(), scope, nil, store.Page{})
	if err != nil {
		b.Fatal(err)
	}
	out := map[secretKey]secretAt{}
	for _, o := range page.Occurrences {
		for _, p := range append([]string{o.Path}, o.AlsoAt...) {
			k := secretKey{rule: o.RuleID, path: p, hash: o.SecretHash}
			if _, ok := out[k]; !ok {
				out[k] = secretAt{line: o.Line, commit: o.Commit, preview: o.Preview}
			}
		}
	}
	return out, len(page.Occurrences)
}

// secretPreview shows a secret as gitfleet does (its first min(4, n/4)
// characters, then "…(n)"): the benchmark prints no secret whole.
func secretPreview(secret string) string {
	if secret == "" {
		return "(path only)"
	}
	n := utf8.RuneCountInString(secret)
	var sb strings.Builder
	k := 0
	for _, r := range secret {
		if k++; k > min(4, n/4) {
			break
		}
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || (r >= 0x80 && r < 0xa0) {
			r = '?'
		}
		sb.WriteRune(r)
	}
	return sb.String() + "…(" + strconv.Itoa(n) + ")"
}
