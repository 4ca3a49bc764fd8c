package scan

import (
	"regexp"
	"regexp/syntax"
	"slices"
)

// pathMatcher is a path regex with a literal prefilter: a path that holds
// none of the literals every match of the regex contains cannot match, and
// the regex does not run. Go's regexp takes microseconds per path for
// allowlists like gitleaks' (25 patterns joined), and a scan asks for every
// blob; most paths hold none of their literals, which one pass of a
// keywordMatcher finds.
type pathMatcher struct {
	re *regexp.Regexp
	// lits finds the literals (ASCII case-insensitively: matching more
	// than the regex's exact literals only lets more paths through); nil:
	// no prefilter.
	lits *keywordMatcher
	// fold: some literal is case-folded, and a path with non-ASCII
	// runes skips the prefilter (they may fold to ASCII: K, ſ).
	fold bool
}

// literal is a string a match must contain; fold: ASCII, matched case
// insensitively (s is lower case).
type literal struct {
	s    string
	fold bool
}

// Bounds of the literal analysis: the strings a part of a regex spells out
// (exactSet), and the literals of a prefilter.
const (
	maxExact    = 32
	maxLiterals = 256
)

func newPathMatcher(re *regexp.Regexp) *pathMatcher {
	m := &pathMatcher{re: re}
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return m
	}
	lits := requiredLiterals(tree)
	if lits == nil {
		return m
	}
	kws := make([]string, len(lits))
	for i, l := range lits {
		kws[i] = lowerASCII(l.s)
		m.fold = m.fold || l.fold
	}
	m.lits = newKeywordMatcher(kws)
	return m
}

func (m *pathMatcher) MatchString(path string) bool {
	return m.mayMatch(path) && m.re.MatchString(path)
}

// mayMatch reports whether path holds one of the literals (or there are
// none to check).
func (m *pathMatcher) mayMatch(path string) bool {
	return m.lits == nil || (m.fold && !isASCII(path)) || m.lits.contains(path)
}

// requiredLiterals returns literals one of which every match of re
// contains; nil if it finds none.
func requiredLiterals(re *syntax.Regexp) []literal { return required(re, 0) }

// maxDistribute bounds how deep required rewrites a concatenation around
// an alternation in it (each level multiplies the work).
const maxDistribute = 2

func required(re *syntax.Regexp, depth int) []literal {
	if set, ok := exactSet(re); ok {
		if set = nonEmpty(set); set != nil {
			return set
		}
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
		var all []literal
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
func requiredConcat(subs []*syntax.Regexp, depth int) []literal {
	var best []literal
	consider := func(lits []literal) {
		if lits != nil && better(lits, best) {
			best = lits
		}
	}
	for i, sub := range subs {
		consider(required(sub, depth))
		run, ok := exactSet(sub)
		for j := i + 1; ok && j < len(subs); j++ {
			next, nok := exactSet(subs[j])
			if !nok {
				break
			}
			if run, ok = product(run, next); ok {
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
		var all []literal
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

// exactSet returns every string re can match, if they are few (an
// anchor matches ""); ok false if not.
func exactSet(re *syntax.Regexp) ([]literal, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []literal{{}}, true
	case syntax.OpLiteral:
		fold := re.Flags&syntax.FoldCase != 0
		s := string(re.Rune)
		if fold {
			if !isASCII(s) {
				return nil, false
			}
			s = lowerASCII(s)
		}
		return []literal{{s, fold}}, true
	case syntax.OpCharClass:
		var set []literal
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(set) == 4 {
					return nil, false
				}
				set = append(set, literal{s: string(r)})
			}
		}
		return set, len(set) > 0
	case syntax.OpCapture:
		return exactSet(re.Sub[0])
	case syntax.OpQuest:
		set, ok := exactSet(re.Sub[0])
		return append(set, literal{}), ok && len(set) < maxExact
	case syntax.OpAlternate:
		var all []literal
		for _, sub := range re.Sub {
			set, ok := exactSet(sub)
			if !ok || len(all)+len(set) > maxExact {
				return nil, false
			}
			all = append(all, set...)
		}
		return all, true
	case syntax.OpConcat:
		all := []literal{{}}
		for _, sub := range re.Sub {
			set, ok := exactSet(sub)
			if !ok {
				return nil, false
			}
			if all, ok = product(all, set); !ok {
				return nil, false
			}
		}
		return all, true
	}
	return nil, false
}

// product is every string of a followed by one of b, if not too many. A
// string with a folded part is folded whole: lowercasing what must match
// exactly only makes the prefilter let more through.
func product(a, b []literal) ([]literal, bool) {
	if len(a)*len(b) > maxExact {
		return nil, false
	}
	out := make([]literal, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			l := literal{x.s + y.s, x.fold || y.fold}
			if l.fold {
				l.s = lowerASCII(l.s)
			}
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out, true
}

// nonEmpty is lits if none is empty (a run that can match "" requires
// nothing), else nil.
func nonEmpty(lits []literal) []literal {
	if slices.ContainsFunc(lits, func(l literal) bool { return l.s == "" }) {
		return nil
	}
	return lits
}

// better reports whether literals a filter more than b: a longer shortest
// literal, then fewer of them.
func better(a, b []literal) bool {
	if b == nil {
		return true
	}
	if la, lb := shortest(a), shortest(b); la != lb {
		return la > lb
	}
	return len(a) < len(b)
}

func shortest(lits []literal) int {
	n := len(lits[0].s)
	for _, l := range lits[1:] {
		n = min(n, len(l.s))
	}
	return n
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
