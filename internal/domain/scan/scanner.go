package scan

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"gitfleet/internal/domain/archive"
	"gitfleet/internal/domain/suppress"
)

// DefaultMaxBlobBytes is the default size limit of a scanned blob.
const DefaultMaxBlobBytes = 10 << 20

// binarySniffLen is how much of a blob is searched for a NUL byte, like git's
// buffer_is_binary.
const binarySniffLen = 8000

// MinHashKeyLen is the shortest accepted HMAC key.
const MinHashKeyLen = 16

// Config holds the scanner's limits. Its zero value is NOT the default: use
// DefaultConfig and change what you need.
type Config struct {
	// MaxBlobBytes: larger blobs are skipped as oversized. 0 means
	// DefaultMaxBlobBytes; negative means no limit.
	MaxBlobBytes int64
	// OversizedIsPartial: an oversized skip makes the run Partial (default true).
	OversizedIsPartial bool
	// BinaryIsPartial: a binary skip makes the run Partial (default false).
	BinaryIsPartial bool
	// DecodeDepth: how many times base64, hex and percent-encoded spans are
	// decoded, recursively, and the decoded text scanned (decode.go); 0 (or
	// negative) disables decoding. Default DefaultDecodeDepth.
	DecodeDepth int
	// ArchiveDepth: how many levels of archives and compressed files are
	// opened and their files scanned (archive.go); 0 (or negative)
	// disables opening them. Default DefaultArchiveDepth.
	ArchiveDepth int
	// ArchiveLimits bound the work of opening one blob's archives; a zero
	// field means archive.DefaultLimits'. A file in an archive larger than
	// MaxBlobBytes is skipped.
	ArchiveLimits archive.Limits
	// ArchiveWalks is how many blobs' archives are opened at once, by all
	// the goroutines scanning with the scanner (and the scanners made from
	// it): their memory is at most ArchiveWalks × ArchiveLimits.Memory.
	// 0 means DefaultArchiveWalks.
	ArchiveWalks int
}

// DefaultArchiveWalks: four archives opened at once, 256 MiB at most with
// the default limits, whatever the scan's parallelism.
const DefaultArchiveWalks = 4

// DefaultConfig is 10 MiB, oversized → Partial, binary → not Partial,
// decoding DefaultDecodeDepth deep, archives opened DefaultArchiveDepth
// deep within archive.DefaultLimits.
func DefaultConfig() Config {
	return Config{MaxBlobBytes: DefaultMaxBlobBytes, OversizedIsPartial: true, BinaryIsPartial: false,
		DecodeDepth: DefaultDecodeDepth, ArchiveDepth: DefaultArchiveDepth, ArchiveLimits: archive.DefaultLimits()}
}

// SkipReason says why a blob was not scanned.
type SkipReason string

const (
	NotSkipped    SkipReason = ""
	SkipBinary    SkipReason = "binary"    // a NUL byte in the first 8000 bytes
	SkipOversized SkipReason = "oversized" // larger than Config.MaxBlobBytes
)

// Finding is one secret found in a blob. It never holds the secret, the path
// or the commit.
type Finding struct {
	RuleID      string
	Description string
	// Line is the 1-based line of the secret's first byte (lines end at
	// '\n'; a CRLF counts once). Column is its 1-based byte column in that
	// line. Both are 0 for a path-only rule, which reports the blob itself.
	Line, Column int
	// Start and End are byte offsets of the secret in the blob, End
	// exclusive (0, 0 for a path-only rule).
	Start, End int
	// SecretHash is hex(HMAC-SHA256(hashKey, secret)); empty for a path-only
	// rule. The same secret has the same hash under the same key, whatever
	// rule found it.
	SecretHash string
	// Preview shows a few characters of the secret, never more than a
	// quarter of it: a secret of 16 characters or more its first 4, "…"
	// and its length in characters, e.g. "ghp_…(40)"; a shorter one its
	// first 2 when it has at least 8, else none, and "…", with no length
	// (see preview). Empty for a path-only rule.
	Preview string
	// Decoded is set when the secret was found in decoded text: the
	// encodings undone, outermost first, e.g. "base64" or "base64/hex".
	// Line, Column, Start and End are then those of the outermost encoded
	// span in the blob, and SecretHash and Preview those of the decoded
	// secret. DecodeDepth is the number of encodings (0 when not decoded).
	Decoded     string
	DecodeDepth int
	// Archive is set when the secret was found in a file inside an archive
	// (archive.go): the file's path in it, nested archives joined with
	// "!", e.g. "config/app.properties" in dist/app.jar, shown as
	// dist/app.jar!config/app.properties. Line, Column, Start and End are
	// then those in that file. The content of a compressed file that is
	// no archive (a .gz of a text file) is at the blob's own path, as
	// gitleaks names it: Archive is empty and the offsets are in the
	// decompressed content.
	Archive string
	// Inline: the line of the secret carries gitleaks:allow
	// (suppress.InlineAllowed), in the content the secret was found in —
	// the blob, the file in its archive, the decompressed content — as
	// gitleaks decides it; the finding is kept, and the caller marks it
	// suppressed. Never set for a path-only rule.
	Inline bool
}

// Result of scanning one blob.
type Result struct {
	// Findings are ordered by Start, then RuleID; nil when none. Each
	// (rule, Start) is reported once. A generic rule's finding is dropped
	// where a specific rule's match starts on the same line and its secret
	// contains the generic one, as gitleaks does: a GitHub token assigned
	// to GITHUB_TOKEN is a github-pat finding only. Other spans
	// found by two rules are reported once per rule; group by SecretHash for
	// one entry per secret. A skipReport rule's findings are never
	// reported, and a composite rule's only near its required rules'
	// (see Rule.Required). Findings in decoded text (Finding.Decoded) are
	// one per rule, secret and encoded span.
	Findings []Finding
	// Skipped is set when the content was not scanned. Path-only rules are
	// still applied to skipped blobs (they need no content).
	Skipped SkipReason
	// Partial: the blob was skipped, and the Config says that this kind of
	// skip makes the run partial; or a skip in ArchiveSkips does
	// (Scanner.ArchiveSkipIsPartial: a limit cut the walk short).
	Partial bool
	// ArchiveSkips: what of an archive blob was not scanned, and why (a
	// limit, a file too large or nested too deep, damage, a binary file,
	// a 7z or rar archive); the blob itself was scanned. The findings of
	// an archive are the path rules' on the blob, then its files', in the
	// archive's order.
	ArchiveSkips []archive.Skip
}

// Scanner scans blobs with one rule set. It is immutable and safe for
// concurrent use.
type Scanner struct {
	rs  *RuleSet
	cfg Config
	// key is the key given to New; keyVersion its version. hashKey keys
	// the SecretHashes (key itself at version 1, else derived from key
	// and the version), nameKey the digests of names (Digest).
	key        []byte
	keyVersion int
	hashKey    []byte
	nameKey    []byte
	policy     string
	pool       sync.Pool     // *scratch
	walks      *archive.Pool // shared by the scanners made from this one

	// onRegex, when set (tests only), is called each time a rule's regex runs
	// on a blob.
	onRegex func(ruleID string)
	// wholeBlob (tests only) disables anchored matching.
	wholeBlob bool
	// budget (tests only) replaces anchoredBudget.
	budget func(n int) time.Duration
	// onDecode, when set (tests only), is called for each decoded segment
	// that is scanned.
	onDecode func(kind string, depth int)
	// timing, when set (WithTiming), adds up where Scan's time goes.
	timing *Timing
}

// Timing is where the scans of a scanner made WithTiming spend their time,
// in nanoseconds summed over the goroutines that scan: the keyword pass
// (one pass of every rule's keywords over each text blob), the rules'
// regexes and what decides their matches (allowlists, entropy, composite
// rules), and the decoding pass. The rest of Scan (binary sniffing,
// archives, path rules, rendering the findings) is not split out.
type Timing struct {
	Keywords, Rules, Decode atomic.Int64
}

// WithTiming is a scanner like s that adds up where its time goes into t:
// a benchmark's breakdown. The clock reads cost about 100 ns a blob.
func (s *Scanner) WithTiming(t *Timing) *Scanner {
	n := s.withConfig(s.cfg)
	n.timing = t
	return n
}

// New makes a scanner. hashKey keys the SecretHash of findings, as key
// version 1 (WithKeyVersion); it must be at least MinHashKeyLen bytes and
// should be a secret of the caller's, kept apart from the hashes.
func New(rs *RuleSet, cfg Config, hashKey []byte) (*Scanner, error) {
	return newScanner(rs, cfg, hashKey, 1)
}

func newScanner(rs *RuleSet, cfg Config, key []byte, version int) (*Scanner, error) {
	if rs == nil {
		return nil, errors.New("scan: nil rule set")
	}
	if len(key) < MinHashKeyLen {
		return nil, fmt.Errorf("scan: the hash key must be at least %d bytes", MinHashKeyLen)
	}
	if version < 1 {
		return nil, fmt.Errorf("scan: key version %d: versions start at 1", version)
	}
	if cfg.MaxBlobBytes == 0 {
		cfg.MaxBlobBytes = DefaultMaxBlobBytes
	}
	cfg.DecodeDepth = max(cfg.DecodeDepth, 0)
	if cfg.ArchiveWalks <= 0 {
		cfg.ArchiveWalks = DefaultArchiveWalks
	}
	s := &Scanner{rs: rs, cfg: cfg, key: slices.Clone(key), keyVersion: version}
	// Version 1 is the key itself, so hashes made before keys had
	// versions stay valid under the key they were made with; a later
	// version keys a namespace of its own even if an operator gives it
	// the same key again.
	s.hashKey = s.key
	if version > 1 {
		s.hashKey = derive(s.key, "gitfleet finding key version "+strconv.Itoa(version))
	}
	s.nameKey = derive(s.hashKey, "gitfleet name digest")
	s.policy = policyHash(rs, cfg, s.hashKey)
	s.pool.New = func() any { return newScratch(rs) }
	s.walks = archive.NewPool(cfg.ArchiveWalks)
	return s, nil
}

// derive is a key of its own for one use of key.
func derive(key []byte, use string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(use))
	return mac.Sum(nil)
}

// WithKeyVersion is a scanner like s whose key is version v of the
// installation's key (v from 1). Each version hashes secrets in a
// namespace of its own and makes a policy of its own, so a new version
// starts a new scope: every repository is scanned again, its secrets
// hashed under the new key.
func (s *Scanner) WithKeyVersion(v int) (*Scanner, error) {
	n, err := newScanner(s.rs, s.cfg, s.key, v)
	if err != nil {
		return nil, err
	}
	n.onRegex, n.wholeBlob, n.onDecode, n.budget, n.walks = s.onRegex, s.wholeBlob, s.onDecode, s.budget, s.walks
	return n, nil
}

// KeyVersion is the version of the key the SecretHashes are made with.
func (s *Scanner) KeyVersion() int { return s.keyVersion }

// DigestLen is the length of a Digest in hex digits (128 bits).
const DigestLen = 32

// Digest names a name the scan met (a path, a ref, a location) in logs
// and errors without saying it: equal names digest equally, so messages
// still correlate, and without the installation's key nobody can tell
// which name it was, not even by digesting common names (an HMAC under a
// key derived from the hash key, 128 bits).
func (s *Scanner) Digest(name string) string {
	mac := hmac.New(sha256.New, s.nameKey)
	mac.Write([]byte(name))
	return hex.EncodeToString(mac.Sum(nil))[:DigestLen]
}

// WithDecodeDepth is a scanner like s that decodes encoded spans this many
// levels deep (0 disables decoding).
func (s *Scanner) WithDecodeDepth(depth int) *Scanner {
	cfg := s.cfg
	cfg.DecodeDepth = depth
	return s.withConfig(cfg)
}

// withConfig is a scanner like s with configuration cfg.
func (s *Scanner) withConfig(cfg Config) *Scanner {
	n, err := newScanner(s.rs, cfg, s.key, s.keyVersion)
	if err != nil {
		panic(err) // s was made with the same key and version
	}
	n.onRegex, n.wholeBlob, n.onDecode, n.budget, n.timing = s.onRegex, s.wholeBlob, s.onDecode, s.budget, s.timing
	if cfg.ArchiveWalks == s.cfg.ArchiveWalks {
		n.walks = s.walks
	}
	return n
}

// Rules is the scanner's rule set.
func (s *Scanner) Rules() *RuleSet { return s.rs }

// Config is the effective configuration.
func (s *Scanner) Config() Config { return s.cfg }

// MaxBlobBytes is the effective size limit: larger blobs are skipped as
// oversized. Negative means no limit.
func (s *Scanner) MaxBlobBytes() int64 { return s.cfg.MaxBlobBytes }

// Oversized is the Result for a blob of this size that the caller did not
// read because it is larger than MaxBlobBytes: skipped as oversized, Partial
// as configured. Unlike Precheck it applies no allowlist and no path rule.
func (s *Scanner) Oversized(size int64) Result {
	return Result{Skipped: SkipOversized, Partial: s.IsPartial(SkipOversized)}
}

// IsPartial says whether a skip of this kind makes a run Partial.
func (s *Scanner) IsPartial(r SkipReason) bool {
	switch r {
	case SkipBinary:
		return s.cfg.BinaryIsPartial
	case SkipOversized:
		return s.cfg.OversizedIsPartial
	}
	return false
}

// Policy is a stable hex digest of everything that determines the findings
// a scan produces: the rule set's Hash, the Config, the scanner's version
// and a one-way fingerprint of the hash key (so that stored SecretHashes are
// only ever compared under one key). When it changes, blobs must be
// re-scanned.
func (s *Scanner) Policy() string { return s.policy }

const scannerVersion = "gitfleet-scan/1"

func policyHash(rs *RuleSet, cfg Config, key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("gitfleet scan key fingerprint"))
	keyID := hex.EncodeToString(mac.Sum(nil)[:8])
	doc := fmt.Sprintf("%s\nrules=%s\nmaxBlobBytes=%d\noversizedIsPartial=%t\nbinaryIsPartial=%t\nbinarySniff=%d\nkey=%s\n%s\n%s\n",
		scannerVersion, rs.Hash(), cfg.MaxBlobBytes, cfg.OversizedIsPartial, cfg.BinaryIsPartial, binarySniffLen, keyID,
		decodePolicy(cfg.DecodeDepth), archivePolicy(cfg))
	sum := sha256.Sum256([]byte(doc))
	return hex.EncodeToString(sum[:])
}

// allowState is an allowlist's verdict for a blob, from its commit and path
// alone.
type allowState uint8

const (
	allowUnknown    allowState = iota // not computed yet for this blob
	allowAll                          // allows every finding in the blob
	allowNever                        // allows none
	allowPerFinding                   // depends on the finding (regexes, stopwords)
)

type rawFinding struct {
	rule       int32
	start, end int // the secret
	// mstart is where the match starts: gitleaks measures the distance
	// between a composite rule's finding and its required ones from there.
	mstart int
}

// scratch is the per-scan state, pooled.
type scratch struct {
	kwFound  []bool
	ruleHit  []bool
	hitList  []int32
	cands    [][]span // per rule, anchored rules only: candidate match starts
	candRule []int32  // rules with candidates
	alState  []allowState
	raw      []rawFinding
	lower    []byte
	// Composite rules only (applyRequired).
	aux      []rawFinding // findings of required rules run for them alone
	auxRan   []int32      // the rules aux holds the findings of
	kept     []rawFinding // spare buffer for filtering raw
	newlines []int        // offsets of '\n' in the blob, once nlDone
	nlDone   bool
	spans    []encSpan // decode.go
	decBuf   []byte
	rs       *RuleSet
	mac      hash.Hash
	sum      [sha256.Size]byte
}

func newScratch(rs *RuleSet) *scratch {
	return &scratch{
		kwFound: make([]bool, len(rs.kwRules)),
		ruleHit: make([]bool, len(rs.rules)),
		cands:   make([][]span, len(rs.rules)),
		alState: make([]allowState, rs.nAllow),
		rs:      rs,
	}
}

func (sc *scratch) reset() {
	clear(sc.kwFound)
	for _, r := range sc.hitList {
		sc.ruleHit[r] = false
	}
	sc.hitList = sc.hitList[:0]
	for _, r := range sc.candRule {
		sc.cands[r] = sc.cands[r][:0]
	}
	sc.candRule = sc.candRule[:0]
	clear(sc.alState)
	sc.raw = sc.raw[:0]
	sc.aux = sc.aux[:0]
	sc.auxRan = sc.auxRan[:0]
	sc.nlDone = false
}

// keywordHit records keyword occurrences ending at i.
func (sc *scratch) keywordHit(kws []int32, i int) {
	rs := sc.rs
	for _, kw := range kws {
		if !sc.kwFound[kw] {
			sc.kwFound[kw] = true
			for _, r := range rs.kwRules[kw] {
				if !sc.ruleHit[r] {
					sc.ruleHit[r] = true
					sc.hitList = append(sc.hitList, r)
				}
			}
		}
		ar := rs.kwAnchRules[kw]
		if len(ar) == 0 {
			continue
		}
		start := i + 1 - rs.kw.kwLen[kw]
		for _, r := range ar {
			lo := start - rs.rules[r].plan.before
			cs := sc.cands[r]
			if n := len(cs); n > 0 {
				if last := &cs[n-1]; lo <= last.hi+1 && start >= last.lo-1 {
					last.lo, last.hi = min(last.lo, lo), max(last.hi, start)
					continue
				}
			} else {
				sc.candRule = append(sc.candRule, r)
			}
			sc.cands[r] = append(cs, span{lo, start})
		}
	}
}

// Precheck decides a blob from its size alone, before it is read: when the
// blob is allowlisted by path or commit for every rule, or oversized, it
// returns the Result that Scan would return and true. Otherwise it returns
// false and the blob must be read and passed to Scan.
func (s *Scanner) Precheck(path string, size int64, commit string) (Result, bool) {
	sc := s.pool.Get().(*scratch)
	defer s.put(sc)
	if s.allowlistedBlob(sc, path, commit) {
		return Result{}, true
	}
	if s.cfg.MaxBlobBytes >= 0 && size > s.cfg.MaxBlobBytes {
		return s.skipped(sc, path, commit, SkipOversized), true
	}
	return Result{}, false
}

// Scan scans one blob. path and commit are used only for allowlists and
// path rules; the findings do not contain them.
func (s *Scanner) Scan(path string, content []byte, commit string) Result {
	sc := s.pool.Get().(*scratch)
	defer s.put(sc)

	if s.allowlistedBlob(sc, path, commit) {
		return Result{}
	}
	if s.cfg.MaxBlobBytes >= 0 && int64(len(content)) > s.cfg.MaxBlobBytes {
		return s.skipped(sc, path, commit, SkipOversized)
	}
	if res, ok := s.scanArchive(sc, path, content, commit); ok {
		return res
	}
	if bytes.IndexByte(content[:min(len(content), binarySniffLen)], 0) >= 0 {
		return s.skipped(sc, path, commit, SkipBinary)
	}
	s.pathRules(sc, path, commit)
	return Result{Findings: s.textFindings(sc, path, commit, content)}
}

// textFindings runs the content rules and the decoding pass over content,
// text, and renders the findings with the path rules' already in sc.raw.
func (s *Scanner) textFindings(sc *scratch, path, commit string, content []byte) []Finding {
	s.scanText(sc, path, commit, content)
	var decoded []Finding
	if s.cfg.DecodeDepth > 0 {
		var began time.Time
		if s.timing != nil {
			began = time.Now()
		}
		decoded = s.decodePass(sc, path, commit, content)
		if s.timing != nil {
			s.timing.Decode.Add(int64(time.Since(began)))
		}
	}
	fs := s.finish(sc, content)
	if len(decoded) > 0 {
		fs = append(fs, decoded...)
		slices.SortStableFunc(fs, func(x, y Finding) int {
			if x.Start != y.Start {
				return x.Start - y.Start
			}
			return strings.Compare(x.RuleID, y.RuleID)
		})
	}
	return fs
}

// scanText runs the content rules over content into sc.raw.
func (s *Scanner) scanText(sc *scratch, path, commit string, content []byte) {
	rs := s.rs
	var began time.Time
	if s.timing != nil {
		began = time.Now()
	}
	// One pass for every keyword, then only the rules whose keywords occur.
	if len(rs.kwRules) > 0 {
		rs.kw.scan(content, sc)
	}
	if s.timing != nil {
		now := time.Now()
		s.timing.Keywords.Add(int64(now.Sub(began)))
		began = now
		defer func() { s.timing.Rules.Add(int64(time.Since(began))) }()
	}
	for _, r := range rs.noKeyword {
		s.runRule(sc, rs.rules[r], path, commit, content)
	}
	for _, r := range sc.hitList {
		s.runRule(sc, rs.rules[r], path, commit, content)
	}
	if rs.composite {
		s.applyRequired(sc, path, commit, content)
	}
}

func (s *Scanner) put(sc *scratch) {
	sc.reset()
	s.pool.Put(sc)
}

func (s *Scanner) skipped(sc *scratch, path, commit string, why SkipReason) Result {
	s.pathRules(sc, path, commit)
	return Result{Findings: s.finish(sc, nil), Skipped: why, Partial: s.IsPartial(why)}
}

// allowlistedBlob reports whether a global allowlist that applies to every
// rule allows the whole blob by its path or commit.
func (s *Scanner) allowlistedBlob(sc *scratch, path, commit string) bool {
	for _, a := range s.rs.global {
		if a.targets == nil && sc.state(a, path, commit) == allowAll {
			return true
		}
	}
	return false
}

func (s *Scanner) pathRules(sc *scratch, path, commit string) {
	for _, r := range s.rs.pathOnly {
		s.pathRule(sc, s.rs.rules[r], path, commit)
	}
}

// pathRule applies a path-only rule: it finds the blob itself.
func (s *Scanner) pathRule(sc *scratch, cr *compiledRule, path, commit string) {
	if cr.path.MatchString(path) && !s.ruleAllowsAll(sc, cr, path, commit) {
		sc.raw = append(sc.raw, rawFinding{rule: cr.idx})
	}
}

// ruleAllowsAll reports whether an allowlist allows all of the rule's
// findings in this blob, so the rule need not run.
func (s *Scanner) ruleAllowsAll(sc *scratch, cr *compiledRule, path, commit string) bool {
	for _, a := range cr.global {
		if sc.state(a, path, commit) == allowAll {
			return true
		}
	}
	for _, a := range cr.allow {
		if sc.state(a, path, commit) == allowAll {
			return true
		}
	}
	return false
}

func (sc *scratch) state(a *compiledAllowlist, path, commit string) allowState {
	if st := sc.alState[a.idx]; st != allowUnknown {
		return st
	}
	st := a.blobState(path, commit)
	sc.alState[a.idx] = st
	return st
}

func (a *compiledAllowlist) blobState(path, commit string) allowState {
	var checks, passed int
	if len(a.commits) > 0 {
		checks++
		if commit != "" && a.commits[lowerASCII(commit)] {
			passed++
		}
	}
	if a.paths != nil {
		checks++
		if a.paths.MatchString(path) {
			passed++
		}
	}
	perFinding := a.regex != nil || len(a.stops) > 0
	if a.and {
		switch {
		case passed < checks:
			return allowNever
		case perFinding:
			return allowPerFinding
		}
		return allowAll
	}
	switch {
	case passed > 0:
		return allowAll
	case perFinding:
		return allowPerFinding
	}
	return allowNever
}

func (s *Scanner) runRule(sc *scratch, cr *compiledRule, path, commit string, content []byte) {
	if cr.path != nil && !cr.path.MatchString(path) {
		return
	}
	if s.ruleAllowsAll(sc, cr, path, commit) {
		return
	}
	if s.onRegex != nil {
		s.onRegex(cr.ID)
	}
	if cr.mode == modeAnchored && !s.wholeBlob {
		s.matchAnchored(sc, cr, path, commit, content)
		return
	}
	s.matchWhole(sc, cr, path, commit, content, 0)
}

// matchAnchored tries the regex at the candidate starts, left to right,
// resuming after each match like FindAll (see anchored.go).
//
// An attempt may read far when the regex is unbounded, so a blob built to
// make every attempt long could cost far more than one whole-blob run. The
// attempts therefore get a time budget proportional to the blob; past it,
// the rest of the blob is searched as a whole (same matches: FindAll's,
// from where the last one ended).
func (s *Scanner) matchAnchored(sc *scratch, cr *compiledRule, path, commit string, content []byte) {
	p := cr.plan
	cands := mergeSpans(sc.cands[cr.idx])
	sc.cands[cr.idx] = cands
	next := 0 // the end of the previous match
	attempts := 0
	var began time.Time
	for _, c := range cands {
		for j := max(c.lo, next, 0); j <= c.hi && j < len(content); j++ {
			if !p.first[content[j]] || !runeStart(content, j) {
				continue
			}
			switch attempts++; {
			case attempts == 1:
				began = time.Now()
			case attempts%16 == 0 && time.Since(began) > s.anchoredBudget(len(content)):
				s.matchWhole(sc, cr, path, commit, content, next)
				return
			}
			m, off := p.attempt(content, j)
			if m == nil {
				continue
			}
			start := j
			if p.lead != nil {
				var ok bool
				if start, ok = p.lead.leadStart(content, next, j); !ok {
					// A rune that may belong to the run: try the whole
					// regex at each start up to j instead (the run's
					// bound counts runes, of up to UTFMax bytes).
					if m, off, start = p.whole.firstAttempt(content, max(next, j-p.lead.max*utf8.UTFMax), j); m == nil {
						continue
					}
				}
			}
			s.match(sc, cr, path, commit, content, m, off, start)
			next = m[1] + off
			j = next - 1
		}
	}
}

// anchoredBudget is how long a rule's anchored attempts may take on a blob
// of n bytes: a few times what searching it whole costs.
func (s *Scanner) anchoredBudget(n int) time.Duration {
	if s.budget != nil {
		return s.budget(n)
	}
	return time.Millisecond + time.Duration(n)*100*time.Nanosecond
}

// matchWhole runs the regex on the whole blob and keeps the matches that
// start at or after from.
func (s *Scanner) matchWhole(sc *scratch, cr *compiledRule, path, commit string, content []byte, from int) {
	for _, m := range cr.re.FindAllSubmatchIndex(content, -1) {
		if m[0] >= from {
			s.match(sc, cr, path, commit, content, m, 0, m[0])
		}
	}
}

// match handles one regex match: m are submatch indexes relative to off,
// and the match proper starts at start (m[0]+off, or later when the anchored
// regex consumed a rune of context).
func (s *Scanner) match(sc *scratch, cr *compiledRule, path, commit string, content []byte, m []int, off, start int) {
	ss, se := -1, -1
	if g := cr.SecretGroup; g > 0 {
		ss, se = m[2*g], m[2*g+1]
	} else {
		for g := 1; 2*g+1 < len(m); g++ {
			if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				ss, se = m[2*g], m[2*g+1]
				break
			}
		}
		if ss < 0 {
			// The whole match, without the newlines a pattern may take at
			// either end, as gitleaks reports it.
			ss, se = start-off, m[1]
			for ss < se && content[off+ss] == '\n' {
				ss++
			}
			for se > ss && content[off+se-1] == '\n' {
				se--
			}
		}
	}
	if ss < 0 || se <= ss {
		return
	}
	ss, se = ss+off, se+off
	secret := content[ss:se]
	// At the threshold is not enough, as in gitleaks.
	if cr.Entropy > 0 && shannon(secret) <= cr.Entropy {
		return
	}
	if s.allowed(sc, cr, path, commit, content, start, m[1]+off, secret) {
		return
	}
	sc.raw = append(sc.raw, rawFinding{rule: cr.idx, start: ss, end: se, mstart: start})
}

// ---- composite rules ----

// applyRequired keeps a composite rule's finding only when each of its
// required rules has a finding near it, as gitleaks' processRequiredRules
// does. A required rule's findings are what it finds on its own, with its
// own path and allowlists, but whether or not its keywords occur (to
// gitleaks they only pre-filter), whether or not it is skipReport, and
// without checking its own required rules.
func (s *Scanner) applyRequired(sc *scratch, path, commit string, content []byte) {
	rs := s.rs
	for i, n := 0, len(sc.raw); i < n; i++ { // runRequired appends to raw only transiently
		for _, q := range rs.rules[sc.raw[i].rule].req {
			s.runRequired(sc, q.rule, path, commit, content)
		}
	}
	// Decide on the unfiltered findings: a composite rule may be required
	// by another, which sees all of its findings.
	sc.kept = sc.kept[:0]
	for _, f := range sc.raw {
		if s.requiredMet(sc, f, content) {
			sc.kept = append(sc.kept, f)
		}
	}
	sc.raw, sc.kept = sc.kept, sc.raw
}

// ranMain reports whether rule r ran in the main pass, so that all of its
// findings are in sc.raw.
func (s *Scanner) ranMain(sc *scratch, r int32) bool {
	cr := s.rs.rules[r]
	return cr.report && (cr.re == nil || len(cr.Keywords) == 0 || sc.ruleHit[r])
}

// runRequired makes rule r's findings available: a rule that did not run in
// the main pass runs now, into sc.aux, once per blob. An anchored rule whose
// keywords do not occur has no candidates and finds nothing, which is what
// a whole-blob run would find too.
func (s *Scanner) runRequired(sc *scratch, r int32, path, commit string, content []byte) {
	if s.ranMain(sc, r) || slices.Contains(sc.auxRan, r) {
		return
	}
	sc.auxRan = append(sc.auxRan, r)
	n := len(sc.raw)
	if cr := s.rs.rules[r]; cr.re == nil {
		s.pathRule(sc, cr, path, commit)
	} else {
		s.runRule(sc, cr, path, commit, content)
	}
	sc.aux = append(sc.aux, sc.raw[n:]...)
	sc.raw = sc.raw[:n]
}

func (s *Scanner) requiredMet(sc *scratch, f rawFinding, content []byte) bool {
	for _, q := range s.rs.rules[f.rule].req {
		if !s.anyNear(sc, f, q, content) {
			return false
		}
	}
	return true
}

// anyNear reports whether required rule q has a finding near f.
func (s *Scanner) anyNear(sc *scratch, f rawFinding, q compiledReq, content []byte) bool {
	from := sc.aux
	if s.ranMain(sc, q.rule) {
		from = sc.raw
	}
	for _, g := range from {
		if g.rule == q.rule && s.near(sc, f, g, q, content) {
			return true
		}
	}
	return false
}

// near applies withinLines and withinColumns to the starts of the matches.
func (s *Scanner) near(sc *scratch, f, g rawFinding, q compiledReq, content []byte) bool {
	if q.lines < 0 && q.cols < 0 {
		return true
	}
	fl, fc := s.position(sc, f, content)
	gl, gc := s.position(sc, g, content)
	return (q.lines < 0 || abs(fl-gl) <= q.lines) && (q.cols < 0 || abs(fc-gc) <= q.cols)
}

// position is the 1-based line and byte column where f's match starts;
// 0, 0 for a path-only rule's finding, as in gitleaks. (gitleaks counts
// the columns of every line but a fragment's first from the '\n' before
// it, one more than here: the two differ only at the edge of a
// withinColumns bound, between a match on the blob's first line and one on
// another.)
func (s *Scanner) position(sc *scratch, f rawFinding, content []byte) (line, col int) {
	if s.rs.rules[f.rule].re == nil {
		return 0, 0
	}
	if !sc.nlDone {
		sc.newlines = appendNewlines(sc.newlines[:0], content)
		sc.nlDone = true
	}
	k, _ := slices.BinarySearch(sc.newlines, f.mstart) // newlines before the match
	lineStart := 0
	if k > 0 {
		lineStart = sc.newlines[k-1] + 1
	}
	return k + 1, f.mstart - lineStart + 1
}

// appendNewlines appends the offsets of the '\n's in content to dst.
func appendNewlines(dst []int, content []byte) []int {
	for off := 0; ; {
		i := bytes.IndexByte(content[off:], '\n')
		if i < 0 {
			return dst
		}
		dst = append(dst, off+i)
		off += i + 1
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// allowed applies the global and the rule's allowlists to one finding.
func (s *Scanner) allowed(sc *scratch, cr *compiledRule, path, commit string, content []byte, ms, me int, secret []byte) bool {
	for _, list := range [2][]*compiledAllowlist{cr.global, cr.allow} {
		for _, a := range list {
			switch sc.state(a, path, commit) {
			case allowAll:
				return true
			case allowPerFinding:
				if a.allowsFinding(sc, content, ms, me, secret) {
					return true
				}
			}
		}
	}
	return false
}

// allowsFinding evaluates the finding-level checks; the blob-level ones
// (commits, paths) have already passed (AND) or failed (OR).
func (a *compiledAllowlist) allowsFinding(sc *scratch, content []byte, ms, me int, secret []byte) bool {
	regexOK := false
	if a.regex != nil {
		target := secret
		switch a.target {
		case targetMatch:
			target = content[ms:me]
		case targetLine:
			lo := bytes.LastIndexByte(content[:ms], '\n') + 1
			hi := len(content)
			if i := bytes.IndexByte(content[me:], '\n'); i >= 0 {
				hi = me + i
			}
			if hi > lo && content[hi-1] == '\r' {
				hi--
			}
			target = content[lo:hi]
		}
		regexOK = a.regex.Match(target)
	}
	stopOK := false
	if len(a.stops) > 0 {
		sc.lower = append(sc.lower[:0], secret...)
		for i, c := range sc.lower {
			sc.lower[i] = lowerByte(c)
		}
		for _, w := range a.stops {
			if bytes.Contains(sc.lower, w) {
				stopOK = true
				break
			}
		}
	}
	if a.and {
		return (a.regex == nil || regexOK) && (len(a.stops) == 0 || stopOK)
	}
	return regexOK || stopOK
}

// finish sorts, de-duplicates and renders the findings.
func (s *Scanner) finish(sc *scratch, content []byte) []Finding {
	if len(sc.raw) == 0 {
		return nil
	}
	slices.SortFunc(sc.raw, func(x, y rawFinding) int {
		if x.start != y.start {
			return x.start - y.start
		}
		return int(x.rule - y.rule) // rules are sorted by id
	})
	out := make([]Finding, 0, len(sc.raw))
	line, lineStart, pos := 1, 0, 0
	for i, f := range sc.raw {
		if i > 0 && f.rule == sc.raw[i-1].rule && f.start == sc.raw[i-1].start {
			continue
		}
		cr := s.rs.rules[f.rule]
		if cr.generic && s.coveredBySpecific(sc, content, f) {
			continue
		}
		fd := Finding{RuleID: cr.ID, Description: cr.Description}
		if cr.re != nil {
			seg := content[pos:f.start]
			if n := bytes.Count(seg, nl); n > 0 {
				line += n
				lineStart = pos + bytes.LastIndexByte(seg, '\n') + 1
			}
			pos = f.start
			secret := content[f.start:f.end]
			fd.Line, fd.Column = line, f.start-lineStart+1
			fd.Start, fd.End = f.start, f.end
			fd.SecretHash = s.hashSecret(sc, secret)
			fd.Preview = preview(secret)
			fd.Inline = suppress.InlineAllowed(content, f.start, f.end)
		}
		out = append(out, fd)
	}
	return out
}

var nl = []byte{'\n'}

// coveredBySpecific reports whether a finding of a non-generic rule makes
// generic finding f redundant, as gitleaks' filter decides: the two matches
// start on the same line and the other's secret contains f's. raw holds
// one blob's findings, a handful, so a linear look is enough.
func (s *Scanner) coveredBySpecific(sc *scratch, content []byte, f rawFinding) bool {
	secret := content[f.start:f.end]
	line := 0 // where f's match starts, once needed
	for _, g := range sc.raw {
		cr := s.rs.rules[g.rule]
		if cr.generic || cr.re == nil || !bytes.Contains(content[g.start:g.end], secret) {
			continue
		}
		if line == 0 {
			line, _ = s.position(sc, f, content)
		}
		if l, _ := s.position(sc, g, content); l == line {
			return true
		}
	}
	return false
}

func (s *Scanner) hashSecret(sc *scratch, secret []byte) string {
	if sc.mac == nil {
		sc.mac = hmac.New(sha256.New, s.hashKey)
	}
	sc.mac.Reset()
	sc.mac.Write(secret)
	return hex.EncodeToString(sc.mac.Sum(sc.sum[:0]))
}

// Short secrets are passwords and the like, the ones that can be guessed:
// their preview says neither their length nor more than 2 characters, and
// how many it shows tells only whether they have at least 8.
const (
	shortSecret   = 16 // a secret of fewer characters is short
	longPreview   = 4  // characters a long secret's preview shows
	shortPreview  = 2  // characters a short secret's preview shows…
	shortNoPrefix = 8  // …when it has at least this many
)

// preview shows a few characters of the secret, never more than a quarter
// of them, non-printable ones as '?': a secret of at least shortSecret
// characters its first longPreview, "…" and its length ("ghp_…(40)"); a
// shorter one its first shortPreview when it has at least shortNoPrefix
// characters, else none, then "…" and no length ("pa…", "…"), so that
// the preview of a short secret narrows a guess as little as it can and
// still tells two apart at a glance.
func preview(secret []byte) string {
	n := utf8.RuneCount(secret)
	k := 0
	switch {
	case n >= shortSecret:
		k = longPreview
	case n >= shortNoPrefix:
		k = shortPreview
	}
	var b strings.Builder
	for i := 0; i < k; i++ {
		r, size := utf8.DecodeRune(secret)
		secret = secret[size:]
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || (r >= 0x80 && r < 0xa0) {
			r = '?'
		}
		b.WriteRune(r)
	}
	b.WriteString("…")
	if n >= shortSecret {
		b.WriteByte('(')
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(')')
	}
	return b.String()
}

// shannon is the Shannon entropy of b in bits per byte.
func shannon(b []byte) float64 {
	if len(b) == 0 {
		return 0
	}
	var counts [256]int
	for _, c := range b {
		counts[c]++
	}
	n := float64(len(b))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
