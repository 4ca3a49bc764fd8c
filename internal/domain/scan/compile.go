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
	path   *regexp.Regexp // nil when the rule has no path
	allow  []*compiledAllowlist
	global []*compiledAllowlist // the global allowlists that apply to this rule
	mode   matchMode
	plan   *anchoredPlan // modeAnchored only
	// generic rules (an id containing "generic", as gitleaks decides) give
	// way to a specific rule that found the same secret.
	generic bool
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
	paths   []*regexp.Regexp
	regexes []*regexp.Regexp
	target  regexTarget
	stops   [][]byte
	targets map[string]bool // global only; nil = every rule
}

// maxAnchoredLen bounds anchored matching: rules whose matches can be longer
// than this run on the whole blob.
const maxAnchoredLen = 64 << 10

func compile(m *merged) (*RuleSet, error) {
	rs := &RuleSet{title: m.title}
	ids := make(map[string]bool, len(m.rules))
	for _, r := range m.rules {
		ids[r.ID] = true
	}
	sorted := append([]Rule(nil), m.rules...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })

	for i, r := range sorted {
		cr, err := compileRule(r, ids, &rs.nAllow)
		if err != nil {
			return nil, err
		}
		cr.idx = int32(i)
		rs.rules = append(rs.rules, cr)
	}
	for i, a := range m.allowlists {
		ca, err := compileAllowlist(a, fmt.Sprintf("global allowlist #%d", i+1), true, ids, &rs.nAllow)
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

	// Keywords: one automaton for the whole set.
	kwID := map[string]int32{}
	var kws []string
	for _, r := range rs.rules {
		switch {
		case r.re == nil:
			rs.pathOnly = append(rs.pathOnly, r.idx)
			continue
		case len(r.Keywords) == 0:
			rs.noKeyword = append(rs.noKeyword, r.idx)
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
			rs.kwRules[id] = append(rs.kwRules[id], r.idx)
			if r.mode == modeAnchored {
				rs.kwAnchRules[id] = append(rs.kwAnchRules[id], r.idx)
			}
		}
	}
	rs.kw = newKeywordMatcher(kws)
	rs.hash = hashRules(rs.rules, m.allowlists)
	return rs, nil
}

func compileRule(r Rule, ids map[string]bool, nAllow *int) (*compiledRule, error) {
	cr := &compiledRule{Rule: r, generic: strings.Contains(strings.ToLower(r.ID), "generic")}
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
		cr.path = re
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
		ca, err := compileAllowlist(a, fmt.Sprintf("rule %q: allowlist #%d", r.ID, i+1), false, ids, nAllow)
		if err != nil {
			return nil, err
		}
		cr.allow = append(cr.allow, ca)
	}
	return cr, nil
}

func compileAllowlist(a Allowlist, where string, global bool, ids map[string]bool, nAllow *int) (*compiledAllowlist, error) {
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
	for _, p := range a.Paths {
		re, err := compileRegex(p)
		if err != nil {
			return nil, fmt.Errorf("scan: %s: path: %w", where, err)
		}
		ca.paths = append(ca.paths, re)
	}
	for _, p := range a.Regexes {
		re, err := compileRegex(p)
		if err != nil {
			return nil, fmt.Errorf("scan: %s: regex: %w", where, err)
		}
		ca.regexes = append(ca.regexes, re)
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
			if !ids[id] {
				return nil, fmt.Errorf("scan: %s: targetRules names unknown rule %q", where, id)
			}
			ca.targets[id] = true
		}
	}
	return ca, nil
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
