// Package scan is gitfleet's secret scanner: a pure-Go, allocation-frugal
// matcher for rules written in the gitleaks TOML format (architecture §8).
//
// # Rules
//
// [Load] and [LoadFile] read a gitleaks v8.30 configuration unmodified: every
// key that version accepts loads with its meaning (`minVersion`, `[extend]`
// with useDefault, path and disabledRules, rules with tags, path-only rules,
// skipReport and `[[rules.required]]` composite rules with withinLines and
// withinColumns, global and per-rule allowlists in both forms with condition,
// regexTarget, stopwords, paths, commits and targetRules). As in gitleaks, a
// rule with the id of an extended one is merged into it field by field, and
// an allowlist's regexes (and paths) are joined into one regex, so a leading
// `(?i)` applies to all of them. A key no gitleaks version knows, an invalid
// regex or a look-around (which Go's RE2 engine cannot run) is an error
// naming the key or rule and its line, so a typo can never silently disable
// a rule; what loads but has no effect is a warning ([RuleSet.Warnings]).
//
// Matching follows gitleaks: a rule runs only when one of its keywords occurs
// in the blob (ASCII case-insensitively); its secret is capture group
// secretGroup, or, when secretGroup is 0, the first non-empty capture group,
// or the whole match without newlines at its ends when the regex has none; a
// secret whose Shannon entropy (bits per byte) does not exceed the rule's
// entropy is dropped; allowlists drop
// findings by commit, path, regex (on the secret, the match or the line) or
// stopword, combined with OR (default) or AND. A rule with a path and no
// regex reports the blob itself when the path matches. A composite rule
// reports a finding only when each required rule matches within the given
// lines and columns of it; a skipReport rule only serves as a required one.
//
// One deliberate difference: a finding's line is where its secret starts,
// where gitleaks reports the line where the whole match starts; they differ
// only for a match that spans lines before its secret.
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
// A blob that is an archive or a compressed file (package archive
// recognises them by content) is opened Config.ArchiveDepth levels deep, and
// each file in it is scanned as a blob at its display path, the inner path
// after "!" (archive.go); a finding records the inner path. A text file in
// it too large to hold whole is scanned in overlapping parts; what is not
// read (a bound, damage, a binary file, a 7z or rar) is counted, and a
// bound reached makes the blob Partial.
//
// Findings carry a keyed hash and a redacted preview of the secret, never the
// secret itself, and never the path or commit: those are the caller's.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package scan
