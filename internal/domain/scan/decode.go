package scan

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"unicode/utf8"

	"gitfleet/internal/domain/suppress"
)

// Encoded secrets (as gitleaks' --max-decode-depth does): after the normal
// pass, spans of the blob that look base64, hex or percent-encoded are
// decoded; each decoded text that is printable is scanned again with the
// rules, in a window of its line (so that `password = "<base64>"` still has
// its keyword and quotes around the decoded value), and decoded again, up to
// Config.DecodeDepth levels. Only a match that overlaps the newly decoded
// bytes is reported: the rest of the window was scanned before. Its
// location is the outermost encoded span in the blob; its hash and preview
// are of the decoded secret.
//
// Differences from gitleaks, on purpose: each span is decoded and scanned on
// its own (gitleaks decodes every span of the blob in place and scans the
// whole blob again at each depth, which costs a full pass per level), and the
// work per blob is bounded (maxDecodeSegments, maxDecodedBytes), so that a
// blob of many small encoded spans costs at most a fixed amount.

// DefaultDecodeDepth is gitleaks' default (--max-decode-depth 5). A deeper
// level only ever scans text that a shallower one decoded, and the work per
// blob is bounded by maxDecodeSegments and maxDecodedBytes whatever the
// depth, so matching gitleaks costs nothing on ordinary blobs: their spans
// rarely decode to printable text at all.
const DefaultDecodeDepth = 5

const (
	// minBase64Len and minHexLen are the shortest encoded spans tried,
	// gitleaks' values.
	minBase64Len = 16
	minHexLen    = 32
	// maxDecodeSegments is how many decoded segments are scanned per blob.
	maxDecodeSegments = 256
	// maxDecodedBytes bounds the bytes decoded and scanned per blob.
	maxDecodedBytes = 1 << 20
	// maxSpanLen: a longer encoded span is decoded up to this length.
	maxSpanLen = 64 << 10
	// decodeContext is how much of the span's line, either side of it, is
	// scanned with the decoded text.
	decodeContext = 256
)

type encKind uint8

const (
	encBase64 encKind = iota + 1
	encHex
	encPercent
)

func (k encKind) String() string {
	switch k {
	case encBase64:
		return "base64"
	case encHex:
		return "hex"
	case encPercent:
		return "percent"
	}
	return "?"
}

// encSpan is a candidate encoded span [lo, hi).
type encSpan struct {
	lo, hi int
	kind   encKind
}

var (
	b64Alpha  [256]bool // the base64 alphabets, standard and URL
	hexAlpha  [256]bool
	likelyB64 [256]bool // base64 text nearly always has one of these (gitleaks' heuristic)
	hexVal    [256]byte // 0xff: not a hex digit
)

func init() {
	for i := range hexVal {
		hexVal[i] = 0xff
	}
	for _, c := range upperAlpha + lowerAlpha + "0123456789+/-_" {
		b64Alpha[c] = true
	}
	for _, c := range "0123456789+/-_" {
		likelyB64[c] = true
	}
	for i, c := range "0123456789abcdef" {
		hexAlpha[c], hexVal[c] = true, byte(i)
	}
	for i, c := range "ABCDEF" {
		hexAlpha[c], hexVal[c] = true, byte(10+i)
	}
}

const (
	upperAlpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lowerAlpha = "abcdefghijklmnopqrstuvwxyz"
)

// findSpans appends the candidate spans of text[lo:hi] to dst.
//
// Base64 and hex spans are maximal runs of base64 characters, at least
// minBase64Len long. A run is hex when it is all hex digits,
// at least minHexLen long and of even length; it is base64 when it contains a
// digit or one of +/-_ (long identifiers of letters only are not tried).
//
// A percent span runs from the first %XX of a line to its last.
func findSpans(dst []encSpan, text []byte, lo, hi int) []encSpan {
	// A run of minBase64Len (16) bytes covers a whole 8-byte block (counted
	// from lo): blocks are tested 8 bytes at a time, with bit tricks, and
	// only a block of base64 characters (or '.' and ',', tested with the
	// digits as the range "+,-./0-9") is looked at closer.
	for i := lo; i+8 <= hi; i += 8 {
		// The high bit of each byte of m: a letter, in '+'..'9' or '_'.
		x := binary.LittleEndian.Uint64(text[i:])
		x7 := x &^ highs
		t := x7 ^ ('_' * ones)
		l := x7 | 0x2020202020202020
		m := (l+(0x80-'a')*ones)&^(l+(0x7f-'z')*ones) |
			(x7+(0x80-'+')*ones)&^(x7+(0x7f-'9')*ones) |
			^((t + 0x7f7f7f7f7f7f7f7f) | t)
		if m&^x&highs != highs {
			continue
		}
		s, e := i, i
		for e < i+8 && b64Alpha[text[e]] {
			e++
		}
		if e < i+8 {
			continue // '.' or ',', which alphaBlock lets through
		}
		for s > lo && b64Alpha[text[s-1]] {
			s--
		}
		for e < hi && b64Alpha[text[e]] {
			e++
		}
		if e-s >= minBase64Len {
			dst = classifyRun(dst, text, s, e, hi)
		}
		// Past the run: on to the block after the one that holds e.
		i += (e - i) &^ 7
	}
	for i := lo; i < hi; {
		j := bytes.IndexByte(text[i:hi], '%')
		if j < 0 {
			break
		}
		i += j
		if !isPercentEscape(text, i, hi) {
			i++
			continue
		}
		eol := hi
		if k := bytes.IndexByte(text[i:hi], '\n'); k >= 0 {
			eol = i + k
		}
		end := i + 3
		for k := eol - 3; k > i; k-- {
			if text[k] == '%' && isPercentEscape(text, k, eol) {
				end = k + 3
				break
			}
		}
		dst = append(dst, encSpan{i, min(end, i+maxSpanLen), encPercent})
		i = eol
	}
	return dst
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func isPercentEscape(text []byte, i, hi int) bool {
	return i+2 < hi && hexAlpha[text[i+1]] && hexAlpha[text[i+2]]
}

// classifyRun appends the run text[s:e] of base64 characters, as a hex or a
// base64 span, when it could be either.
func classifyRun(dst []encSpan, text []byte, s, e, hi int) []encSpan {
	allHex, likely := true, false
	for _, c := range text[s:e] {
		allHex = allHex && hexAlpha[c]
		likely = likely || likelyB64[c]
	}
	switch {
	case allHex && e-s >= minHexLen:
		if (e-s)%2 == 0 {
			return append(dst, encSpan{s, min(e, s+maxSpanLen), encHex})
		}
		return dst // gitleaks too leaves odd-length hex alone
	case !likely:
		return dst
	}
	// Up to two '=' of padding.
	for n := 0; n < 2 && e < hi && text[e] == '='; n++ {
		e++
	}
	if e-s > maxSpanLen {
		e = s + maxSpanLen
	}
	return append(dst, encSpan{s, e, encBase64})
}

// decodeSpan appends the decoded span to dst; ok is false when it does not
// decode to printable text (see printable).
func decodeSpan(dst, text []byte, sp encSpan) (_ []byte, ok bool) {
	src := text[sp.lo:sp.hi]
	n := len(dst)
	switch sp.kind {
	case encBase64:
		src = bytes.TrimRight(src, "=")
		if len(src)%4 == 1 {
			src = src[:len(src)-1] // a stray character, as in "<base64>x"
		}
		enc := base64.RawStdEncoding
		std := bytes.ContainsAny(src, "+/")
		if bytes.ContainsAny(src, "-_") {
			if std {
				return dst, false // both alphabets: not base64
			}
			enc = base64.RawURLEncoding
		}
		// Most runs are not base64 at all: reject them on their first 6
		// bytes before decoding the rest.
		if len(src) >= 8 {
			var head [6]byte
			if _, err := enc.Decode(head[:], src[:8]); err != nil || !printableHead(head[:]) {
				return dst, false
			}
		}
		dst = slices.Grow(dst, enc.DecodedLen(len(src)))
		m, err := enc.Decode(dst[n:n+enc.DecodedLen(len(src))], src)
		if err != nil {
			return dst, false
		}
		dst = dst[:n+m]
	case encHex:
		for i := 0; i+1 < len(src); i += 2 {
			b := hexVal[src[i]]<<4 | hexVal[src[i+1]]
			if b < 0x20 && b != '\t' && b != '\n' && b != '\r' || b == 0x7f {
				return dst[:n], false
			}
			dst = append(dst, b)
		}
	case encPercent:
		for i := 0; i < len(src); i++ {
			if src[i] == '%' && isPercentEscape(src, i, len(src)) {
				dst = append(dst, hexVal[src[i+1]]<<4|hexVal[src[i+2]])
				i += 2
				continue
			}
			dst = append(dst, src[i])
		}
	}
	return dst, len(dst) > n && printable(dst[n:])
}

// printableHead is a quick look at the first bytes of a decoding: no ASCII
// control character but tab and line ends (bytes ≥ 0x80 may start UTF-8).
func printableHead(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return false
		}
	}
	return true
}

// printable reports whether b is text: valid UTF-8 without control
// characters other than tab and line ends. Random bytes almost never are,
// so binary that happens to be base64 or hex is not scanned.
func printable(b []byte) bool {
	return printableHead(b) && utf8.Valid(b)
}

// decodeState is the decoding pass over one blob.
type decodeState struct {
	s            *Scanner
	path, commit string
	content      []byte
	main         []rawFinding // the normal pass's findings
	sub          *scratch     // scans the windows
	segments     int          // decoded segments scanned
	budget       int          // bytes left to decode and scan
	buf          []byte
	found        []decodedFinding
}

type decodedFinding struct {
	rule  int32
	top   encSpan // the outermost encoded span, in the blob
	chain string
	depth int
	hash  string
	prev  string
}

// decodePass runs the decoding pass over content, whose normal pass left
// its findings in sc.raw, and returns the new findings it makes.
func (s *Scanner) decodePass(sc *scratch, path, commit string, content []byte) []Finding {
	sc.spans = findSpans(sc.spans[:0], content, 0, len(content))
	if len(sc.spans) == 0 {
		return nil
	}
	d := &decodeState{s: s, path: path, commit: commit, content: content, main: sc.raw,
		budget: maxDecodedBytes, buf: sc.decBuf[:0]}
	d.sub = s.pool.Get().(*scratch)
	defer s.put(d.sub)
	d.walk(content, sc.spans, encSpan{}, "", 1)
	sc.decBuf = d.buf[:0]
	if len(d.found) == 0 {
		return nil
	}
	// One finding per rule and secret per encoded place: the shallowest.
	slices.SortStableFunc(d.found, func(x, y decodedFinding) int { return x.depth - y.depth })
	if !sc.nlDone {
		sc.newlines = appendNewlines(sc.newlines[:0], content)
		sc.nlDone = true
	}
	var out []Finding
	for i, f := range d.found {
		if slices.ContainsFunc(d.found[:i], func(g decodedFinding) bool {
			return g.rule == f.rule && g.hash == f.hash && g.top.lo < f.top.hi && f.top.lo < g.top.hi
		}) {
			continue
		}
		cr := s.rs.rules[f.rule]
		k, _ := slices.BinarySearch(sc.newlines, f.top.lo)
		lineStart := 0
		if k > 0 {
			lineStart = sc.newlines[k-1] + 1
		}
		out = append(out, Finding{RuleID: cr.ID, Description: cr.Description,
			Line: k + 1, Column: f.top.lo - lineStart + 1, Start: f.top.lo, End: f.top.hi,
			SecretHash: f.hash, Preview: f.prev, Decoded: f.chain, DecodeDepth: f.depth,
			Inline: suppress.InlineAllowed(content, f.top.lo, f.top.hi)})
	}
	return out
}

// walk decodes spans of text (the blob at depth 1, a window after) and scans
// each decoded segment. top is the outermost span when depth > 1.
func (d *decodeState) walk(text []byte, spans []encSpan, top encSpan, chain string, depth int) {
	for _, sp := range spans {
		if d.segments >= maxDecodeSegments || d.budget <= 0 {
			return
		}
		if sp.hi-sp.lo > 2*d.budget {
			continue // its decoding may not fit
		}
		var ok bool
		d.buf, ok = decodeSpan(d.buf[:0], text, sp)
		if !ok {
			continue
		}
		d.segments++
		if d.s.onDecode != nil {
			d.s.onDecode(sp.kind.String(), depth)
		}
		// The window: up to decodeContext bytes of the line either side.
		wlo := max(0, sp.lo-decodeContext)
		if k := bytes.LastIndexByte(text[wlo:sp.lo], '\n'); k >= 0 {
			wlo += k + 1
		}
		whi := min(len(text), sp.hi+decodeContext)
		if k := bytes.IndexByte(text[sp.hi:whi], '\n'); k >= 0 {
			whi = sp.hi + k
		}
		win := make([]byte, 0, sp.lo-wlo+len(d.buf)+whi-sp.hi)
		win = append(append(append(win, text[wlo:sp.lo]...), d.buf...), text[sp.hi:whi]...)
		dlo, dhi := sp.lo-wlo, sp.lo-wlo+len(d.buf)
		d.budget -= len(win)
		t, ch := top, chain+"/"+sp.kind.String()
		if depth == 1 {
			t, ch = sp, sp.kind.String()
		}
		d.scanWindow(win, dlo, dhi, t, ch, depth)
		if depth < d.s.cfg.DecodeDepth {
			if inner := findSpans(nil, win, dlo, dhi); len(inner) > 0 {
				d.walk(win, inner, t, ch, depth+1)
			}
		}
	}
}

// scanWindow runs the rules over a window and keeps the findings that
// overlap its decoded bytes [dlo, dhi) and that the normal pass did not make.
func (d *decodeState) scanWindow(win []byte, dlo, dhi int, top encSpan, chain string, depth int) {
	s, sc := d.s, d.sub
	sc.reset()
	s.scanText(sc, d.path, d.commit, win)
	for _, f := range sc.raw {
		cr := s.rs.rules[f.rule]
		if cr.re == nil || !cr.report || f.end <= dlo || f.start >= dhi {
			continue
		}
		if cr.generic && s.coveredBySpecific(sc, win, f) {
			continue
		}
		secret := win[f.start:f.end]
		if d.inMain(f.rule, secret, top) {
			continue
		}
		// A match that takes in the window's encoded text beside the
		// decoded bytes, where the normal pass found that rule's secret
		// over the whole encoded span, is that secret again with a part
		// of it decoded in place (a JWT whose signature decodes to
		// text): not a secret of its own.
		if (f.start < dlo || f.end > dhi) && d.mainCovers(f.rule, top) {
			continue
		}
		d.found = append(d.found, decodedFinding{rule: f.rule, top: top, chain: chain, depth: depth,
			hash: s.hashSecret(sc, secret), prev: preview(secret)})
	}
}

// inMain reports whether the normal pass found this secret with this rule
// in the encoded span (a secret that a percent decoding left as is, say).
func (d *decodeState) inMain(rule int32, secret []byte, top encSpan) bool {
	for _, g := range d.main {
		if g.rule == rule && g.start < top.hi && g.end > top.lo &&
			bytes.Equal(d.content[g.start:g.end], secret) {
			return true
		}
	}
	return false
}

// mainCovers reports whether the normal pass found rule's secret over the
// whole encoded span top.
func (d *decodeState) mainCovers(rule int32, top encSpan) bool {
	for _, g := range d.main {
		if g.rule == rule && g.start <= top.lo && g.end >= top.hi {
			return true
		}
	}
	return false
}

// decodePolicy is what of the decoding determines the findings, for Policy.
func decodePolicy(depth int) string {
	if depth <= 0 {
		return "decode=off"
	}
	return fmt.Sprintf("decode/2=depth:%d,b64:%d,hex:%d,segments:%d,bytes:%d,span:%d,context:%d",
		depth, minBase64Len, minHexLen, maxDecodeSegments, maxDecodedBytes, maxSpanLen, decodeContext)
}
