package scan

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Anchored matching at candidate starts.
//
// gitleaks runs a rule's regex on the whole blob once any of its keywords
// occurs anywhere in it. For a rule whose keyword is common ("token",
// "secret") that is an unanchored NFA or backtracking pass over every large
// source file that mentions it. When we can prove from the regex alone that
//
//  1. every match M contains an occurrence K of one of the rule's keywords
//     (ASCII case-insensitively, the way the prefilter finds them), with
//     K.start-before <= M.start for a finite bound before, and
//  2. no match is longer than maxLen bytes,
//
// then every match starts in one of the small ranges [K.start-before,
// K.start] around the keyword occurrences, and we try the regex anchored at
// just those positions (and only where the first byte can start a match, and
// at rune boundaries), left to right, resuming after each match, as
// FindAll does. An attempt at s runs `\A(?s:.)(?:regex)` on
// content[s-1 : s+maxLen+4]: the leading rune gives \b, \B and ^ the
// context the whole-blob run sees, and since no match reaches the cut, the
// cut is never seen by $, \b or \z either. The matches are therefore exactly
// those of a whole-blob run (TestAnchoredEqualsWhole checks it on random
// input), at a fraction of the cost.
//
// The one approximation is shared with the keyword prefilter itself: case
// folding is ASCII only, so (?i)k also matching U+212A KELVIN SIGN (and s,
// U+017F) is ignored.

// anchoredPlan is how a rule runs in modeAnchored.
type anchoredPlan struct {
	before int       // a match starts at most before bytes before a keyword occurrence
	maxLen int       // longest possible match, in bytes; -1: unbounded
	first  [256]bool // bytes a match can start with
	// atZero is \A(?:regex), for a start at offset 0; inText is
	// \A(?s:.)(?:regex), for a later start: one rune of context first.
	// What is rarely needed (a start at offset 0, the whole regex of a
	// split plan) is compiled when first needed: a compiled regex of
	// gitleaks' is tens of kilobytes, and a worker keeps every rule's.
	atZero, inText *lazyRegex
	// lead, when set, splits off a leading lazy run of a character class:
	// before, first, atZero and inText are then those of the rest of the
	// regex, and whole holds the plan of the regex as written.
	lead  *leadRun
	whole *anchoredPlan
}

// leadRun is a regex's leading `C{0,max}?`: a lazy run of characters of an
// ASCII class C. gitleaks' semi-generic rules all start with one
// (`[\w.-]{0,50}?` before the identifier), and it is what makes them slow to
// try at every start: a match may begin up to max bytes before the keyword.
//
// Split off, the rest R is tried at the keyword occurrences only, and where
// R matches at j the whole match is found without running the regex again:
// by leftmost-first semantics (the lazy run prefers fewer characters) the
// leftmost match of `C{0,max}?R` at or after a position p starts at the
// smallest s >= p that reaches, through characters of C and at most max of
// them, a position j where R matches; and then it uses the first such j.
// Tried in increasing order, the first j where R matches (j >= p) gives that
// s — the run of C before it, cut at p and at max — because an earlier j'
// where R matched would give an s no later. So the match is [s, end of R at
// j), with R's groups (the run has none).
type leadRun struct {
	class    [128]bool
	max      int
	nonASCII bool // C also holds non-ASCII runes (under (?i): ſ and K fold to s and k)
}

// planAnchored decides whether a keyword rule can run anchored at candidate
// starts, and prepares it.
func planAnchored(expr string, keywords []string) *anchoredPlan {
	if len(keywords) == 0 {
		return nil
	}
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	p := planTree(tree, expr, keywords)
	if p == nil {
		return nil
	}
	if lead, rest := splitLead(tree); lead != nil {
		if r := planTree(rest, rest.String(), keywords); r != nil {
			r.lead, r.whole = lead, p
			r.inText.get()
			return r
		}
	}
	p.inText.get()
	return p
}

func planTree(tree *syntax.Regexp, expr string, keywords []string) *anchoredPlan {
	maxLen := maxMatchLen(tree)
	if maxLen > maxAnchoredLen {
		maxLen = -1
	}
	ok, before := newKwAnalyzer(keywords).good(tree, []string{""})
	if !ok || before < 0 {
		return nil
	}
	first, nullable := firstBytes(tree)
	if nullable {
		return nil // cannot happen for a rule whose matches contain a keyword
	}
	inText := &lazyRegex{expr: `\A(?s:.)(?:` + expr + `)`}
	if _, err := regexp.Compile(inText.expr); err != nil {
		return nil // atZero's expression is a suffix of it: that compiles too
	}
	if maxLen >= 0 {
		before = min(before, maxLen)
	}
	return &anchoredPlan{before: before, maxLen: maxLen, first: first, atZero: &lazyRegex{expr: `\A(?:` + expr + `)`}, inText: inText}
}

// lazyRegex is a regex compiled when first used (its expression is known
// to compile).
type lazyRegex struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

func (l *lazyRegex) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re
}

// splitLead splits a regex `C{0,n}?R` (C an ASCII class, as (?i) leaves
// it, R without the run) into its lead and R.
func splitLead(tree *syntax.Regexp) (*leadRun, *syntax.Regexp) {
	if tree.Op != syntax.OpConcat || len(tree.Sub) < 2 {
		return nil, nil
	}
	run := tree.Sub[0]
	if run.Op != syntax.OpRepeat || run.Min != 0 || run.Max < 1 || run.Flags&syntax.NonGreedy == 0 ||
		run.Sub[0].Op != syntax.OpCharClass {
		return nil, nil
	}
	lead := &leadRun{max: run.Max}
	cls := run.Sub[0].Rune
	for i := 0; i+1 < len(cls); i += 2 {
		for r := cls[i]; r <= cls[i+1]; r++ {
			if r >= utf8.RuneSelf {
				lead.nonASCII = true
				break
			}
			lead.class[r] = true
		}
	}
	rest := &syntax.Regexp{Op: syntax.OpConcat, Flags: tree.Flags, Sub: tree.Sub[1:]}
	if len(rest.Sub) == 1 {
		rest = rest.Sub[0]
	}
	return lead, rest
}

// attempt runs the plan's regex anchored at st and returns its submatch
// indexes relative to off, or nil.
func (p *anchoredPlan) attempt(content []byte, st int) (m []int, off int) {
	end := len(content)
	if p.maxLen >= 0 {
		end = min(end, st+p.maxLen+utf8.UTFMax)
	}
	if st == 0 {
		m = p.atZero.get().FindSubmatchIndex(content[:end])
	} else {
		off = st - 1
		m = p.inText.get().FindSubmatchIndex(content[off:end])
	}
	if m == nil || m[1]+off <= st {
		return nil, 0
	}
	return m, off
}

// firstAttempt tries the plan's regex at every start from lo to hi and
// returns the first match.
func (p *anchoredPlan) firstAttempt(content []byte, lo, hi int) (m []int, off, start int) {
	for st := lo; st <= hi; st++ {
		if p.first[content[st]] && runeStart(content, st) {
			if m, off = p.attempt(content, st); m != nil {
				return m, off, st
			}
		}
	}
	return nil, 0, 0
}

// leadStart is where the whole match starts when the rest matched at j and
// the previous match ended at next: the run of C before j, at most max
// long. ok is false when a non-ASCII byte that may belong to C stops the
// run; the caller then tries the whole regex instead.
func (l *leadRun) leadStart(content []byte, next, j int) (s int, ok bool) {
	lim := max(next, j-l.max)
	s = j
	for s > lim {
		c := content[s-1]
		if c >= utf8.RuneSelf {
			return s, !l.nonASCII
		}
		if !l.class[c] {
			break
		}
		s--
	}
	return s, true
}

// maxMatchLen is an upper bound, in bytes, of the length of any match; -1 if
// unbounded.
func maxMatchLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				n += maxFoldLen(r)
			} else {
				n += runeLen(r)
			}
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return runeLen(re.Rune[len(re.Rune)-1]) // ranges are sorted
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxMatchLen(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		if maxMatchLen(re.Sub[0]) == 0 {
			return 0
		}
		return -1
	case syntax.OpRepeat:
		n := maxMatchLen(re.Sub[0])
		if n <= 0 {
			return n
		}
		if re.Max < 0 {
			return -1
		}
		return n * re.Max
	case syntax.OpConcat:
		total := 0
		for _, s := range re.Sub {
			n := maxMatchLen(s)
			if n < 0 {
				return -1
			}
			total += n
			if total > 1<<30 {
				return -1
			}
		}
		return total
	case syntax.OpAlternate:
		best := 0
		for _, s := range re.Sub {
			n := maxMatchLen(s)
			if n < 0 {
				return -1
			}
			best = max(best, n)
		}
		return best
	}
	return -1
}

func runeLen(r rune) int {
	if n := utf8.RuneLen(r); n > 0 {
		return n
	}
	return utf8.UTFMax
}

func maxFoldLen(r rune) int {
	n := runeLen(r)
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		n = max(n, runeLen(f))
	}
	return n
}

// kwAnalyzer proves that every match of a regex contains a keyword.
type kwAnalyzer struct {
	kws  []string
	keep int // how much of a keyword-free left context can still take part in a keyword
}

func newKwAnalyzer(kws []string) *kwAnalyzer {
	a := &kwAnalyzer{kws: kws}
	for _, k := range kws {
		a.keep = max(a.keep, len(k)-1)
	}
	return a
}

const maxExactSet = 256

func (a *kwAnalyzer) contains(s string) bool {
	for _, k := range a.kws {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// exact returns the finite set of (ASCII-lowered) strings the node matches,
// when it is small.
func exact(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpNoMatch:
		return []string{}, true
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, true
	case syntax.OpLiteral:
		var b strings.Builder
		for _, r := range re.Rune {
			switch {
			case r < utf8.RuneSelf:
				b.WriteByte(lowerByte(byte(r)))
			case re.Flags&syntax.FoldCase != 0:
				return nil, false
			default:
				b.WriteRune(r)
			}
		}
		return []string{b.String()}, true
	case syntax.OpCharClass:
		var set []byte
		has := func(c rune) bool {
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if re.Rune[i] <= c && c <= re.Rune[i+1] {
					return true
				}
			}
			return false
		}
		hasS, hasK := has('s') || has('S'), has('k') || has('K')
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi-lo > 64 {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				if (r == 0x17F && hasS) || (r == 0x212A && hasK) {
					continue // the fold partners of s and k; see the package comment
				}
				if r >= utf8.RuneSelf {
					return nil, false
				}
				c := lowerByte(byte(r))
				if bytes.IndexByte(set, c) < 0 {
					set = append(set, c)
				}
				if len(set) > 16 {
					return nil, false
				}
			}
		}
		out := make([]string, len(set))
		for i, c := range set {
			out[i] = string(c)
		}
		return out, true
	case syntax.OpCapture:
		return exact(re.Sub[0])
	case syntax.OpQuest:
		s, ok := exact(re.Sub[0])
		if !ok {
			return nil, false
		}
		return union([]string{""}, s)
	case syntax.OpRepeat:
		if re.Max < 0 || re.Max > 4 {
			return nil, false
		}
		s, ok := exact(re.Sub[0])
		if !ok {
			return nil, false
		}
		var out []string
		pow := []string{""}
		for k := 0; k <= re.Max; k++ {
			if k >= re.Min {
				if out, ok = union(out, pow); !ok {
					return nil, false
				}
			}
			if pow, ok = cross(pow, s); !ok {
				return nil, false
			}
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			s, ok := exact(sub)
			if !ok {
				return nil, false
			}
			if out, ok = cross(out, s); !ok {
				return nil, false
			}
		}
		return out, true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s, ok := exact(sub)
			if !ok {
				return nil, false
			}
			if out, ok = union(out, s); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

func cross(a, b []string) ([]string, bool) {
	if len(a)*len(b) > maxExactSet {
		return nil, false
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if s := x + y; !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out, true
}

func union(a, b []string) ([]string, bool) {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, len(out) <= maxExactSet
}

// extend appends each string of ex to each left context; contexts that now
// contain a keyword are done and dropped, the others keep only the tail that
// can still be part of a keyword occurrence.
func (a *kwAnalyzer) extend(left, ex []string) ([]string, bool) {
	if len(left)*len(ex) > 4*maxExactSet {
		return nil, false
	}
	var out []string
	for _, l := range left {
		for _, e := range ex {
			s := l + e
			if a.contains(s) {
				continue
			}
			if len(s) > a.keep {
				s = s[len(s)-a.keep:]
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out, len(out) <= maxExactSet
}

// good reports whether every match of re, preceded by any of the left
// contexts (keyword-free tails of what the match is known to follow),
// contains a keyword occurrence K. It is conservative: false means "not
// proven". It also bounds where K starts: at most `before` bytes after the
// start of the match (-1: unbounded).
func (a *kwAnalyzer) good(re *syntax.Regexp, left []string) (ok bool, before int) {
	if len(left) == 0 {
		return true, 0
	}
	if ex, ok := exact(re); ok {
		rest, ok := a.extend(left, ex)
		return ok && len(rest) == 0, maxMatchLen(re)
	}
	switch re.Op {
	case syntax.OpCapture:
		return a.good(re.Sub[0], left)
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			ok, b := a.good(sub, left)
			if !ok {
				return false, 0
			}
			before = maxBound(before, b)
		}
		return true, before
	case syntax.OpPlus, syntax.OpRepeat:
		// The first repetition follows the left context.
		if re.Op == syntax.OpRepeat && re.Min < 1 {
			return false, 0
		}
		return a.good(re.Sub[0], left)
	case syntax.OpConcat:
		lens := make([]int, len(re.Sub))
		for i, sub := range re.Sub {
			lens[i] = maxMatchLen(sub)
		}
		cur := left
		for i, sub := range re.Sub {
			if ex, ok := exact(sub); ok {
				if i == 0 && len(left) == 1 && left[0] == "" {
					if b, ok := a.firstStart(ex); ok {
						return true, b // every match starts with one of ex
					}
				}
				next, ok := a.extend(cur, ex)
				if !ok {
					next, ok = a.extend([]string{""}, ex)
				}
				if ok {
					if len(next) == 0 {
						return true, sumBound(lens[:i+1]) // K ends within child i
					}
					cur = next
					continue
				}
			} else if ok, b := a.good(sub, cur); ok {
				return true, addBound(sumBound(lens[:i]), b)
			}
			cur = []string{""} // nothing known about what the next part follows
		}
		return false, 0
	}
	return false, 0
}

// firstStart is the largest offset, over the strings of ex, of the first
// keyword occurrence in each; ok is false when one has none.
func (a *kwAnalyzer) firstStart(ex []string) (before int, ok bool) {
	for _, s := range ex {
		first := -1
		for _, k := range a.kws {
			if i := strings.Index(s, k); i >= 0 && (first < 0 || i < first) {
				first = i
			}
		}
		if first < 0 {
			return 0, false
		}
		before = max(before, first)
	}
	return before, true
}

func addBound(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	return a + b
}

func maxBound(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

func sumBound(ns []int) int {
	total := 0
	for _, n := range ns {
		if total = addBound(total, n); total < 0 || total > 1<<30 {
			return -1
		}
	}
	return total
}

// firstBytes is the set of bytes a match can begin with, and whether the
// regex can match the empty string (then the set is meaningless).
func firstBytes(re *syntax.Regexp) (set [256]bool, nullable bool) {
	addRune := func(r rune) {
		if r < utf8.RuneSelf {
			set[r] = true
			return
		}
		var buf [utf8.UTFMax]byte
		utf8.EncodeRune(buf[:], r)
		set[buf[0]] = true
		if r == utf8.RuneError { // also matches any invalid byte
			for b := 0x80; b < 0x100; b++ {
				set[b] = true
			}
		}
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return set, false
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return set, true
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return set, true
		}
		r := re.Rune[0]
		addRune(r)
		if re.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				addRune(f)
			}
		}
		return set, false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
				set[r] = true
			}
			if hi >= utf8.RuneSelf {
				for b := 0xC2; b <= 0xF4; b++ { // every lead byte: conservative
					set[b] = true
				}
				if lo <= utf8.RuneError && utf8.RuneError <= hi {
					addRune(utf8.RuneError)
				}
			}
		}
		return set, false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		for b := range set {
			set[b] = true
		}
		if re.Op == syntax.OpAnyCharNotNL {
			set['\n'] = false
		}
		return set, false
	case syntax.OpCapture, syntax.OpPlus:
		return firstBytes(re.Sub[0])
	case syntax.OpStar, syntax.OpQuest:
		set, _ = firstBytes(re.Sub[0])
		return set, true
	case syntax.OpRepeat:
		set, nullable = firstBytes(re.Sub[0])
		return set, nullable || re.Min == 0
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			s, n := firstBytes(sub)
			for b, ok := range s {
				set[b] = set[b] || ok
			}
			if !n {
				return set, false
			}
		}
		return set, true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			s, n := firstBytes(sub)
			for b, ok := range s {
				set[b] = set[b] || ok
			}
			nullable = nullable || n
		}
		return set, nullable
	}
	for b := range set {
		set[b] = true
	}
	return set, true
}

// span is a range of candidate starts, both ends inclusive.
type span struct{ lo, hi int }

// mergeSpans sorts and merges candidate ranges in place.
func mergeSpans(ss []span) []span {
	slices.SortFunc(ss, func(x, y span) int { return x.lo - y.lo })
	out := ss[:0]
	for _, s := range ss {
		if n := len(out); n > 0 && s.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// runeStart reports whether s is where a rune starts when content is decoded
// from its beginning, as the regexp package does (an invalid byte is a rune
// of its own).
func runeStart(content []byte, s int) bool {
	if s == 0 || s >= len(content) || utf8.RuneStart(content[s]) {
		return true
	}
	for p := s - 1; p >= 0 && p >= s-(utf8.UTFMax-1); p-- {
		if utf8.RuneStart(content[p]) {
			_, w := utf8.DecodeRune(content[p:])
			return p+w <= s
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}
