package snapshot

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// SettingSources names the setting that lists the registries runners may
// pull from besides the build registry (GITFLEET_REGISTRY).
const SettingSources = "GITFLEET_SNAPSHOT_SOURCES"

// ErrSourceNotAllowed is the error of an image reference outside Sources.
var ErrSourceNotAllowed = errors.New("not an allowed snapshot source")

// Sources are the registries a runner may pull snapshot images and base
// images from (architecture §11). A runner pulls with its own registry
// credentials and serves what it pulled to its peers, so the requester of
// a snapshot must not choose the registry freely: only the build registry
// and the registries the operator lists are sources. The zero value allows
// nothing.
type Sources struct{ rules []sourceRule }

// sourceRule allows a host, on one port or ("") any, and the repositories
// under a path ("" any).
type sourceRule struct{ host, port, path string }

// ParseSources reads the build registry (host[:port][/path], may be "")
// and the operator's list (comma-separated entries of the same form; a
// host without a port allows every port of that host, a path the
// repositories under it). The build registry's host and port are always
// sources, whatever its path: builds are pushed there and pulled from
// there, and base images usually live beside them.
func ParseSources(buildRegistry, list string) (Sources, error) {
	var s Sources
	if buildRegistry != "" {
		r, err := parseRule(buildRegistry)
		if err != nil {
			return Sources{}, fmt.Errorf("build registry %q: %w", buildRegistry, err)
		}
		r.path = ""
		s.rules = append(s.rules, r)
	}
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		r, err := parseRule(e)
		if err != nil {
			return Sources{}, fmt.Errorf("%s entry %q: %w", SettingSources, e, err)
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

func parseRule(e string) (sourceRule, error) {
	hostport, path, _ := strings.Cut(e, "/")
	if strings.Contains(e, "://") {
		return sourceRule{}, errors.New("give host[:port][/path], without a scheme")
	}
	host, port, err := splitHostPort(hostport)
	if err != nil || host == "" || strings.ContainsAny(host, " @*?") {
		return sourceRule{}, errors.New("want host[:port][/path]")
	}
	path = strings.Trim(path, "/")
	if strings.ContainsAny(path, " :@*?") || strings.Contains(path, "//") {
		return sourceRule{}, errors.New("want host[:port][/path]")
	}
	return sourceRule{host: host, port: port, path: path}, nil
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port",
// lower-casing the host and naming Docker Hub by its registry's name, as
// image references do ("docker.io" is "index.docker.io").
func splitHostPort(s string) (host, port string, err error) {
	if i := strings.LastIndexByte(s, ':'); i >= 0 && i > strings.LastIndexByte(s, ']') {
		if host, port, err = net.SplitHostPort(s); err != nil {
			return "", "", err
		}
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return "", "", errors.New("bad port")
		}
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	host = strings.ToLower(host)
	if host == "docker.io" {
		host = "index.docker.io"
	}
	return host, port, nil
}

// Allows reports whether a runner may pull repository from registry
// (host[:port], as an image reference names it).
func (s Sources) Allows(registry, repository string) bool {
	host, port, err := splitHostPort(registry)
	if err != nil {
		return false
	}
	for _, r := range s.rules {
		if r.host == host && (r.port == "" || r.port == port) &&
			(r.path == "" || repository == r.path || strings.HasPrefix(repository, r.path+"/")) {
			return true
		}
	}
	return false
}

// Check is Allows as an error that says what is allowed, wrapping
// ErrSourceNotAllowed. what names the reference ("image", "base image").
func (s Sources) Check(what, registry, repository string) error {
	if s.Allows(registry, repository) {
		return nil
	}
	if len(s.rules) == 0 {
		return fmt.Errorf("%s %s/%s: %w: no registry is (set GITFLEET_REGISTRY or %s)", what, registry, repository, ErrSourceNotAllowed, SettingSources)
	}
	return fmt.Errorf("%s %s/%s: %w: runners pull only from %s (GITFLEET_REGISTRY and %s)", what, registry, repository, ErrSourceNotAllowed, s, SettingSources)
}

// String lists the sources, comma-separated.
func (s Sources) String() string {
	out := make([]string, len(s.rules))
	for i, r := range s.rules {
		h := r.host
		if strings.Contains(h, ":") {
			h = "[" + h + "]"
		}
		if r.port != "" {
			h += ":" + r.port
		}
		if r.path != "" {
			h += "/" + r.path
		}
		out[i] = h
	}
	return strings.Join(out, ", ")
}
