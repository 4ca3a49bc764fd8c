// Package scan is gitfleet's secret scanner: a pure-Go, allocation-frugal
// matcher for rules written in the gitleaks TOML format (DESIGN §8).
//
// # Rules
//
// [Load] and [LoadFile] read a gitleaks configuration: `title`, `[[rules]]`
// (id, description, regex, secretGroup, entropy, keywords, path, tags and
// per-rule allowlists in both the old `[rules.allowlist]` and the new
// `[[rules.allowlists]]` form), global `[allowlist]` / `[[allowlists]]`
// (with `targetRules` to restrict them) and `[extend]` (useDefault, path,
// disabledRules). `[extend] useDefault = true` merges the file's rules over the
// embedded default set ([Default]); a rule with the same id replaces the
// default one as a whole. Unknown or unsupported keys, invalid regexes and
// look-arounds (which Go's RE2 engine cannot run) are errors naming the rule,
// so a typo can never silently disable a rule.
//
// Matching follows gitleaks: a rule runs only when one of its keywords occurs
// in the blob (ASCII case-insensitively); its secret is capture group
// secretGroup, or, when secretGroup is 0, the first non-empty capture group,
// or the whole match when the regex has none; a secret whose Shannon entropy
// (bits per byte) is below the rule's entropy is dropped; allowlists drop
// findings by commit, path, regex (on the secret, the match or the line) or
// stopword, combined with OR (default) or AND. A rule with a path and no
// regex reports the blob itself when the path matches.
//
// # Scanning
//
// A [Scanner] finds every keyword of the rule set in one pass over the blob
// (an Aho–Corasick automaton that folds ASCII case as it goes, so the blob is
// never copied), then runs only the rules whose keywords occurred. When the
// regex of a rule provably matches only text that contains one of its
// keywords, within a bounded distance, and has a bounded match length, it is
// tried anchored at the few positions near the keyword occurrences where a
// match can start instead of being searched for in the whole blob; the
// result is identical to a whole-blob run (see anchored.go), only faster.
//
// Findings carry a keyed hash and a redacted preview of the secret, never the
// secret itself, and never the path or commit: those are the caller's.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package scan
