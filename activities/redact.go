package activities

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/errclass"
)

// digest names a shard key, location, ref or path in logs and errors
// without revealing it: the scanner's keyed digest (scan.Scanner.Digest),
// so that nobody without the installation's finding key can tell which
// name it was, not even by digesting common ones ("prod.env", ".env").
func (s *Shards) digest(name string) string {
	if s.Scanner != nil {
		return s.Scanner.Digest(name)
	}
	mac := hmac.New(sha256.New, processNameKey)
	mac.Write([]byte(name))
	return hex.EncodeToString(mac.Sum(nil))[:scan.DigestLen]
}

// processNameKey keys the digests of Shards given no scanner (they scan
// nothing, so no name of theirs needs to correlate across processes).
var processNameKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}()

// redactedError is AppError for the shard activities, whose errors come back
// from the Git layer naming refs, paths, commits and repository locations:
// the class and reason are kept; every token that could name scanned
// content is replaced by a digest, because these messages end up in logs
// and workflow histories.
func (s *Shards) redactedError(err error) error {
	if err == nil {
		return nil
	}
	c := errclass.Classify(err)
	return AppError(&errclass.Error{Class: c.Class, Reason: c.Reason, RetryAfter: c.RetryAfter, Err: errors.New(redact(err.Error(), s.digest))})
}

// redact replaces by their digests, so that equal names still read as
// equal: every quoted string whole (a name as gitread and go-git quote
// it, %q, or as git and a server's text quote it, 'in single quotes':
// spaces and all), and every other word that looks like a name — with a
// slash or backslash (a path, a ref, a URL), an underscore ("id_rsa",
// "SECRET_KEY"; gitfleet's own settings stay, GITHUB_TOKEN, GITFLEET_*), a dot inside (a
// file at a repository's root, "prod.env", a dotfile, a host), or an
// object id (16 hex digits or more). Numbers with a unit ("1.5s",
// "256MiB") and words of the message itself are kept. A name neither
// quoted nor shaped like one ("Makefile", "secret-name" unquoted) cannot
// be told from a word ("read-only"): the Git layer quotes the paths it
// puts in its errors.
//
// The message may hold a Git server's own text (a sideband message, a
// local target's .git file): any white space separates words, and what is
// kept is made printable (controls, line breaks included, and invisible
// runes escaped: textsafe.Printable), so that it can neither forge log
// lines nor hide what follows. Every step of the loop consumes at least
// one byte of the message, whatever it holds.
func redact(msg string, digest func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(msg); {
		if r, size := utf8.DecodeRuneInString(msg[i:]); unicode.IsSpace(r) {
			b.WriteString(textsafe.Printable(msg[i : i+size]))
			i += size
			continue
		}
		// Opening punctuation stays: "(open x", "[x".
		for i < len(msg) && strings.IndexByte("([{<", msg[i]) >= 0 {
			b.WriteByte(msg[i])
			i++
		}
		if i < len(msg) && (msg[i] == '"' || msg[i] == '`') {
			if q, err := strconv.QuotedPrefix(msg[i:]); err == nil {
				name, _ := strconv.Unquote(q)
				b.WriteString("‹" + digest(name) + "›")
				i += len(q)
				continue
			}
		}
		if i < len(msg) && msg[i] == '\'' {
			if n := singleQuoted(msg[i:]); n > 0 {
				b.WriteString("‹" + digest(msg[i+1:i+n-1]) + "›")
				i += n
				continue
			}
		}
		end := strings.IndexFunc(msg[i:], unicode.IsSpace)
		if end < 0 {
			end = len(msg) - i
		}
		field := msg[i : i+end]
		i += end
		core := strings.Trim(field, `"'()[]{}<>,:;`)
		if core == "" || !nameLike(core) {
			b.WriteString(textsafe.Printable(field))
			continue
		}
		b.WriteString(textsafe.Printable(strings.Replace(field, core, "‹"+digest(core)+"›", 1)))
	}
	return b.String()
}

// maxSingleQuoted bounds how far a single-quoted name is looked for (a
// path is at most 4 KiB), so that a message of many unclosed quotes costs
// no more than that per quote.
const maxSingleQuoted = 4096

// singleQuoted is the length of the single-quoted name msg starts with,
// quotes included ('refs/heads/x', 'my secret.env', as git and shells
// quote): up to the next quote that ends a word — followed by the end,
// white space or punctuation —, so that an apostrophe inside ("it's") does
// not close it. 0 when there is none within maxSingleQuoted.
func singleQuoted(msg string) int {
	for j := 1; j < len(msg) && j < maxSingleQuoted; j++ {
		if msg[j] != '\'' {
			continue
		}
		if j+1 == len(msg) {
			return j + 1
		}
		if r, _ := utf8.DecodeRuneInString(msg[j+1:]); unicode.IsSpace(r) || unicode.IsPunct(r) {
			return j + 1
		}
	}
	return 0
}

var (
	hexID        = regexp.MustCompile(`^[0-9a-fA-F]{16,}$`)
	numberOfUnit = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[a-zA-Zµ]*$`)
	// gitfleetSetting and settings are gitfleet's settings, which a
	// message names so that the operator knows what to change: kept.
	gitfleetSetting = regexp.MustCompile(`^GITFLEET_[A-Z0-9_]+$`)
	settings        = func() map[string]bool {
		m := map[string]bool{}
		for _, v := range config.Vars() {
			m[v] = true
		}
		return m
	}()
)

// nameLike says whether a word of an error message may be a name: with a
// slash, an underscore (id_rsa, a file name; prose has none) or an inner
// dot, or an object id.
func nameLike(w string) bool {
	switch {
	case strings.ContainsAny(w, `/\`), hexID.MatchString(w):
		return true
	case numberOfUnit.MatchString(w), gitfleetSetting.MatchString(w), settings[w]:
		return false
	case strings.Contains(w, "_"):
		return true
	}
	return strings.Contains(strings.TrimRight(w, "."), ".")
}
