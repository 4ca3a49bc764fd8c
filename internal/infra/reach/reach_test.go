package reach

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/infra/errclass"
)

func TestHosts(t *testing.T) {
	listed, err := ParseHosts([]string{"github.com", " GHE.corp. ", "10.1.0.0/16", "::1", "*"})
	if err != nil {
		t.Fatal(err)
	}
	named, err := ParseHosts([]string{"github.com", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		hosts Hosts
		host  string
		addr  string // "" : the name check alone
		ok    bool
	}{
		{"a listed name", named, "GitHub.com", "140.82.121.4", true},
		{"a name not listed", named, "gitlab.com", "", false},
		{"any public name", listed, "gitlab.com", "172.65.251.78", true},
		{"a public name resolving to loopback", listed, "rebind.example", "127.0.0.1", false},
		{"a public name resolving to metadata", listed, "rebind.example", "169.254.169.254", false},
		{"a public name resolving to a private address", listed, "rebind.example", "192.168.1.10", false},
		{"a public name resolving to a mapped loopback", listed, "rebind.example", "::ffff:127.0.0.1", false},
		{"a public name resolving to NAT64", listed, "rebind.example", "64:ff9b::a9fe:a9fe", false},
		{"a listed name resolving to a private address", listed, "ghe.corp", "10.9.0.5", true},
		{"localhost listed by name", named, "localhost", "127.0.0.1", true},
		{"a metadata address by literal", listed, "169.254.169.254", "", false},
		{"a loopback literal", listed, "127.0.0.1", "", false},
		{"a loopback literal by default", Public(), "127.0.0.1", "", false},
		{"a public literal by default", Public(), "140.82.121.4", "140.82.121.4", true},
		{"a listed literal", listed, "[::1]", "::1", true},
		{"an address in a listed range", listed, "10.1.2.3", "10.1.2.3", true},
		{"a name resolving into a listed range", listed, "build.example", "10.1.7.7", true},
		{"a name not listed, even public", named, "example.com", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.hosts.CheckHost(tt.host)
			if err == nil && tt.addr != "" {
				err = tt.hosts.checkAddr(tt.host, netip.MustParseAddr(tt.addr))
			}
			if (err == nil) != tt.ok {
				t.Fatalf("%s (%s): %v, want allowed %t", tt.host, tt.addr, err, tt.ok)
			}
			if err != nil {
				if c := errclass.Classify(err); c.Class != errclass.Permanent || !errors.Is(err, ErrRefused) {
					t.Errorf("%v: %+v, want Permanent and ErrRefused", err, c)
				}
			}
		})
	}
	for _, bad := range []string{"github.com:443", "https://github.com", "10.0.0.0/99", "a b"} {
		if _, err := ParseHosts([]string{bad}); err == nil {
			t.Errorf("ParseHosts(%q) accepted it", bad)
		}
	}
}

// The dialer refuses an address before a connection exists: a listener
// that is never dialed sees nothing, whether the refused host is named
// by its address or by a name that resolves to it (DNS rebinding).
func TestDialRefusesBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	defer SetHosts(Current())
	for _, tt := range []struct {
		name  string
		hosts []string
		addr  string
		ok    bool
	}{
		{"loopback by address, not listed", []string{"*"}, "127.0.0.1", false},
		{"loopback through a name, not listed", []string{"*"}, "localhost", false},
		{"loopback through a name listed as another", []string{"*", "example.com"}, "localhost", false},
		{"loopback listed", []string{"127.0.0.1"}, "127.0.0.1", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHosts(tt.hosts)
			if err != nil {
				t.Fatal(err)
			}
			SetHosts(h)
			c, err := DialContext(context.Background(), "tcp", net.JoinHostPort(tt.addr, port))
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				<-accepted
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("dialed")
			}
			if c := errclass.Classify(err); c.Class != errclass.Permanent || !errors.Is(err, ErrRefused) {
				t.Fatalf("%v: %+v, want Permanent and ErrRefused", err, c)
			}
			t.Log(err)
		})
	}
	ln.Close()
	select {
	case <-accepted:
		t.Error("a refused dial reached the listener")
	default:
	}
}

func TestLocalPath(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "repos")
	inside := filepath.Join(root, "app.git")
	outside := filepath.Join(base, "secret.git")
	for _, d := range []string{inside, outside, filepath.Join(base, "repos-other")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link.git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(base, "root-link")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, root, path, want string
	}{
		{"inside", root, inside, inside},
		{"the root itself", root, root, root},
		{"through a linked root", filepath.Join(base, "root-link"), inside, inside},
		{"dot-dot out", root, filepath.Join(root, "..", "secret.git"), ""},
		{"a link out", root, filepath.Join(root, "link.git"), ""},
		{"a sibling sharing the prefix", root, filepath.Join(base, "repos-other"), ""},
		{"outside", root, outside, ""},
		{"no root", "", inside, ""},
		{"relative", root, "repos/app.git", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LocalPath(tt.root, tt.path)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("LocalPath(%s, %s) = %q, %v; want %q", tt.root, tt.path, got, err, tt.want)
				}
				return
			}
			if c := errclass.Classify(err); err == nil || c.Class != errclass.Permanent {
				t.Fatalf("LocalPath(%s, %s) = %q, %v; want refused, Permanent", tt.root, tt.path, got, err)
			}
			t.Log(err)
		})
	}
}

// A local repository's .git file may not lead out of the root: "gitdir:
// /anywhere" read a repository elsewhere on the worker (another mirror's
// 1,497 refs, in a probe).
func TestLocalRepository(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "repos")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Repositories as git lays them out: a work tree, a bare one outside
	// the root, a submodule's separated git directory inside it.
	for _, d := range []string{filepath.Join(root, "app", ".git"), filepath.Join(base, "secret.git"),
		filepath.Join(root, "modules", "lib"), filepath.Join(base, "other.git", "worktrees", "wt")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "escape", ".git"), "gitdir: "+filepath.Join(base, "secret.git")+"\n")
	write(filepath.Join(root, "escape-relative", ".git"), "gitdir: ../../secret.git\n")
	write(filepath.Join(root, "sub", ".git"), "gitdir: ../modules/lib\n")
	// A work tree whose git directory is inside the root but whose common
	// directory is not.
	write(filepath.Join(root, "wt-out", ".git"), "gitdir: "+filepath.Join(base, "other.git", "worktrees", "wt")+"\n")
	write(filepath.Join(base, "other.git", "worktrees", "wt", "commondir"), "../..\n")
	for _, tt := range []struct {
		name, path, want string
	}{
		{"a work tree", filepath.Join(root, "app"), filepath.Join(root, "app", ".git")},
		{"a submodule's git directory inside", filepath.Join(root, "sub"), filepath.Join(root, "modules", "lib")},
		{"a .git file naming a repository outside", filepath.Join(root, "escape"), ""},
		{"a relative .git file leading outside", filepath.Join(root, "escape-relative"), ""},
		{"a linked work tree of a repository outside", filepath.Join(root, "wt-out"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LocalRepository(root, tt.path)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("LocalRepository(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
				}
				return
			}
			if c := errclass.Classify(err); err == nil || c.Class != errclass.Permanent || !errors.Is(err, ErrRefused) {
				t.Fatalf("LocalRepository(%s) = %q, %v; want refused, Permanent", tt.path, got, err)
			}
			if !strings.Contains(err.Error(), SettingLocalRoot) {
				t.Errorf("%v does not name %s", err, SettingLocalRoot)
			}
		})
	}
}

// "*" is refused when Git fetches would go through a proxy, which resolves
// and dials the names itself (so an internal name would reach it); listed
// hosts, or "*" with the proxy bypassed, are fine.
func TestCheckProxy(t *testing.T) {
	star, _ := ParseHosts([]string{"*"})
	listed, _ := ParseHosts([]string{"github.com", "10.0.0.0/8"})
	for _, tc := range []struct {
		name  string
		hosts Hosts
		env   map[string]string
		bad   string // the variable the refusal names, "" for none
	}{
		{"* without a proxy", star, nil, ""},
		{"* through HTTPS_PROXY", star, map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, "HTTPS_PROXY"},
		{"* through https_proxy", star, map[string]string{"https_proxy": "http://user:pw@proxy.corp:3128"}, "https_proxy"},
		{"* through HTTP_PROXY", star, map[string]string{"HTTP_PROXY": "proxy.corp:3128"}, "HTTP_PROXY"},
		{"* with the proxy bypassed", star, map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "HTTP_PROXY": "http://proxy.corp:3128", "NO_PROXY": "*"}, ""},
		{"* with some hosts bypassed", star, map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": "github.com,.corp"}, "HTTPS_PROXY"},
		{"listed hosts through a proxy", listed, map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckProxy(tc.hosts, func(k string) string { return tc.env[k] })
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), SettingAllowedHosts+"=*") || !strings.Contains(err.Error(), tc.bad+" set")):
				t.Errorf("CheckProxy = %v, want a refusal naming %s=* and %s", err, SettingAllowedHosts, tc.bad)
			case err != nil && strings.Contains(err.Error(), "pw@"):
				t.Errorf("the refusal carries the proxy's credentials: %v", err)
			}
		})
	}
}
