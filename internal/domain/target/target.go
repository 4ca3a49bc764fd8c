package target

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// SyntheticRefPrefix is where explicit commits are lowered to: a commit
// scanned on request becomes a ref of its own, with its own watermark.
const SyntheticRefPrefix = "refs/gitfleet/scan-targets/commits/"

// SyntheticRef is the stable ref of an explicit commit (full, lower-case hex).
func SyntheticRef(commit string) string { return SyntheticRefPrefix + strings.ToLower(commit) }

// Request is one location with an optional selection, as given.
type Request struct {
	Location string
	Refs     []string
	Commits  []string
}

// Selection says what to scan in a repository; empty means every branch
// and tag.
type Selection struct {
	Refs    []string `json:"refs,omitempty"`
	Commits []string `json:"commits,omitempty"`
}

// Empty reports the default selection.
func (s Selection) Empty() bool { return len(s.Refs) == 0 && len(s.Commits) == 0 }

func (s Selection) equal(o Selection) bool {
	return slices.Equal(s.Refs, o.Refs) && slices.Equal(s.Commits, o.Commits)
}

// Target is one normalized shard target.
type Target struct {
	// Location is a canonical URL, or an absolute, cleaned local path.
	Location  string    `json:"location"`
	Local     bool      `json:"local,omitempty"`
	Selection Selection `json:"selection"`
}

// Key is the shard key: a digest of the location and the selection, so two
// requests for the same thing share a shard and nothing about the target
// has to be parsed back out of the key.
func (t Target) Key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%t\x00", t.Location, t.Local)
	for _, r := range t.Selection.Refs {
		fmt.Fprintf(h, "ref\x00%s\x00", r)
	}
	for _, c := range t.Selection.Commits {
		fmt.Fprintf(h, "commit\x00%s\x00", c)
	}
	return "target:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// ErrInvalid is wrapped by every normalization error.
var ErrInvalid = errors.New("invalid scan target")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Normalized is the outcome of Normalize.
type Normalized struct {
	Targets []Target
	// StrippedCredentials reports that some URL carried credentials, which
	// were dropped (they never reach a workflow).
	StrippedCredentials bool
}

// Normalize canonicalizes every request, merges duplicates, rejects the same
// target requested with different selections, and sorts the result.
func Normalize(reqs []Request) (Normalized, error) {
	var out Normalized
	byLocation := map[string]int{}
	for _, r := range reqs {
		t, stripped, err := normalize(r)
		if err != nil {
			return Normalized{}, err
		}
		out.StrippedCredentials = out.StrippedCredentials || stripped
		if i, ok := byLocation[t.Location]; ok {
			if !out.Targets[i].Selection.equal(t.Selection) {
				return Normalized{}, invalid("%s is requested twice with different selections; request it once with everything to scan", t.Location)
			}
			continue
		}
		byLocation[t.Location] = len(out.Targets)
		out.Targets = append(out.Targets, t)
	}
	slices.SortFunc(out.Targets, func(a, b Target) int { return strings.Compare(a.Location, b.Location) })
	return out, nil
}

func normalize(r Request) (Target, bool, error) {
	// Checked before trimming: a path that ends in a newline is another
	// path, and control characters cannot travel in a workflow id (a gRPC
	// header) anyway.
	if strings.IndexFunc(r.Location, unicode.IsControl) >= 0 {
		return Target{}, false, invalid("the location contains a control character (a newline, a tab, an escape)")
	}
	loc := strings.TrimSpace(r.Location)
	if loc == "" {
		return Target{}, false, invalid("empty location")
	}
	var t Target
	var stripped bool
	var err error
	if strings.Contains(loc, "://") {
		t.Location, stripped, err = CanonicalURL(loc)
	} else {
		t.Local = true
		t.Location, err = filepath.Abs(loc) // Abs also cleans
	}
	if err != nil {
		return Target{}, false, err
	}
	if t.Selection.Refs, err = normalizeRefs(r.Refs); err != nil {
		return Target{}, false, err
	}
	if t.Selection.Commits, err = normalizeCommits(r.Commits); err != nil {
		return Target{}, false, err
	}
	return t, stripped, nil
}

// CanonicalURL lower-cases scheme and host, drops credentials, a trailing
// slash and ".git". It reports whether credentials were dropped.
func CanonicalURL(s string) (string, bool, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", false, invalid("not a valid URL") // url errors quote the input
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", false, invalid("unsupported URL scheme %q: use https", u.Scheme)
	}
	if u.Host == "" {
		return "", false, invalid("URL has no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", false, invalid("repository URLs take no query or fragment")
	}
	// An encoded control character (%0a) is one once decoded: in a path
	// git and the workflow id (a gRPC header) would carry.
	if strings.IndexFunc(u.Path, unicode.IsControl) >= 0 {
		return "", false, invalid("the URL's path holds an encoded control character (%%0a, %%09, %%1b...)")
	}
	stripped := u.User != nil
	u.User = nil
	u.Host = strings.ToLower(u.Host)
	p := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	if p == "" || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "/./") {
		return "", false, invalid("URL path %q is not a repository path", u.Path)
	}
	u.Path, u.RawPath = p, ""
	return u.String(), stripped, nil
}

func normalizeRefs(refs []string) ([]string, error) {
	var out []string
	for _, r := range refs {
		r = strings.TrimSpace(r)
		if err := validRef(r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// validRef applies git's ref-name rules (git check-ref-format) that matter
// here; short names such as "main" are resolved against the repository later.
func validRef(r string) error {
	switch {
	case r == "", r == "@", len(r) > 1024:
		return invalid("bad ref name %q", r)
	case strings.HasPrefix(r, "-"), strings.HasPrefix(r, "/"), strings.HasSuffix(r, "/"),
		strings.HasSuffix(r, ".lock"), strings.HasSuffix(r, "."),
		strings.Contains(r, ".."), strings.Contains(r, "//"), strings.Contains(r, "@{"), strings.Contains(r, "/."):
		return invalid("bad ref name %q", r)
	case strings.HasPrefix(r, SyntheticRefPrefix):
		return invalid("%s refs are gitfleet's own; use --commit", SyntheticRefPrefix)
	}
	for _, c := range r {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return invalid("bad ref name %q", r)
		}
	}
	return nil
}

func normalizeCommits(commits []string) ([]string, error) {
	var out []string
	for _, c := range commits {
		c = strings.ToLower(strings.TrimSpace(c))
		if (len(c) != 40 && len(c) != 64) || strings.Trim(c, "0123456789abcdef") != "" {
			return nil, invalid("%q is not a full commit id (40 hex digits; abbreviations can become ambiguous)", c)
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
