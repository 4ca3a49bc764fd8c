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
	"sort"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

//go:embed default.toml
var defaultTOML []byte

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
	title  string
	rules  []*compiledRule // sorted by id
	global []*compiledAllowlist
	nAllow int // number of allowlists (global and per-rule), for per-scan state

	pathOnly  []int32 // rules with a path and no regex
	noKeyword []int32 // regex rules without keywords: run on every blob

	kw          *keywordMatcher
	kwRules     [][]int32 // keyword id -> rules that list it
	kwAnchRules [][]int32 // keyword id -> anchored-mode rules that list it

	hash string
}

// Title is the configuration's title.
func (rs *RuleSet) Title() string { return rs.title }

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
// entropy, keywords, path and allowlists, and the global allowlists. Titles,
// descriptions and tags do not count: they do not change what is found.
// Scanner limits are not part of it; see [Scanner.Policy].
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

// ---- loading ----

var (
	defaultOnce sync.Once
	defaultSet  *RuleSet
	defaultErr  error
)

// Default returns the embedded default rule set (default.toml). It is
// compiled once and shared.
func Default() (*RuleSet, error) {
	defaultOnce.Do(func() {
		defaultSet, defaultErr = Load(bytes.NewReader(defaultTOML))
		if defaultErr != nil {
			defaultErr = fmt.Errorf("scan: embedded default rules: %w", defaultErr)
		}
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
	return compile(merged)
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
	return compile(merged)
}

// The TOML shapes. Unknown keys are found separately (checkKeys), because
// the decoder would silently ignore them.
type fileConfig struct {
	Title      string          `toml:"title"`
	Extend     *fileExtend     `toml:"extend"`
	Rules      []fileRule      `toml:"rules"`
	Allowlist  *fileAllowlist  `toml:"allowlist"`
	Allowlists []fileAllowlist `toml:"allowlists"`
}

type fileExtend struct {
	UseDefault    bool     `toml:"useDefault"`
	Path          string   `toml:"path"`
	DisabledRules []string `toml:"disabledRules"`
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
}

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

var (
	topKeys       = keySet("title", "extend", "rules", "allowlist", "allowlists")
	extendKeys    = keySet("useDefault", "path", "disabledRules")
	ruleKeys      = keySet("id", "description", "regex", "secretGroup", "entropy", "keywords", "path", "tags", "allowlist", "allowlists")
	allowlistKeys = keySet("description", "condition", "commits", "paths", "regexes", "regexTarget", "stopwords", "targetRules")
)

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[strings.ToLower(k)] = true
	}
	return m
}

// merged is a configuration after [extend] was applied, before compiling.
type merged struct {
	title      string
	rules      []Rule
	allowlists []Allowlist
}

const maxExtendDepth = 3

func resolve(data []byte, baseDir string, depth int) (*merged, error) {
	var fc fileConfig
	if _, err := toml.Decode(string(data), &fc); err != nil {
		return nil, fmt.Errorf("scan: parsing rules: %w", err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, fmt.Errorf("scan: parsing rules: %w", err)
	}
	if err := checkKeys(raw); err != nil {
		return nil, err
	}

	m := &merged{title: fc.Title}
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

	if fc.Extend == nil {
		if len(m.rules) == 0 {
			return nil, errors.New("scan: the configuration has no rules (and does not extend the default set)")
		}
		return m, nil
	}
	ext := fc.Extend
	if ext.UseDefault && ext.Path != "" {
		return nil, errors.New("scan: [extend] takes useDefault or path, not both")
	}
	if !ext.UseDefault && ext.Path == "" {
		if len(ext.DisabledRules) > 0 {
			return nil, errors.New("scan: [extend] disabledRules needs useDefault or path")
		}
		if len(m.rules) == 0 {
			return nil, errors.New("scan: the configuration has no rules (and does not extend the default set)")
		}
		return m, nil
	}
	if depth >= maxExtendDepth {
		return nil, fmt.Errorf("scan: [extend] nested more than %d deep", maxExtendDepth)
	}
	var base *merged
	var err error
	if ext.UseDefault {
		base, err = resolve(defaultTOML, "", depth+1)
		if err != nil {
			return nil, fmt.Errorf("scan: embedded default rules: %w", err)
		}
	} else {
		p := ext.Path
		if baseDir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		bdata, rerr := os.ReadFile(p)
		if rerr != nil {
			return nil, fmt.Errorf("scan: [extend] path: %w", rerr)
		}
		base, err = resolve(bdata, filepath.Dir(p), depth+1)
		if err != nil {
			return nil, fmt.Errorf("scan: [extend] %s: %w", ext.Path, err)
		}
	}
	return mergeOver(base, m, ext.DisabledRules)
}

// mergeOver puts over's rules over base's (same id replaces), drops
// disabled rules and concatenates the global allowlists.
func mergeOver(base, over *merged, disabled []string) (*merged, error) {
	out := &merged{title: over.title, allowlists: append(append([]Allowlist(nil), base.allowlists...), over.allowlists...)}
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
			return nil, fmt.Errorf("scan: [extend] disabledRules: no rule %q in the extended set", id)
		}
		out.rules[i].ID = "" // tombstone
		delete(byID, id)
	}
	for _, r := range over.rules {
		if i, ok := byID[r.ID]; ok {
			out.rules[i] = r
			continue
		}
		byID[r.ID] = len(out.rules)
		out.rules = append(out.rules, r)
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
	}
	for _, k := range fr.Keywords {
		k = lowerASCII(k)
		if k == "" {
			return Rule{}, fmt.Errorf("scan: rule %q: empty keyword", id)
		}
		if !containsString(r.Keywords, k) {
			r.Keywords = append(r.Keywords, k)
		}
	}
	if fr.Allowlist != nil {
		r.Allowlists = append(r.Allowlists, fr.Allowlist.normalize())
	}
	for _, a := range fr.Allowlists {
		r.Allowlists = append(r.Allowlists, a.normalize())
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
	if a.Condition == "" {
		a.Condition = "OR"
	}
	if a.RegexTarget == "" {
		a.RegexTarget = "secret"
	}
	for _, w := range fa.StopWords {
		a.StopWords = append(a.StopWords, lowerASCII(w))
	}
	return a
}

// checkKeys rejects keys the loader does not know, naming where they are.
func checkKeys(raw map[string]any) error {
	var bad []string
	unknown := func(where string, m map[string]any, known map[string]bool) {
		for k := range m {
			if !known[strings.ToLower(k)] {
				bad = append(bad, where+k)
			}
		}
	}
	allowlist := func(where string, v any) {
		if m, ok := v.(map[string]any); ok {
			unknown(where+".", m, allowlistKeys)
			return
		}
		for i, m := range tables(v) {
			unknown(fmt.Sprintf("%s[%d].", where, i), m, allowlistKeys)
		}
	}
	unknown("", raw, topKeys)
	for k, v := range raw {
		switch strings.ToLower(k) {
		case "extend":
			if m, ok := v.(map[string]any); ok {
				unknown("extend.", m, extendKeys)
			}
		case "allowlist", "allowlists":
			allowlist(k, v)
		case "rules":
			for i, r := range tables(v) {
				where := fmt.Sprintf("rules[%d]", i)
				if id, ok := r["id"].(string); ok && id != "" {
					where = fmt.Sprintf("rules[%q]", id)
				}
				unknown(where+".", r, ruleKeys)
				for rk, rv := range r {
					if l := strings.ToLower(rk); l == "allowlist" || l == "allowlists" {
						allowlist(where+"."+rk, rv)
					}
				}
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("scan: unknown or unsupported key(s) in the rules: %s (misspelt keys are rejected so that they cannot silently disable a rule)", strings.Join(bad, ", "))
}

// tables returns an array of tables, whether written as [[x]] or as an
// inline array.
func tables(v any) []map[string]any {
	switch t := v.(type) {
	case []map[string]any:
		return t
	case []any:
		var out []map[string]any
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// ---- hashing ----

// hashVersion changes when the meaning of a rule set changes without the
// rules changing (matching semantics, canonical form).
const hashVersion = "gitfleet-scan-rules/1"

type canonRule struct {
	ID          string       `json:"id"`
	Regex       string       `json:"regex"`
	SecretGroup int          `json:"secretGroup"`
	Entropy     float64      `json:"entropy"`
	Keywords    []string     `json:"keywords"`
	Path        string       `json:"path"`
	Allowlists  []canonAllow `json:"allowlists"`
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
			Condition:   a.Condition,
			Commits:     sortedSet(commits),
			Paths:       sortedSet(a.Paths),
			Regexes:     sortedSet(a.Regexes),
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

func sortedSet(s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !containsString(out, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
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
