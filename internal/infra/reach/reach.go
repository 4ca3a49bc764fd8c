package reach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
)

// The settings that narrow where workers reach.
const (
	// SettingAllowedHosts lists hosts (names, addresses, CIDR ranges, or
	// "*" for any host on a public address) a worker's Git fetches may
	// reach besides the configured Git hosts.
	SettingAllowedHosts = "GITFLEET_ALLOWED_HOSTS"
	// SettingLocalRoot is the directory local scan targets must lie under
	// on a worker; unset, local targets are refused.
	SettingLocalRoot = "GITFLEET_LOCAL_ROOT"
)

// Hosts is the set of hosts a worker may reach.
type Hosts struct {
	// anyPublic: "*", any name whose addresses are public.
	anyPublic bool
	// names are listed host names (lower case): any address they resolve
	// to, loopback and private ones included (the operator listed them).
	names map[string]bool
	// nets are listed addresses and ranges: a host that is one of them,
	// or resolves into one, may be reached.
	nets []netip.Prefix
	// listed is what was listed, for messages.
	listed []string
}

// Public is the policy of a process that configured none: any host name,
// public addresses only (no loopback, private or link-local address).
func Public() Hosts { return Hosts{anyPublic: true, listed: []string{"*"}} }

// ParseHosts reads a list of hosts: names ("github.com"), addresses
// ("10.0.0.5", "::1"), CIDR ranges ("10.1.0.0/16") and "*" (any name whose
// addresses are all public). A port or a URL is refused: a listed host is
// reachable on any port.
func ParseHosts(list []string) (Hosts, error) {
	h := Hosts{names: map[string]bool{}}
	for _, e := range list {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case e == "*":
			h.anyPublic = true
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return Hosts{}, fmt.Errorf("%s: %q is not a host, an address or a CIDR range", SettingAllowedHosts, e)
			}
			h.nets = append(h.nets, p.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				h.nets = append(h.nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				break
			}
			if strings.ContainsAny(e, ":@?#") || strings.Trim(e, "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" {
				return Hosts{}, fmt.Errorf("%s: %q is not a host name (no port, no URL)", SettingAllowedHosts, e)
			}
			h.names[strings.TrimSuffix(e, ".")] = true
		}
		if !slices.Contains(h.listed, e) {
			h.listed = append(h.listed, e)
		}
	}
	return h, nil
}

// Listed is what the policy lists, in order.
func (h Hosts) Listed() []string { return slices.Clone(h.listed) }

// hostOf is a URL's or an address's host: lower case, no brackets, no
// trailing dot.
func hostOf(host string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

func (h Hosts) inNets(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range h.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckHost refuses, before anything is sent, a host that is not listed:
// Permanent, "host x is not in GITFLEET_ALLOWED_HOSTS".
func (h Hosts) CheckHost(host string) error {
	host = hostOf(host)
	if a, err := netip.ParseAddr(host); err == nil {
		if h.inNets(a) || (h.anyPublic && !special(a)) {
			return nil
		}
		return refused(host, "")
	}
	if h.anyPublic || h.names[host] {
		return nil
	}
	return refused(host, "")
}

// checkAddr refuses an address a host resolved to, when dialing: a
// loopback, private or link-local one unless the host was listed by name,
// or the address is listed.
func (h Hosts) checkAddr(host string, a netip.Addr) error {
	host = hostOf(host)
	if h.inNets(a) || h.names[host] {
		return nil
	}
	if !special(a) && (h.anyPublic || h.names[host]) {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil && special(a) {
		return refused(host, "it resolves to a loopback, private or link-local address, which only a listed host may")
	}
	return refused(host, "")
}

// ErrRefused is wrapped by the errors of hosts and paths a worker may not
// reach.
var ErrRefused = errors.New("not reachable from this worker")

func refused(host, why string) error {
	msg := fmt.Sprintf("host %s is not in %s", host, SettingAllowedHosts)
	if why != "" {
		msg += " (" + why + ")"
	}
	return errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, fmt.Errorf("%s: %w", msg, ErrRefused))
}

// specialNets are the ranges no request may make a worker reach unless
// listed: besides Go's loopback, private, link-local, multicast and
// unspecified checks, shared address space (carrier-grade NAT), IETF
// protocol assignments, benchmarking, reserved and broadcast addresses,
// and IPv6 translations of IPv4 addresses (NAT64, 6to4), which could name
// any of those.
var specialNets = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4",
		"64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "fec0::/10"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// special reports a loopback, private, link-local or otherwise internal
// address.
func special(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || !a.IsGlobalUnicast() {
		return true
	}
	for _, p := range specialNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var current atomic.Pointer[Hosts]

// SetHosts sets the process's hosts (worker and starter: from the
// configuration, before any fetch).
func SetHosts(h Hosts) { current.Store(&h) }

// Current is the process's hosts: Public until SetHosts.
func Current() Hosts {
	if h := current.Load(); h != nil {
		return *h
	}
	return Public()
}

// DialContext is a net.Dialer's DialContext that refuses, before a
// connection is made, a host the process's policy does not list, and every
// address (each one DNS gives, as it is dialed) the policy does not allow
// that host. With a proxy, the proxy is what is dialed: list it.
func DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h := Current()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := h.CheckHost(host); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: %w", address, err)
			}
			return h.checkAddr(host, ap.Addr())
		}}
	return d.DialContext(ctx, network, addr)
}

// Transport returns base (nil: a clone of http.DefaultTransport) with the
// policy: its requests go only to listed hosts (checked before anything is
// sent, every redirect hop included), over connections DialContext made.
// A base that is not an *http.Transport keeps its own dialing and gets the
// check by name only.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if t, ok := base.(*http.Transport); ok {
		t = t.Clone()
		t.DialContext = DialContext
		t.DialTLSContext = nil
		base = t
	}
	return checked{base}
}

type checked struct{ base http.RoundTripper }

func (c checked) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := Current().CheckHost(req.URL.Hostname()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return c.base.RoundTrip(req)
}

// LocalPath is where a local scan target may be opened on this worker:
// path cleaned and its symbolic links resolved, inside root (itself
// resolved). root "" refuses every local path: a worker opens no local
// repository unless its operator says where they lie. The error is
// Permanent.
func LocalPath(root, path string) (string, error) {
	if root == "" {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput,
			"local repositories are not opened on this worker (%s is not set): %w", SettingLocalRoot, ErrRefused)
	}
	r, err := filepath.EvalSymlinks(filepath.Clean(root))
	if err != nil {
		return "", fmt.Errorf("%s: %w", SettingLocalRoot, err)
	}
	if r, err = filepath.Abs(r); err != nil {
		return "", fmt.Errorf("%s: %w", SettingLocalRoot, err)
	}
	if !filepath.IsAbs(path) {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput, "local repository path %q is not absolute", path)
	}
	p, err := filepath.EvalSymlinks(filepath.Clean(path))
	if errors.Is(err, os.ErrNotExist) {
		return "", errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound, fmt.Errorf("open the local repository: %w", err))
	}
	if err != nil {
		return "", errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound, fmt.Errorf("open the local repository: %w", err))
	}
	if !within(r, p) {
		return "", errclass.Permanentf(errclass.ReasonInvalidInput, "local repository %s is not under %s: %w", path, SettingLocalRoot, ErrRefused)
	}
	return p, nil
}

// LocalRepository is LocalPath for a repository, and the directory that
// holds it: the one a .git file names (a linked work tree's common
// directory, a submodule's or a separated git directory) must lie under
// root too, or a .git file reading "gitdir: /anywhere" would lead a scan
// out of it. Open the directory it returns, which is the one checked.
func LocalRepository(root, path string) (string, error) {
	p, err := LocalPath(root, path)
	if err != nil {
		return "", err
	}
	dir, err := gitread.GitDir(p)
	if err != nil {
		return "", errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound, fmt.Errorf("open the local repository: %w", err))
	}
	d, err := LocalPath(root, dir)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return "", errclass.Permanentf(errclass.ReasonInvalidInput, "local repository %s: its .git file leads to %s, which is not under %s: %w",
				path, dir, SettingLocalRoot, ErrRefused)
		}
		return "", err
	}
	return d, nil
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	if root == string(filepath.Separator) {
		return true
	}
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

var localRoot atomic.Pointer[string]

// SetLocalRoot sets the directory local scan targets must lie under on
// this worker ("" : none is opened).
func SetLocalRoot(root string) { localRoot.Store(&root) }

// LocalRoot is the process's local root: "" until SetLocalRoot.
func LocalRoot() string {
	if r := localRoot.Load(); r != nil {
		return *r
	}
	return ""
}

// AnyPublic reports a policy with "*": any host name on a public address.
func (h Hosts) AnyPublic() bool { return h.anyPublic }

// CheckProxy refuses "*" when the environment (getenv: HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY and their lower-case forms, as Go's clients read
// them) sends requests to public hosts through a proxy. "*" promises any
// host on a public address, which holds because a worker checks every
// address it dials; through a proxy it dials only the proxy, which
// resolves the name itself, so "*" would let any internal name
// (jenkins.corp, the metadata service's name) reach the proxy and be
// fetched from inside the network. The operator lists the hosts instead,
// or exempts the fetches from the proxy.
func CheckProxy(h Hosts, getenv func(string) string) error {
	if !h.anyPublic {
		return nil
	}
	first := func(names ...string) (string, string) {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	httpName, httpProxy := first("HTTP_PROXY", "http_proxy")
	httpsName, httpsProxy := first("HTTPS_PROXY", "https_proxy")
	_, noProxy := first("NO_PROXY", "no_proxy")
	proxy := (&httpproxy.Config{HTTPProxy: httpProxy, HTTPSProxy: httpsProxy, NoProxy: noProxy}).ProxyFunc()
	for _, tc := range []struct{ scheme, name string }{{"https", httpsName}, {"http", httpName}} {
		// Any public host: one no NO_PROXY entry is likely to name.
		u := &url.URL{Scheme: tc.scheme, Host: "gitfleet-proxy-check.example"}
		if p, err := proxy(u); err != nil || p != nil {
			return fmt.Errorf("%s=* cannot be held with %s set: through a proxy, the proxy resolves and dials the host, "+
				"so a worker cannot refuse internal addresses and any internal name would reach it; "+
				"list the hosts Git fetches may reach instead of *, or exempt them from the proxy (NO_PROXY)",
				SettingAllowedHosts, tc.name)
		}
	}
	return nil
}
