package scan

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gitfleet/internal/domain/archive"
)

// Archives (as gitleaks' --max-archive-depth does): a blob that is an
// archive or a compressed file (package archive recognises them by their
// content) is opened, Config.ArchiveDepth levels deep, and each file in it
// is scanned with the same rules, at its display path: the blob's path and
// the inner path joined with "!" (dist/app.jar!config/app.properties), which
// path rules and allowlists see as gitleaks' do. A file that is binary is
// skipped as a blob would be; path-only rules still apply to it, and to
// the archives themselves. The work per blob is bounded by
// Config.ArchiveLimits and MaxBlobBytes per file; what a bound or damage
// left out, and each binary file, 7z or rar not read, is reported in
// Result.ArchiveSkips, and a limit reached makes the blob Partial
// (ArchiveSkipIsPartial). An archive of which nothing
// can be read (damaged from its first bytes) is the blob it would be with
// archives off, binary mostly, with its skip.
//
// Differences from gitleaks, on purpose: archives are recognised by
// content, not by name (gitleaks opens no .jar, and every .zip, .gz … that
// its name claims); a global allowlist's paths are matched against the
// name of a file in its archive at every level (gitleaks matches the first
// level only), as well as against the whole display path; 7z and rar, and
// the lz4, lzip, brotli and zlib streams, are not opened (7z and rar are
// counted, as skips: the scan says it did not read them).

// DefaultArchiveDepth is how many levels of archives are opened by
// default. gitleaks opens none unless asked (--max-archive-depth defaults
// to 0); gitfleet opens them, because a key in a committed jar or tarball
// is as leaked as one in a text file. The depth does not bound the work:
// archive.Limits and MaxBlobBytes do, whatever the depth. It only stops
// nesting, which real archives rarely take past three levels (an ear of
// wars of jars): 8, the depth gitleaks' own tests use, leaves room.
const DefaultArchiveDepth = 8

// WithArchiveDepth is a scanner like s that opens archives this many
// levels deep (0 disables opening them).
func (s *Scanner) WithArchiveDepth(depth int) *Scanner {
	cfg := s.cfg
	cfg.ArchiveDepth = depth
	return s.withConfig(cfg)
}

// scanArchive scans a blob that is an archive and returns its Result and
// true; false when archives are off or the blob is none.
func (s *Scanner) scanArchive(sc *scratch, path string, content []byte, commit string) (Result, bool) {
	if s.cfg.ArchiveDepth <= 0 || archive.Detect(content) == archive.None {
		return Result{}, false
	}
	var found []Finding
	read := false
	skips := archive.Walk(content, s.archiveOptions(), func(e archive.Entry) {
		read = true
		if s.allowlistedEntry(e.Path, commit) {
			return
		}
		at := path
		if e.Path != "" {
			at += archive.Separator + e.Path
		}
		var fs []Finding
		switch {
		case e.Opened || e.Skipped:
			fs = s.pathFindings(at, commit)
		case e.Part != nil:
			fs = s.scanPart(at, commit, e.Content, e.Part)
		default:
			// Walk passes on no archive as a file: this does not recurse.
			fs = s.Scan(at, e.Content, commit).Findings
		}
		for i := range fs {
			fs[i].Archive = e.Path
		}
		found = append(found, fs...)
	})
	// A compressed file whose content is binary was read (its head, and to
	// its end): its skip says so.
	if !read && len(skips) > 0 && !slices.ContainsFunc(skips, func(k archive.Skip) bool { return k.Reason == archive.SkipBinary }) {
		// Nothing could be read (damage, a bomb at its first bytes, a 7z):
		// the blob is what it would be without archives, binary mostly,
		// and the skip says why. Text is scanned as text.
		if bytes.IndexByte(content[:min(len(content), binarySniffLen)], 0) < 0 {
			return Result{}, false
		}
		res := s.skipped(sc, path, commit, SkipBinary)
		res.ArchiveSkips = skips
		res.Partial = res.Partial || s.archivePartial(skips)
		return res, true
	}
	// The archive is a file too, for the path rules; a compressed file's
	// content is at its own path, where they ran already: once is enough.
	s.pathRules(sc, path, commit)
	res := Result{Findings: s.finish(sc, nil), ArchiveSkips: skips, Partial: s.archivePartial(skips)}
	seen := map[Finding]bool{}
	for _, f := range res.Findings {
		seen[f] = true
	}
	for _, f := range found {
		if !seen[f] {
			seen[f] = true
			res.Findings = append(res.Findings, f)
		}
	}
	return res, true
}

// ArchiveSkipIsPartial says whether a skip of this reason in an archive
// makes a run Partial: a limit of the walk reached (a bomb, or content past
// the bounds: expanded size, ratio, entries, memory) always does — what
// came after it was never read; a file over the size limit or a binary
// file as the same skip of a blob does (Config.OversizedIsPartial,
// BinaryIsPartial). The depth, damage, encryption and what is not opened
// (7z, rar, a method) are what the archive is: counted, not Partial.
func (s *Scanner) ArchiveSkipIsPartial(r archive.Reason) bool {
	switch r {
	case archive.SkipBytes, archive.SkipRatio, archive.SkipEntries, archive.SkipMemory:
		return true
	case archive.SkipEntrySize:
		return s.cfg.OversizedIsPartial
	case archive.SkipBinary:
		return s.cfg.BinaryIsPartial
	}
	return false
}

func (s *Scanner) archivePartial(skips []archive.Skip) bool {
	return slices.ContainsFunc(skips, func(k archive.Skip) bool { return s.ArchiveSkipIsPartial(k.Reason) })
}

// partOverlap is how much the parts of a file too large to hold whole
// overlap (archive.Options.Overlap): a finding is made in the part whose
// kept range its secret starts in, and is the same as in the whole file
// when its match, its line and its encoded span reach no further than
// partOverlap/2 = 128 KiB either side of that start. That covers a
// decoded span whole (maxSpanLen, 64 KiB, and its decodeContext), the
// longest PEM private keys (an RSA 16384-bit key is under 13 KB) and the
// lines gitleaks:allow and line allowlists read, but for lines longer
// than 128 KiB (minified files) at a part's edge. Parts of 10 MiB (the
// default MaxBlobBytes) read 2.5% twice.
const partOverlap = 256 << 10

func (s *Scanner) archiveOptions() archive.Options {
	return archive.Options{Depth: s.cfg.ArchiveDepth, MaxEntryBytes: max(s.cfg.MaxBlobBytes, 0), Limits: s.cfg.ArchiveLimits,
		SniffLen: binarySniffLen, Binary: func(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }, Pool: s.walks,
		Overlap: partOverlap}
}

// scanPart scans one part of a text file in an archive too large to hold
// whole (archive.Part): the findings whose secret starts in the part's
// kept range, placed in the file (offsets, line and column); the path
// rules once, with the first part. The part is text whatever bytes it
// holds (the file's first bytes were) and never an archive: it is not
// checked for either.
func (s *Scanner) scanPart(path, commit string, content []byte, p *archive.Part) []Finding {
	sc := s.pool.Get().(*scratch)
	defer s.put(sc)
	if s.allowlistedBlob(sc, path, commit) {
		return nil
	}
	if p.Offset == 0 {
		s.pathRules(sc, path, commit)
	}
	fs := s.textFindings(sc, path, commit, content)
	kept := fs[:0]
	for _, f := range fs {
		if f.Line == 0 { // a path rule's
			kept = append(kept, f)
			continue
		}
		if f.Start < p.From || f.Start >= p.To {
			continue
		}
		if f.Line == 1 {
			f.Column += int(p.Column)
		}
		f.Line += int(p.Lines)
		f.Start += int(p.Offset)
		f.End += int(p.Offset)
		kept = append(kept, f)
	}
	return kept
}

// allowlistedEntry reports whether a global allowlist that applies to every
// rule allows a file in an archive, or an archive it is in, by its name in
// its archive (gitleaks' check of an entry's name).
func (s *Scanner) allowlistedEntry(inner, commit string) bool {
	if inner == "" {
		return false
	}
	for name := range strings.SplitSeq(inner, archive.Separator) {
		sc := s.pool.Get().(*scratch)
		allowed := s.allowlistedBlob(sc, name, commit)
		s.put(sc)
		if allowed {
			return true
		}
	}
	return false
}

// pathFindings are the findings of the path-only rules on a file that is
// not scanned (binary, too large, an archive).
func (s *Scanner) pathFindings(path, commit string) []Finding {
	sc := s.pool.Get().(*scratch)
	defer s.put(sc)
	if s.allowlistedBlob(sc, path, commit) {
		return nil
	}
	s.pathRules(sc, path, commit)
	return s.finish(sc, nil)
}

// archivePolicy is what of opening archives determines the findings, for
// Policy.
func archivePolicy(cfg Config) string {
	if cfg.ArchiveDepth <= 0 {
		return "archive=off"
	}
	return fmt.Sprintf("archive=depth:%d,%s,%s,parts:%d", cfg.ArchiveDepth, cfg.ArchiveLimits, archive.Version, partOverlap)
}
