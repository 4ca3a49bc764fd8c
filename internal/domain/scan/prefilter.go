package scan

import (
	"regexp"
	"regexp/syntax"
	"slices"
)

// filteredRegex is a regex with a literal prefilter: text that holds none
// of the literals every match of the regex contains cannot match, and the
// regex does not run. Go's regexp takes microseconds per path for
// allowlists like gitleaks' (25 patterns joined), and a scan asks for every
// blob; most paths hold none of their literals, which one pass of a
// keywordMatcher finds. The same goes for allowlist regexes on a finding's
// line, which in minified or encoded files is the whole blob.
type filteredRegex struct {
	re *regexp.Regexp
	// lits finds the literals, ASCII case-insensitively (matching more than
	// the regex's exact literals only lets more text through); nil: no
	// prefilter.
	lits *keywordMatcher
}

// maxLiterals bounds a prefilter's literals.
const maxLiterals = 256

func newFilteredRegex(re *regexp.Regexp) *filteredRegex {
	m := &filteredRegex{re: re}
	if tree, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
		if lits := requiredLiterals(tree); lits != nil {
			m.lits = newKeywordMatcher(lits)
		}
	}
	return m
}

func (m *filteredRegex) MatchString(s string) bool {
	return mayMatch(m, s) && m.re.MatchString(s)
}

func (m *filteredRegex) Match(b []byte) bool {
	return mayMatch(m, b) && m.re.Match(b)
}

// mayMatch reports whether text holds one of the literals, or may match
// anyway: text with non-ASCII runes skips the prefilter (under (?i) some
// fold to ASCII letters: K to k, ſ to s).
func mayMatch[T string | []byte](m *filteredRegex, text T) bool {
	return m.lits == nil || !isASCII(text) || contains(m.lits, text)
}

// requiredLiterals returns (ASCII-lowered) literals one of which every
// match of re contains; nil if it finds none.
func requiredLiterals(re *syntax.Regexp) []string { return required(re, 0) }

// maxDistribute bounds how deep required rewrites a concatenation around
// an alternation in it (each level multiplies the work).
const maxDistribute = 2

func required(re *syntax.Regexp, depth int) []string {
	if set, ok := exact(re); ok {
		return nonEmpty(set)
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0], depth)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0], depth)
		}
	case syntax.OpConcat:
		return requiredConcat(flatten(re.Sub), depth)
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			lits := required(sub, depth)
			if lits == nil || len(all)+len(lits) > maxLiterals {
				return nil
			}
			all = append(all, lits...)
		}
		return all
	}
	return nil
}

// requiredConcat is required of the concatenation of subs: the most
// selective of any part's literals, of the strings a run of parts with few
// possible matches spells, and of the concatenation rewritten as an
// alternation of concatenations (a(b|c)d as abd|acd, so that literals
// join across the alternation).
func requiredConcat(subs []*syntax.Regexp, depth int) []string {
	var best []string
	consider := func(lits []string) {
		if lits != nil && better(lits, best) {
			best = lits
		}
	}
	for i, sub := range subs {
		consider(required(sub, depth))
		run, ok := exact(sub)
		for j := i + 1; ok && j < len(subs); j++ {
			next, nok := exact(subs[j])
			if !nok {
				break
			}
			if run, ok = cross(run, next); ok {
				consider(nonEmpty(run))
			}
		}
	}
	if depth >= maxDistribute {
		return best
	}
	for i, sub := range subs {
		if sub.Op != syntax.OpAlternate {
			continue
		}
		var all []string
		for _, alt := range sub.Sub {
			parts := append(append(append([]*syntax.Regexp(nil), subs[:i]...), alt), subs[i+1:]...)
			lits := requiredConcat(flatten(parts), depth+1)
			if lits == nil || len(all)+len(lits) > maxLiterals {
				all = nil
				break
			}
			all = append(all, lits...)
		}
		consider(all)
		break
	}
	return best
}

// flatten inlines the concatenations (and groups) among subs.
func flatten(subs []*syntax.Regexp) []*syntax.Regexp {
	var out []*syntax.Regexp
	for _, s := range subs {
		for s.Op == syntax.OpCapture {
			s = s.Sub[0]
		}
		if s.Op == syntax.OpConcat {
			out = append(out, flatten(s.Sub)...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// nonEmpty is lits if none is empty (what can match "" requires nothing),
// else nil.
func nonEmpty(lits []string) []string {
	if len(lits) == 0 || slices.Contains(lits, "") {
		return nil
	}
	return lits
}

// better reports whether literals a filter more than b: a longer shortest
// literal, then fewer of them.
func better(a, b []string) bool {
	if b == nil {
		return true
	}
	if la, lb := shortest(a), shortest(b); la != lb {
		return la > lb
	}
	return len(a) < len(b)
}

func shortest(lits []string) int {
	n := len(lits[0])
	for _, l := range lits[1:] {
		n = min(n, len(l))
	}
	return n
}

func isASCII[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
