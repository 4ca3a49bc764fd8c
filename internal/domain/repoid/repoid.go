package repoid

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ID names one repository on one host as a user asked for it. Owner and Name
// keep the case they were given; Key is the case-folded form used for
// workflow ids and lookups (GitHub names are case-insensitive).
type ID struct {
	Host  string `json:"host"`
	Owner string `json:"owner"`
	Name  string `json:"name"`
}

// String is the "host/owner/name" form.
func (id ID) String() string { return id.Host + "/" + id.Owner + "/" + id.Name }

// Key is the canonical, case-folded "host/owner/name".
func (id ID) Key() string { return strings.ToLower(id.String()) }

// FullName is GitHub's "owner/name".
func (id ID) FullName() string { return id.Owner + "/" + id.Name }

// SameRepository reports whether both ids name the same repository (GitHub
// compares owner and repository names case-insensitively).
func (id ID) SameRepository(other ID) bool { return id.Key() == other.Key() }

// Limits from GitHub's naming rules.
const (
	MaxOwnerLen = 39
	MaxNameLen  = 100
	MaxHostLen  = 253
	maxInputLen = 2048
)

// ErrInvalid is wrapped by every parse error so callers can tell bad input
// from other failures.
var ErrInvalid = errors.New("invalid repository")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Parse accepts "host/owner/name", "owner/name" (on defaultHost, which may be
// empty to require a host), or an http(s) clone URL such as
// "https://github.com/owner/name.git". A trailing ".git" or "/" is dropped.
// URLs carrying credentials are rejected without echoing them.
func Parse(input, defaultHost string) (ID, error) {
	s := strings.TrimSpace(input)
	if s == "" {
		return ID{}, invalid("empty repository name")
	}
	if len(s) > maxInputLen {
		return ID{}, invalid("repository name is %d characters long (limit %d)", len(s), maxInputLen)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return ID{}, invalid("repository name contains control characters")
		}
	}
	if strings.Contains(s, "://") {
		return parseURL(s)
	}
	if strings.HasPrefix(s, "git@") || strings.Contains(s, "@") {
		// scp-like SSH syntax or user@host: gitfleet talks HTTPS only, and an
		// "@" here is usually a credential.
		return ID{}, invalid("use host/owner/name or an https URL (SSH addresses and credentials are not accepted)")
	}
	parts := strings.Split(strings.TrimSuffix(s, "/"), "/")
	switch len(parts) {
	case 2:
		if strings.ContainsAny(parts[0], ".:") && parts[0] != "." && parts[0] != ".." {
			return ID{}, invalid("%q looks like host/owner: the repository name is missing", s)
		}
		if defaultHost == "" {
			return ID{}, invalid("%q has no host: use host/owner/name", s)
		}
		return build(defaultHost, parts[0], parts[1])
	case 3:
		return build(parts[0], parts[1], parts[2])
	default:
		return ID{}, invalid("%q is not host/owner/name", s)
	}
}

func parseURL(s string) (ID, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse errors quote the input, which may hold a password.
		return ID{}, invalid("not a valid URL")
	}
	if u.User != nil {
		return ID{}, invalid("URLs with credentials are not accepted; configure a token instead (GITHUB_TOKEN)")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return ID{}, invalid("unsupported URL scheme %q: use https", u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return ID{}, invalid("repository URLs take no query or fragment")
	}
	p := strings.TrimSuffix(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if strings.Contains(p, "%") {
		return ID{}, invalid("repository URL path must not be percent-encoded")
	}
	parts := strings.Split(p, "/")
	if len(parts) != 2 {
		return ID{}, invalid("URL path must be /owner/name")
	}
	return build(u.Host, parts[0], parts[1])
}

func build(host, owner, name string) (ID, error) {
	host = strings.ToLower(host)
	if err := ValidHost(host); err != nil {
		return ID{}, err
	}
	name = strings.TrimSuffix(name, ".git")
	if err := ValidOwner(owner); err != nil {
		return ID{}, err
	}
	if err := ValidName(name); err != nil {
		return ID{}, err
	}
	return ID{Host: host, Owner: owner, Name: name}, nil
}

// ValidHost checks a lower-case "hostname[:port]".
func ValidHost(host string) error {
	if host == "" {
		return invalid("empty host")
	}
	if len(host) > MaxHostLen {
		return invalid("host is too long")
	}
	h, port := host, ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		h, port = host[:i], host[i+1:]
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return invalid("host %q has a bad port", host)
		}
	}
	if net.ParseIP(h) != nil {
		return nil
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return invalid("host %q is not a valid host name", host)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return invalid("host %q is not a valid host name", host)
			}
		}
	}
	return nil
}

// ValidOwner checks a user or organization login: 1–39 characters of letters,
// digits, single hyphens (not at either end) and, for GitHub Enterprise
// managed users, underscores.
func ValidOwner(owner string) error {
	if owner == "" {
		return invalid("empty owner")
	}
	if owner == "." || owner == ".." {
		return invalid("owner %q is a path trick", owner)
	}
	if len(owner) > MaxOwnerLen {
		return invalid("owner is %d characters long (limit %d)", len(owner), MaxOwnerLen)
	}
	if owner[0] == '-' || owner[len(owner)-1] == '-' || strings.Contains(owner, "--") {
		return invalid("owner %q: hyphens may not lead, trail or repeat", owner)
	}
	for _, r := range owner {
		if !(isAlnum(r) || r == '-' || r == '_') {
			return invalid("owner %q contains %q", owner, r)
		}
	}
	return nil
}

// ValidName checks a repository name: 1–100 characters of letters, digits,
// '.', '-' and '_', and not "." or "..".
func ValidName(name string) error {
	if name == "" {
		return invalid("empty repository name")
	}
	if name == "." || name == ".." {
		return invalid("repository name %q is a path trick", name)
	}
	if len(name) > MaxNameLen {
		return invalid("repository name is %d characters long (limit %d)", len(name), MaxNameLen)
	}
	for _, r := range name {
		if !(isAlnum(r) || r == '.' || r == '-' || r == '_') {
			return invalid("repository name %q contains %q", name, r)
		}
	}
	return nil
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
