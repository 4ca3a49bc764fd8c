package scan

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
)

type matchMode uint8

const (
	modeFull     matchMode = iota // run the regex on the whole blob
	modeAnchored                  // try it anchored at candidate starts near keyword occurrences
)

type compiledRule struct {
	Rule
	idx    int32
	re     *regexp.Regexp // nil for a path-only rule
	path   *filteredRegex // nil when the rule has no path
	allow  []*compiledAllowlist
	global []*compiledAllowlist // the global allowlists that apply to this rule
	mode   matchMode
	plan   *anchoredPlan // modeAnchored only
	// generic rules (an id containing "generic", as gitleaks decides) give
	// way to a specific rule that found the same secret.
	generic bool
	report  bool          // not SkipReport
	req     []compiledReq // regex rules only: the required rules
}

// compiledReq is one required rule of a composite rule.
type compiledReq struct {
	rule        int32 // index of the required rule
	lines, cols int   // WithinLines, WithinColumns; -1 = unbounded
}

type regexTarget uint8

const (
	targetSecret regexTarget = iota
	targetMatch
	targetLine
)

type compiledAllowlist struct {
	src     Allowlist
	idx     int // index into per-scan state
	and     bool
	commits map[string]bool
	// paths and regex are the alternation of the configured ones
	// (compileJoined); nil: none.
	paths   *filteredRegex
	regex   *filteredRegex
	target  regexTarget
	stops   [][]byte
	targets map[string]bool // global only; nil = every rule
}

// maxAnchoredLen bounds anchored matching: rules whose matches can be longer
// than this run on the whole blob.
const maxAnchoredLen = 64 << 10

func compile(m *merged) (*RuleSet, error) {
	rs := &RuleSet{title: m.title, minVersion: m.minVersion, warnings: cloneStrings(m.warnings), maintained: m.maintained}
	sorted := append([]Rule(nil), m.rules...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	index := make(map[string]int32, len(sorted))
	for i, r := range sorted {
		index[r.ID] = int32(i)
	}

	for i, r := range sorted {
		cr, err := compileRule(r, index, &rs.nAllow)
		if err != nil {
			return nil, err
		}
		cr.idx = int32(i)
		rs.rules = append(rs.rules, cr)
	}
	for i, a := range m.allowlists {
		ca, err := compileAllowlist(a, fmt.Sprintf("global allowlist #%d", i+1), true, index, &rs.nAllow)
		if err != nil {
			return nil, err
		}
		rs.global = append(rs.global, ca)
	}
	for _, r := range rs.rules {
		for _, g := range rs.global {
			if g.targets == nil || g.targets[r.ID] {
				r.global = append(r.global, g)
			}
		}
	}
	needed := rs.neededRules()
	rs.indexRules(needed)
	rs.warnings = append(rs.warnings, unusedRuleWarnings(rs.rules, needed)...)
	rs.hash = hashRules(rs.rules, m.allowlists)
	return rs, nil
}

// neededRules marks the rules that can contribute a finding: the reported
// ones, and those a reported composite rule requires. (The required rules
// of a required rule are not checked, as in gitleaks.)
func (rs *RuleSet) neededRules() []bool {
	needed := make([]bool, len(rs.rules))
	for _, r := range rs.rules {
		if !r.report {
			continue
		}
		needed[r.idx] = true
		for _, q := range r.req {
			needed[q.rule] = true
		}
	}
	return needed
}

// indexRules sorts the rules into the lists a scan runs from, and builds
// the keyword automaton: one for the whole set.
func (rs *RuleSet) indexRules(needed []bool) {
	kwID := map[string]int32{}
	var kws []string
	for _, r := range rs.rules {
		switch {
		case !needed[r.idx]:
			continue
		case r.re == nil:
			if r.report {
				rs.pathOnly = append(rs.pathOnly, r.idx)
			}
			continue
		case len(r.Keywords) == 0:
			if r.report {
				rs.noKeyword = append(rs.noKeyword, r.idx)
			}
			continue
		}
		for _, k := range r.Keywords {
			id, ok := kwID[k]
			if !ok {
				id = int32(len(kws))
				kwID[k] = id
				kws = append(kws, k)
				rs.kwRules = append(rs.kwRules, nil)
				rs.kwAnchRules = append(rs.kwAnchRules, nil)
			}
			// A rule that is only required runs when a composite rule
			// asks for it (runRequired), but its anchored candidates are
			// collected with everyone's.
			if r.report {
				rs.kwRules[id] = append(rs.kwRules[id], r.idx)
			}
			if r.mode == modeAnchored {
				rs.kwAnchRules[id] = append(rs.kwAnchRules[id], r.idx)
			}
		}
	}
	for _, r := range rs.rules {
		rs.composite = rs.composite || (r.report && len(r.req) > 0)
	}
	rs.kw = newKeywordMatcher(kws)
}

// unusedRuleWarnings names configuration that has no effect.
func unusedRuleWarnings(rules []*compiledRule, needed []bool) []string {
	var out []string
	for _, r := range rules {
		switch {
		case r.re == nil && len(r.Required) > 0:
			out = append(out, fmt.Sprintf("rule %q has a path and no regex: its required rules are ignored, as in gitleaks", r.ID))
		case !needed[r.idx]:
			out = append(out, fmt.Sprintf("rule %q has skipReport and no reported rule requires it: it never contributes a finding", r.ID))
		}
	}
	return out
}

func compileRule(r Rule, index map[string]int32, nAllow *int) (*compiledRule, error) {
	cr := &compiledRule{Rule: r, generic: strings.Contains(strings.ToLower(r.ID), "generic"), report: !r.SkipReport}
	if r.Regex == "" && r.Path == "" {
		return nil, fmt.Errorf("scan: rule %q has neither regex nor path", r.ID)
	}
	if r.Entropy < 0 || math.IsNaN(r.Entropy) || math.IsInf(r.Entropy, 0) {
		return nil, fmt.Errorf("scan: rule %q: entropy must be a non-negative number", r.ID)
	}
	if r.Path != "" {
		re, err := compileRegex(r.Path)
		if err != nil {
			return nil, fmt.Errorf("scan: rule %q: path: %w", r.ID, err)
		}
		cr.path = newFilteredRegex(re)
	}
	if r.Regex != "" {
		re, err := compileRegex(r.Regex)
		if err != nil {
			return nil, fmt.Errorf("scan: rule %q: regex: %w", r.ID, err)
		}
		cr.re = re
		if r.SecretGroup < 0 || r.SecretGroup > re.NumSubexp() {
			return nil, fmt.Errorf("scan: rule %q: secretGroup %d, but the regex has %d capture group(s)", r.ID, r.SecretGroup, re.NumSubexp())
		}
		if cr.plan = planAnchored(r.Regex, r.Keywords); cr.plan != nil {
			cr.mode = modeAnchored
		}
	} else {
		if r.SecretGroup != 0 || r.Entropy != 0 {
			return nil, fmt.Errorf("scan: rule %q: secretGroup and entropy need a regex", r.ID)
		}
	}
	for i, a := range r.Allowlists {
		ca, err := compileAllowlist(a, fmt.Sprintf("rule %q: allowlist #%d", r.ID, i+1), false, index, nAllow)
		if err != nil {
			return nil, err
		}
		cr.allow = append(cr.allow, ca)
	}
	req, err := compileRequired(r, index)
	if err != nil {
		return nil, err
	}
	if cr.re != nil { // gitleaks ignores the required rules of a path-only rule
		cr.req = req
	}
	return cr, nil
}

func compileRequired(r Rule, index map[string]int32) ([]compiledReq, error) {
	var out []compiledReq
	for _, q := range r.Required {
		i, ok := index[q.ID]
		if !ok {
			return nil, fmt.Errorf("scan: rule %q: required rule %q does not exist", r.ID, q.ID)
		}
		lines, err := withinBound(q.WithinLines)
		if err != nil {
			return nil, fmt.Errorf("scan: rule %q: required rule %q: withinLines %w", r.ID, q.ID, err)
		}
		cols, err := withinBound(q.WithinColumns)
		if err != nil {
			return nil, fmt.Errorf("scan: rule %q: required rule %q: withinColumns %w", r.ID, q.ID, err)
		}
		out = append(out, compiledReq{rule: i, lines: lines, cols: cols})
	}
	return out, nil
}

// withinBound turns an optional distance into a bound, -1 for none.
// gitleaks accepts a negative one, which no match can satisfy; it is
// refused here as the mistake it must be.
func withinBound(p *int) (int, error) {
	switch {
	case p == nil:
		return -1, nil
	case *p < 0:
		return 0, fmt.Errorf("%d is negative", *p)
	}
	return *p, nil
}

func compileAllowlist(a Allowlist, where string, global bool, index map[string]int32, nAllow *int) (*compiledAllowlist, error) {
	ca := &compiledAllowlist{src: a, idx: *nAllow}
	*nAllow++
	switch a.Condition {
	case "OR":
	case "AND":
		ca.and = true
	default:
		return nil, fmt.Errorf("scan: %s: condition %q (want \"OR\" or \"AND\")", where, a.Condition)
	}
	switch a.RegexTarget {
	case "secret":
		ca.target = targetSecret
	case "match":
		ca.target = targetMatch
	case "line":
		ca.target = targetLine
	default:
		return nil, fmt.Errorf("scan: %s: regexTarget %q (want \"secret\", \"match\" or \"line\")", where, a.RegexTarget)
	}
	if len(a.Commits)+len(a.Paths)+len(a.Regexes)+len(a.StopWords) == 0 {
		return nil, fmt.Errorf("scan: %s has no commits, paths, regexes or stopwords", where)
	}
	if len(a.Commits) > 0 {
		ca.commits = make(map[string]bool, len(a.Commits))
		for _, c := range a.Commits {
			ca.commits[lowerASCII(strings.TrimSpace(c))] = true
		}
	}
	var err error
	if ca.paths, err = compileJoined(a.Paths, where, "path"); err != nil {
		return nil, err
	}
	if ca.regex, err = compileJoined(a.Regexes, where, "regex"); err != nil {
		return nil, err
	}
	for _, w := range a.StopWords {
		if w == "" {
			return nil, fmt.Errorf("scan: %s: empty stopword", where)
		}
		ca.stops = append(ca.stops, []byte(w))
	}
	if len(a.TargetRules) > 0 {
		if !global {
			return nil, fmt.Errorf("scan: %s: targetRules belongs in a global allowlist", where)
		}
		ca.targets = map[string]bool{}
		for _, id := range a.TargetRules {
			if _, ok := index[id]; !ok {
				return nil, fmt.Errorf("scan: %s: targetRules names unknown rule %q", where, id)
			}
			ca.targets[id] = true
		}
	}
	return ca, nil
}

// compileJoined compiles an allowlist's paths or regexes as gitleaks does:
// into one regex, the alternation of them all. That is not only faster: an
// inline flag at the top level of one pattern, like a leading (?i), applies
// to the patterns after it too, and gitleaks' own default allowlists rely
// on that. Each pattern is compiled alone first, so that an error names the
// one at fault.
func compileJoined(patterns []string, where, what string) (*filteredRegex, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	for _, p := range patterns {
		if _, err := compileRegex(p); err != nil {
			return nil, fmt.Errorf("scan: %s: %s: %w", where, what, err)
		}
	}
	re, err := compileRegex("(?:" + strings.Join(patterns, "|") + ")")
	if err != nil {
		return nil, fmt.Errorf("scan: %s: the %ss joined: %w", where, what, err)
	}
	return newFilteredRegex(re), nil
}

// compileRegex compiles with Go's RE2 syntax and explains the constructs it
// lacks, which configurations written for PCRE-style engines use.
func compileRegex(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err == nil {
		return re, nil
	}
	var se *syntax.Error
	if errors.As(err, &se) {
		switch {
		case strings.HasPrefix(se.Expr, "(?="), strings.HasPrefix(se.Expr, "(?!"),
			strings.HasPrefix(se.Expr, "(?<="), strings.HasPrefix(se.Expr, "(?<!"):
			return nil, fmt.Errorf("look-around %q is not supported: Go's regexp (RE2) has no look-ahead or look-behind; rewrite the regex without it (e.g. match the context and use secretGroup, or add an allowlist): %w", se.Expr, err)
		case se.Code == syntax.ErrInvalidEscape && len(se.Expr) == 2 && se.Expr[1] >= '1' && se.Expr[1] <= '9':
			return nil, fmt.Errorf("back-reference %q is not supported by Go's regexp (RE2): %w", se.Expr, err)
		case strings.HasPrefix(se.Expr, "(?>"):
			return nil, fmt.Errorf("atomic group %q is not supported by Go's regexp (RE2): %w", se.Expr, err)
		}
	}
	return nil, err
}
