package scan

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// extensionTOML is gitfleet's own rules: an extension of the maintained set
// (maintained.go) holding only rules that add measured recall without
// false positives (docs/architecture.md §8).
//
//go:embed extension.toml
var extensionTOML []byte

// GitleaksVersion is the gitleaks release whose configuration format this
// package implements: every key it accepts loads, with its meaning.
const GitleaksVersion = "v8.30.1"

// Rule is one detection rule as configured (normalised: keywords and
// stopwords lower-cased, conditions upper-cased, both allowlist forms merged).
type Rule struct {
	ID          string
	Description string
	Regex       string // empty for a path-only rule
	SecretGroup int
	Entropy     float64
	Keywords    []string
	Path        string // regex on the file path; empty = any path
	Tags        []string
	Allowlists  []Allowlist
	// Required makes the rule composite: a finding of it is reported only
	// when each required rule also matches in the blob, near enough.
	// gitleaks ignores it on a path-only rule, and so does the scanner.
	Required []Required
	// SkipReport: the rule's findings are never reported; the rule only
	// serves as a required rule of others.
	SkipReport bool
}

// Required is one `[[rules.required]]` entry of a composite rule.
type Required struct {
	ID string
	// WithinLines and WithinColumns bound how far the start of the required
	// rule's match may be from the start of the primary rule's match, in
	// lines and in byte columns; nil means unbounded. With both, both hold.
	// A path-only required rule's match is at line 0, column 0, as in
	// gitleaks.
	WithinLines, WithinColumns *int
}

// Allowlist drops findings. Condition "OR" (the default) allows a finding when
// any of the listed checks passes, "AND" when all listed checks pass.
type Allowlist struct {
	Description string
	Condition   string   // "OR" or "AND"
	Commits     []string // commit ids, compared case-insensitively
	Paths       []string // regexes on the file path
	Regexes     []string // regexes on RegexTarget
	RegexTarget string   // "secret" (default), "match" or "line"
	StopWords   []string // a finding whose secret contains one (case-insensitively) is allowed
	TargetRules []string // global allowlists only: the rules it applies to; empty = all
}

// RuleSet is a compiled, immutable rule set; safe for concurrent use.
type RuleSet struct {
	title      string
	minVersion string
	warnings   []string
	rules      []*compiledRule // sorted by id
	global     []*compiledAllowlist
	nAllow     int // number of allowlists (global and per-rule), for per-scan state

	pathOnly  []int32 // reported rules with a path and no regex
	noKeyword []int32 // reported regex rules without keywords: run on every blob
	composite bool    // some reported regex rule has required rules

	kw          *keywordMatcher
	kwRules     [][]int32 // keyword id -> reported rules that list it
	kwAnchRules [][]int32 // keyword id -> anchored-mode rules that list it (reported or required)

	hash string

	source     string // where the rules come from, for people (Source)
	maintained int    // rules of the maintained set it extends (merged.maintained)
}

// Source says where the rules come from: "built-in: gitleaks v8.30.1
// default configuration (222 rules) + gitfleet extension (3 rules)", or the
// file, and the maintained set when the file extends it.
func (rs *RuleSet) Source() string { return rs.source }

// Title is the configuration's title.
func (rs *RuleSet) Title() string { return rs.title }

// MinVersion is the configuration's minVersion ("" when it has none).
func (rs *RuleSet) MinVersion() string { return rs.minVersion }

// Warnings are things the configuration says that have no effect, as in
// gitleaks (which logs them): disabling a rule the extended set does not
// have, [extend] url, required rules of a path-only rule, and so on. They
// never stop a configuration from loading.
func (rs *RuleSet) Warnings() []string { return cloneStrings(rs.warnings) }

// Len is the number of rules.
func (rs *RuleSet) Len() int { return len(rs.rules) }

// Rules returns copies of the rules, sorted by id.
func (rs *RuleSet) Rules() []Rule {
	out := make([]Rule, len(rs.rules))
	for i, r := range rs.rules {
		out[i] = r.Rule.clone()
	}
	return out
}

// Allowlists returns copies of the global allowlists.
func (rs *RuleSet) Allowlists() []Allowlist {
	out := make([]Allowlist, len(rs.global))
	for i, a := range rs.global {
		out[i] = a.src.clone()
	}
	return out
}

// Hash is a stable hex digest (SHA-256) of everything in the rule set that
// affects matching: every rule (sorted by id) with its regex, secretGroup,
// entropy, keywords, path, allowlists, required rules and skipReport, and
// the global allowlists. Titles, descriptions, tags and minVersion do not
// count: they do not change what is found. Scanner limits are not part of
// it; see [Scanner.Policy].
func (rs *RuleSet) Hash() string { return rs.hash }

func (r Rule) clone() Rule {
	c := r
	c.Keywords = cloneStrings(r.Keywords)
	c.Tags = cloneStrings(r.Tags)
	if r.Allowlists != nil {
		c.Allowlists = make([]Allowlist, len(r.Allowlists))
		for i, a := range r.Allowlists {
			c.Allowlists[i] = a.clone()
		}
	}
	if r.Required != nil {
		c.Required = make([]Required, len(r.Required))
		for i, q := range r.Required {
			c.Required[i] = Required{ID: q.ID, WithinLines: cloneInt(q.WithinLines), WithinColumns: cloneInt(q.WithinColumns)}
		}
	}
	return c
}

func (a Allowlist) clone() Allowlist {
	c := a
	c.Commits = cloneStrings(a.Commits)
	c.Paths = cloneStrings(a.Paths)
	c.Regexes = cloneStrings(a.Regexes)
	c.StopWords = cloneStrings(a.StopWords)
	c.TargetRules = cloneStrings(a.TargetRules)
	return c
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// ---- loading ----

var (
	defaultOnce sync.Once
	defaultSet  *RuleSet
	defaultErr  error
)

// Default returns the built-in rule set: gitleaks' default configuration
// from the pinned module (the maintained set), extended by gitfleet's own
// rules. It is compiled once and shared.
func Default() (*RuleSet, error) {
	defaultOnce.Do(func() {
		defaultSet, defaultErr = Load(bytes.NewReader(extensionTOML))
		if defaultErr != nil {
			defaultErr = fmt.Errorf("scan: built-in rules: %w", defaultErr)
			return
		}
		defaultSet.source = fmt.Sprintf("built-in: %s + gitfleet extension (%d rules)",
			defaultSet.source, defaultSet.Len()-defaultSet.maintained)
	})
	return defaultSet, defaultErr
}

// Load reads a gitleaks TOML configuration. `[extend] useDefault = true`
// merges it over the default set; `[extend] path` over another file (a
// relative path is taken as is, i.e. relative to the working directory).
func Load(r io.Reader) (*RuleSet, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("scan: reading rules: %w", err)
	}
	merged, err := resolve(data, "", 0)
	if err != nil {
		return nil, err
	}
	rs, err := compile(merged)
	if err != nil {
		return nil, err
	}
	rs.source = extendsNote("", merged)
	return rs, nil
}

// extendsNote names what a configuration extends, after its own name.
func extendsNote(name string, m *merged) string {
	if m.maintained == 0 {
		return name
	}
	what := fmt.Sprintf("gitleaks %s default configuration (%d rules)", MaintainedVersion(), m.maintained)
	if name == "" {
		return what
	}
	return name + ", extending " + what
}

// LoadFile reads a gitleaks TOML configuration from a file. A relative
// `[extend] path` is resolved against the file's directory.
func LoadFile(path string) (*RuleSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	merged, err := resolve(data, filepath.Dir(path), 0)
	if err != nil {
		return nil, fmt.Errorf("scan: %s: %w", path, err)
	}
	rs, err := compile(merged)
	if err != nil {
		return nil, err
	}
	rs.source = extendsNote(path, merged)
	return rs, nil
}

// The TOML shapes: every key of gitleaks' format (config.ViperConfig in
// v8.30), and nothing else. A key the file has and these do not is an
// error (checkUnknownKeys), because the decoder would silently ignore it.
// Keys match case-insensitively, as they do in gitleaks (viper).
type fileConfig struct {
	Title string `toml:"title"`
	// Description is gitleaks' free text about the file; nothing uses it.
	Description string          `toml:"description"`
	MinVersion  string          `toml:"minVersion"`
	Extend      *fileExtend     `toml:"extend"`
	Rules       []fileRule      `toml:"rules"`
	Allowlist   *fileAllowlist  `toml:"allowlist"`
	Allowlists  []fileAllowlist `toml:"allowlists"`
}

type fileExtend struct {
	UseDefault    bool     `toml:"useDefault"`
	Path          string   `toml:"path"`
	DisabledRules []string `toml:"disabledRules"`
	// URL is accepted and ignored, with a warning: gitleaks declares it but
	// has never fetched it.
	URL string `toml:"url"`
}

type fileRule struct {
	ID          string          `toml:"id"`
	Description string          `toml:"description"`
	Regex       string          `toml:"regex"`
	SecretGroup int             `toml:"secretGroup"`
	Entropy     float64         `toml:"entropy"`
	Keywords    []string        `toml:"keywords"`
	Path        string          `toml:"path"`
	Tags        []string        `toml:"tags"`
	Allowlist   *fileAllowlist  `toml:"allowlist"`
	Allowlists  []fileAllowlist `toml:"allowlists"`
	Required    []fileRequired  `toml:"required"`
	SkipReport  bool            `toml:"skipReport"`
}

type fileRequired struct {
	ID            string `toml:"id"`
	WithinLines   *int   `toml:"withinLines"`
	WithinColumns *int   `toml:"withinColumns"`
}

// fileAllowlist is both the global and the per-rule shape; targetRules in a
// rule's allowlist is refused when compiling, with a clearer message than
// "unknown key".
type fileAllowlist struct {
	Description string   `toml:"description"`
	Condition   string   `toml:"condition"`
	Commits     []string `toml:"commits"`
	Paths       []string `toml:"paths"`
	Regexes     []string `toml:"regexes"`
	RegexTarget string   `toml:"regexTarget"`
	StopWords   []string `toml:"stopwords"`
	TargetRules []string `toml:"targetRules"`
}

// merged is a configuration after [extend] was applied, before compiling.
type merged struct {
	title      string
	minVersion string
	rules      []Rule
	allowlists []Allowlist
	warnings   []string
	// maintained is the number of rules of the maintained set it extends
	// (0: it extends none).
	maintained int
}

func (m *merged) warnf(format string, args ...any) {
	m.warnings = append(m.warnings, fmt.Sprintf(format, args...))
}

const maxExtendDepth = 3

var errNoRules = errors.New("scan: the configuration has no rules (and does not extend the default set)")

func resolve(data []byte, baseDir string, depth int) (*merged, error) {
	fc, err := decodeFile(data)
	if err != nil {
		return nil, err
	}
	m, err := fc.toMerged()
	if err != nil {
		return nil, err
	}
	ext := fc.Extend
	if ext == nil {
		ext = &fileExtend{}
	}
	if ext.URL != "" {
		m.warnf("[extend] url %q is ignored: gitleaks does not fetch it either", ext.URL)
	}
	if ext.UseDefault && ext.Path != "" {
		return nil, errors.New("scan: [extend] takes useDefault or path, not both")
	}
	if !ext.UseDefault && ext.Path == "" {
		if len(ext.DisabledRules) > 0 {
			m.warnf("[extend] disabledRules has no effect without useDefault or path")
		}
		if len(m.rules) == 0 {
			return nil, errNoRules
		}
		return m, nil
	}
	if depth >= maxExtendDepth {
		return nil, fmt.Errorf("scan: [extend] nested more than %d deep", maxExtendDepth)
	}
	base, err := resolveBase(ext, baseDir, depth)
	if err != nil {
		return nil, err
	}
	return mergeOver(base, m, ext.DisabledRules)
}

// resolveBase loads the configuration that ext extends.
func resolveBase(ext *fileExtend, baseDir string, depth int) (*merged, error) {
	if ext.UseDefault {
		base, err := resolve(maintainedTOML, "", depth+1)
		if err != nil {
			return nil, fmt.Errorf("scan: gitleaks' default configuration: %w", err)
		}
		base.maintained = len(base.rules)
		return base, nil
	}
	p := ext.Path
	if baseDir != "" && !filepath.IsAbs(p) {
		p = filepath.Join(baseDir, p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("scan: [extend] path: %w", err)
	}
	base, err := resolve(data, filepath.Dir(p), depth+1)
	if err != nil {
		return nil, fmt.Errorf("scan: [extend] %s: %w", ext.Path, err)
	}
	return base, nil
}

// decodeFile parses one configuration file and rejects keys gitleaks does
// not define.
func decodeFile(data []byte) (*fileConfig, error) {
	var fc fileConfig
	md, err := toml.Decode(string(data), &fc)
	if err != nil {
		return nil, fmt.Errorf("scan: parsing rules: %w", err)
	}
	if err := checkUnknownKeys(string(data), md, &fc); err != nil {
		return nil, err
	}
	return &fc, nil
}

// toMerged normalises one file's contents.
func (fc *fileConfig) toMerged() (*merged, error) {
	m := &merged{title: fc.Title, minVersion: strings.TrimSpace(fc.MinVersion)}
	if m.minVersion != "" {
		newer, err := newerThanFormat(m.minVersion)
		if err != nil {
			return nil, err
		}
		if newer {
			m.warnf("minVersion %s is newer than the gitleaks format gitfleet implements (%s): rules that rely on newer gitleaks behaviour may match differently", m.minVersion, GitleaksVersion)
		}
	}
	seen := map[string]bool{}
	for i, fr := range fc.Rules {
		r, err := fr.normalize(i)
		if err != nil {
			return nil, err
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("scan: rule %q is defined twice", r.ID)
		}
		seen[r.ID] = true
		m.rules = append(m.rules, r)
	}
	if fc.Allowlist != nil {
		m.allowlists = append(m.allowlists, fc.Allowlist.normalize())
	}
	for _, a := range fc.Allowlists {
		m.allowlists = append(m.allowlists, a.normalize())
	}
	return m, nil
}

// mergeOver applies over to base as gitleaks' [extend] does: a rule of over
// with a new id is added; one with an id of base is merged into it
// (overlay); disabled rules are dropped; global allowlists are concatenated.
func mergeOver(base, over *merged, disabled []string) (*merged, error) {
	out := &merged{
		title:      over.title,
		minVersion: over.minVersion,
		allowlists: append(append([]Allowlist(nil), base.allowlists...), over.allowlists...),
		warnings:   append(append([]string(nil), base.warnings...), over.warnings...),
		maintained: base.maintained,
	}
	if out.title == "" {
		out.title = base.title
	}
	byID := map[string]int{}
	for _, r := range base.rules {
		byID[r.ID] = len(out.rules)
		out.rules = append(out.rules, r)
	}
	for _, id := range disabled {
		i, ok := byID[id]
		if !ok {
			out.warnf("[extend] disabledRules: the extended set has no rule %q", id)
			continue
		}
		out.rules[i].ID = "" // tombstone
		delete(byID, id)
	}
	for _, r := range over.rules {
		i, ok := byID[r.ID]
		if !ok {
			byID[r.ID] = len(out.rules)
			out.rules = append(out.rules, r)
			continue
		}
		if len(r.Required) > 0 || r.SkipReport {
			out.warnf("rule %q: required and skipReport are ignored where a rule extends a rule of the same id, as in gitleaks; the extended rule's apply", r.ID)
		}
		out.rules[i] = overlay(out.rules[i], r)
	}
	kept := out.rules[:0]
	for _, r := range out.rules {
		if r.ID != "" {
			kept = append(kept, r)
		}
	}
	out.rules = kept
	if len(out.rules) == 0 {
		return nil, errors.New("scan: every rule is disabled")
	}
	return out, nil
}

// overlay merges rule over into rule base of the extended configuration,
// field by field as gitleaks does: what over sets replaces base's
// description, regex, path, secretGroup and entropy; keywords, tags and
// allowlists add to base's; required rules and skipReport stay base's. So
// a rule of the same id with only an allowlist adds that allowlist.
func overlay(base, over Rule) Rule {
	r := base.clone()
	if over.Description != "" {
		r.Description = over.Description
	}
	if over.Regex != "" {
		r.Regex = over.Regex
	}
	if over.Path != "" {
		r.Path = over.Path
	}
	if over.SecretGroup != 0 {
		r.SecretGroup = over.SecretGroup
	}
	if over.Entropy != 0 {
		r.Entropy = over.Entropy
	}
	r.Keywords = appendNew(r.Keywords, over.Keywords...)
	r.Tags = appendNew(r.Tags, over.Tags...)
	for _, a := range over.Allowlists {
		r.Allowlists = append(r.Allowlists, a.clone())
	}
	return r
}

func (fr fileRule) normalize(i int) (Rule, error) {
	id := strings.TrimSpace(fr.ID)
	if id == "" {
		return Rule{}, fmt.Errorf("scan: rule #%d has no id", i+1)
	}
	r := Rule{
		ID:          id,
		Description: fr.Description,
		Regex:       fr.Regex,
		SecretGroup: fr.SecretGroup,
		Entropy:     fr.Entropy,
		Path:        fr.Path,
		Tags:        cloneStrings(fr.Tags),
		SkipReport:  fr.SkipReport,
	}
	for _, k := range fr.Keywords {
		k = lowerASCII(k)
		if k == "" {
			return Rule{}, fmt.Errorf("scan: rule %q: empty keyword", id)
		}
		r.Keywords = appendNew(r.Keywords, k)
	}
	if fr.Allowlist != nil {
		r.Allowlists = append(r.Allowlists, fr.Allowlist.normalize())
	}
	for _, a := range fr.Allowlists {
		r.Allowlists = append(r.Allowlists, a.normalize())
	}
	for j, q := range fr.Required {
		q.ID = strings.TrimSpace(q.ID)
		if q.ID == "" {
			return Rule{}, fmt.Errorf("scan: rule %q: required rule #%d has no id", id, j+1)
		}
		r.Required = append(r.Required, Required{ID: q.ID, WithinLines: cloneInt(q.WithinLines), WithinColumns: cloneInt(q.WithinColumns)})
	}
	return r, nil
}

func (fa fileAllowlist) normalize() Allowlist {
	a := Allowlist{
		Description: fa.Description,
		Condition:   strings.ToUpper(strings.TrimSpace(fa.Condition)),
		Commits:     cloneStrings(fa.Commits),
		Paths:       cloneStrings(fa.Paths),
		Regexes:     cloneStrings(fa.Regexes),
		RegexTarget: strings.ToLower(strings.TrimSpace(fa.RegexTarget)),
		TargetRules: cloneStrings(fa.TargetRules),
	}
	switch a.Condition {
	case "", "||": // gitleaks' spellings
		a.Condition = "OR"
	case "&&":
		a.Condition = "AND"
	}
	if a.RegexTarget == "" {
		a.RegexTarget = "secret"
	}
	for _, w := range fa.StopWords {
		a.StopWords = append(a.StopWords, lowerASCII(w))
	}
	return a
}

// minVersionRE is the version syntax gitleaks accepts for minVersion
// (semantic versions, "v" optional).
var minVersionRE = regexp.MustCompile(`^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)

// newerThanFormat reports whether minVersion v names a gitleaks release
// after GitleaksVersion. Pre-release and build suffixes are ignored.
func newerThanFormat(v string) (bool, error) {
	want, ok := versionParts(v)
	if !ok {
		return false, fmt.Errorf("scan: minVersion %q is not a version (want e.g. \"v8.25.0\")", v)
	}
	have, _ := versionParts(GitleaksVersion)
	for i := range want {
		if want[i] != have[i] {
			return want[i] > have[i], nil
		}
	}
	return false, nil
}

func versionParts(v string) (parts [3]int, ok bool) {
	m := minVersionRE.FindStringSubmatch(v)
	if m == nil {
		return parts, false
	}
	for i, s := range m[1:4] {
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil { // too many digits
			return parts, false
		}
		parts[i] = n
	}
	return parts, true
}

// ---- unknown keys ----

// checkUnknownKeys rejects the keys that no field of fileConfig took,
// naming each with its line: a misspelt key must not silently disable a
// rule or an allowlist.
func checkUnknownKeys(doc string, md toml.MetaData, fc *fileConfig) error {
	undecoded := md.Undecoded()
	if len(undecoded) == 0 {
		return nil
	}
	unknown := make(map[string]bool, len(undecoded))
	for _, k := range undecoded {
		unknown[k.String()] = true
	}
	keys := md.Keys()
	locs := locateKeys(doc)
	if !sameKeys(locs, keys) {
		locs = nil // the locator could not follow this document: name the keys without lines
	}
	var bad []string
	for i, k := range keys {
		if !unknown[k.String()] || hasUnknownParent(k, unknown) {
			continue
		}
		if locs == nil {
			bad = append(bad, k.String())
			continue
		}
		bad = append(bad, fmt.Sprintf("%s (line %d)", locs[i].name(fc.Rules), locs[i].line))
	}
	const why = "misspelt keys are rejected so that they cannot silently disable a rule"
	if len(bad) == 1 {
		return fmt.Errorf("scan: unknown key %s: gitleaks %s has no such key; %s", bad[0], GitleaksVersion, why)
	}
	return fmt.Errorf("scan: unknown keys %s: gitleaks %s has no such keys; %s", strings.Join(bad, ", "), GitleaksVersion, why)
}

// hasUnknownParent reports whether a table that holds k is itself unknown
// (then only the table is reported).
func hasUnknownParent(k toml.Key, unknown map[string]bool) bool {
	for n := 1; n < len(k); n++ {
		if unknown[k[:n].String()] {
			return true
		}
	}
	return false
}

// The TOML decoder's MetaData lists the keys in document order but knows
// neither their lines nor which element of an array of tables holds them.
// locateKeys walks the (already parsed, so valid) document and lists the
// same keys in the same order with both; sameKeys checks that the two
// lists agree before the lines are trusted.

// keyLoc is where one key of the document is defined: a table header, or
// the key of a key/value pair (including those in inline tables).
type keyLoc struct {
	path []keySeg
	line int
}

type keySeg struct {
	name  string
	index int // the element, when this segment is an array of tables; else -1
}

// name renders the key as the errors show it, with array indexes, and a
// rule by its id where it has one: rules["aws"].allowlists[0].paths.
func (l keyLoc) name(rules []fileRule) string {
	var b strings.Builder
	for i, s := range l.path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
		switch {
		case s.index < 0:
		case i == 0 && strings.EqualFold(s.name, "rules") && s.index < len(rules) && strings.TrimSpace(rules[s.index].ID) != "":
			fmt.Fprintf(&b, "[%q]", strings.TrimSpace(rules[s.index].ID))
		default:
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	return b.String()
}

func sameKeys(locs []keyLoc, keys []toml.Key) bool {
	if len(locs) != len(keys) {
		return false
	}
	for i, l := range locs {
		if len(l.path) != len(keys[i]) {
			return false
		}
		for j, s := range l.path {
			if s.name != keys[i][j] {
				return false
			}
		}
	}
	return true
}

type keyLocator struct {
	s      string
	i      int
	line   int
	bad    bool           // something unexpected: give up
	arrays map[string]int // [[array]] tables so far: indexed path -> number of elements
	locs   []keyLoc
}

// locateKeys lists the keys of a valid TOML document in document order,
// or returns nil when it cannot follow the document.
func locateKeys(doc string) []keyLoc {
	l := &keyLocator{s: strings.TrimPrefix(doc, "\ufeff"), line: 1, arrays: map[string]int{}}
	var table []keySeg // the current [table] or [[array]] element
	for l.skipBlank(true); l.i < len(l.s) && !l.bad; l.skipBlank(true) {
		line := l.line
		switch {
		case strings.HasPrefix(l.s[l.i:], "[["):
			l.i += 2
			table = l.header(l.dottedKey(), true)
			l.expect("]]")
			l.locs = append(l.locs, keyLoc{table, line})
		case l.s[l.i] == '[':
			l.i++
			table = l.header(l.dottedKey(), false)
			l.expect("]")
			l.locs = append(l.locs, keyLoc{table, line})
		default:
			l.keyValue(table)
		}
	}
	if l.bad {
		return nil
	}
	return l.locs
}

// header resolves a table header's names: a name that is an array of
// tables refers to its last element, and the last name of an [[array]]
// header starts a new element.
func (l *keyLocator) header(names []string, array bool) []keySeg {
	path := make([]keySeg, 0, len(names))
	for i, n := range names {
		path = append(path, keySeg{name: n, index: -1})
		k := segKey(path)
		count, isArray := l.arrays[k]
		switch {
		case array && i == len(names)-1:
			path[i].index = count
			l.arrays[k] = count + 1
		case isArray:
			path[i].index = count - 1
		}
	}
	return path
}

// segKey identifies a table by its names and the indexes of the arrays on
// the way.
func segKey(path []keySeg) string {
	var b strings.Builder
	for _, s := range path {
		fmt.Fprintf(&b, "%s\x00%d\x00", s.name, s.index)
	}
	return b.String()
}

// keyValue reads `key = value` in table.
func (l *keyLocator) keyValue(table []keySeg) {
	line := l.line
	names := l.dottedKey()
	if l.bad {
		return
	}
	path := append([]keySeg(nil), table...)
	for _, n := range names {
		path = append(path, keySeg{name: n, index: -1})
	}
	l.locs = append(l.locs, keyLoc{path, line})
	l.skipBlank(false)
	l.expect("=")
	l.skipBlank(false)
	l.value(path)
}

func (l *keyLocator) value(path []keySeg) {
	if l.bad || l.i >= len(l.s) {
		l.bad = true
		return
	}
	switch l.s[l.i] {
	case '"', '\'':
		l.str()
	case '[':
		l.array(path)
	case '{':
		l.inlineTable(path)
	default: // number, boolean or date: up to the next delimiter
		for l.i < len(l.s) && !strings.ContainsRune(",]}#\n", rune(l.s[l.i])) {
			l.i++
		}
	}
}

// array reads an array; an inline table in it is element n of path.
func (l *keyLocator) array(path []keySeg) {
	l.i++ // [
	for n := 0; !l.bad; n++ {
		l.skipBlank(true)
		if l.i >= len(l.s) {
			l.bad = true
			return
		}
		if l.s[l.i] == ']' {
			l.i++
			return
		}
		elem := path
		if l.s[l.i] == '{' {
			elem = append([]keySeg(nil), path...)
			elem[len(elem)-1].index = n
		}
		l.value(elem)
		l.skipBlank(true)
		if l.i < len(l.s) && l.s[l.i] == ',' {
			l.i++
		}
	}
}

func (l *keyLocator) inlineTable(path []keySeg) {
	l.i++ // {
	for !l.bad {
		l.skipBlank(true)
		if l.i >= len(l.s) {
			l.bad = true
			return
		}
		if l.s[l.i] == '}' {
			l.i++
			return
		}
		l.keyValue(path)
		l.skipBlank(true)
		if l.i < len(l.s) && l.s[l.i] == ',' {
			l.i++
		}
	}
}

// dottedKey reads a key: bare or quoted names separated by dots.
func (l *keyLocator) dottedKey() []string {
	var names []string
	for !l.bad {
		l.skipBlank(false)
		names = append(names, l.keyName())
		l.skipBlank(false)
		if l.i >= len(l.s) || l.s[l.i] != '.' {
			break
		}
		l.i++
	}
	return names
}

func (l *keyLocator) keyName() string {
	if l.i < len(l.s) && (l.s[l.i] == '"' || l.s[l.i] == '\'') {
		return l.str()
	}
	start := l.i
	for l.i < len(l.s) && isBareKeyByte(l.s[l.i]) {
		l.i++
	}
	if l.i == start {
		l.bad = true
	}
	return l.s[start:l.i]
}

func isBareKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// str reads a string of any of TOML's four kinds and returns its value
// (only needed, and only exact, for the one-line kinds that keys use).
func (l *keyLocator) str() string {
	q := l.s[l.i]
	if delim := strings.Repeat(string(q), 3); strings.HasPrefix(l.s[l.i:], delim) {
		l.i += 3
		for l.i < len(l.s) {
			switch c := l.s[l.i]; {
			case c == '\\' && q == '"':
				if l.i+1 < len(l.s) && l.s[l.i+1] == '\n' {
					l.line++
				}
				l.i += 2
			case strings.HasPrefix(l.s[l.i:], delim):
				l.i += 3
				for n := 0; n < 2 && l.i < len(l.s) && l.s[l.i] == q; n++ { // up to two quotes end the content
					l.i++
				}
				return ""
			case c == '\n':
				l.line++
				l.i++
			default:
				l.i++
			}
		}
		l.bad = true
		return ""
	}
	start := l.i
	for l.i++; l.i < len(l.s); l.i++ {
		switch c := l.s[l.i]; {
		case c == '\\' && q == '"':
			l.i++
		case c == q:
			l.i++
			raw := l.s[start:l.i]
			if q == '\'' {
				return raw[1 : len(raw)-1]
			}
			if s, err := strconv.Unquote(raw); err == nil {
				return s
			}
			return raw // a TOML escape Go lacks: the key will not match, and sameKeys gives up
		case c == '\n':
			l.bad = true
			return ""
		}
	}
	l.bad = true
	return ""
}

// skipBlank skips spaces, tabs, comments and, if newlines, line ends.
func (l *keyLocator) skipBlank(newlines bool) {
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case ' ', '\t', '\r':
			l.i++
		case '\n':
			if !newlines {
				return
			}
			l.line++
			l.i++
		case '#':
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		default:
			return
		}
	}
}

func (l *keyLocator) expect(tok string) {
	if !strings.HasPrefix(l.s[l.i:], tok) {
		l.bad = true
		return
	}
	l.i += len(tok)
}

// ---- hashing ----

// hashVersion changes when the meaning of a rule set changes without the
// rules changing (matching semantics, canonical form). 2: allowlist regexes
// and paths are joined as gitleaks joins them, so their order counts;
// required rules and skipReport.
const hashVersion = "gitfleet-scan-rules/2"

type canonRule struct {
	ID          string          `json:"id"`
	Regex       string          `json:"regex"`
	SecretGroup int             `json:"secretGroup"`
	Entropy     float64         `json:"entropy"`
	Keywords    []string        `json:"keywords"`
	Path        string          `json:"path"`
	Allowlists  []canonAllow    `json:"allowlists"`
	Required    []canonRequired `json:"required"`
	SkipReport  bool            `json:"skipReport"`
}

type canonRequired struct {
	ID            string `json:"id"`
	WithinLines   *int   `json:"withinLines"`
	WithinColumns *int   `json:"withinColumns"`
}

type canonAllow struct {
	Condition   string   `json:"condition"`
	Commits     []string `json:"commits"`
	Paths       []string `json:"paths"`
	Regexes     []string `json:"regexes"`
	RegexTarget string   `json:"regexTarget"`
	StopWords   []string `json:"stopwords"`
	TargetRules []string `json:"targetRules"`
}

func canonAllowlists(as []Allowlist) []canonAllow {
	out := make([]canonAllow, 0, len(as))
	for _, a := range as {
		commits := make([]string, len(a.Commits))
		for i, c := range a.Commits {
			commits[i] = lowerASCII(c)
		}
		out = append(out, canonAllow{
			Condition: a.Condition,
			Commits:   sortedSet(commits),
			// In file order: they are joined into one regex, where an
			// inline flag of one applies to those after it.
			Paths:       nonNil(a.Paths),
			Regexes:     nonNil(a.Regexes),
			RegexTarget: a.RegexTarget,
			StopWords:   sortedSet(a.StopWords),
			TargetRules: sortedSet(a.TargetRules),
		})
	}
	// Allowlists are OR-ed: their order does not matter.
	sort.Slice(out, func(i, j int) bool {
		bi, _ := json.Marshal(out[i])
		bj, _ := json.Marshal(out[j])
		return string(bi) < string(bj)
	})
	return out
}

// canonRequireds sorts: every required rule must match, in any order.
func canonRequireds(rs []Required) []canonRequired {
	out := make([]canonRequired, 0, len(rs))
	for _, q := range rs {
		out = append(out, canonRequired(q))
	}
	sort.SliceStable(out, func(i, j int) bool {
		bi, _ := json.Marshal(out[i])
		bj, _ := json.Marshal(out[j])
		return string(bi) < string(bj)
	})
	return out
}

func sortedSet(s []string) []string {
	out := append(make([]string, 0, len(s)), s...)
	slices.Sort(out)
	return slices.Compact(out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func hashRules(rules []*compiledRule, global []Allowlist) string {
	doc := struct {
		Version    string       `json:"version"`
		Rules      []canonRule  `json:"rules"`
		Allowlists []canonAllow `json:"allowlists"`
	}{Version: hashVersion, Allowlists: canonAllowlists(global)}
	for _, r := range rules { // already sorted by id
		doc.Rules = append(doc.Rules, canonRule{
			ID:          r.ID,
			Regex:       r.Regex,
			SecretGroup: r.SecretGroup,
			Entropy:     r.Entropy,
			Keywords:    sortedSet(r.Keywords),
			Path:        r.Path,
			Allowlists:  canonAllowlists(r.Allowlists),
			Required:    canonRequireds(r.Required),
			SkipReport:  r.SkipReport,
		})
	}
	b, err := json.Marshal(doc)
	if err != nil { // cannot happen: plain strings and numbers
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ---- small helpers ----

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// appendNew appends the values s does not hold yet.
func appendNew(s []string, vs ...string) []string {
	for _, v := range vs {
		if !containsString(s, v) {
			s = append(s, v)
		}
	}
	return s
}
