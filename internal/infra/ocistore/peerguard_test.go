package ocistore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// servePeer serves s's peer port behind a, its handler wrapped by wrap
// (nil: as it is); it returns the address.
func servePeer(t *testing.T, s *Store, a PeerAccess, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := s.PeerHandler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(guard(a, h))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A peer port with a token serves only requests that carry it: a pull
// without it, or with another, gets everything from the registry; one
// with it, from the peer. The token travels to the peer's own host only,
// and never shows in the pull's errors or in a printed Source.
func TestPeerPortRequiresTheToken(t *testing.T) {
	const token = Token("peer-token-sentinel-4c1d")
	r := startRegistry(t)
	holder := newStore(t, 0)
	_, digest, _ := pushImage(t, r, "snapshots/guarded", "v1", layer(t, 21, 0, 64*kb))
	ref := r.Ref("snapshots/guarded", digest)
	pull(t, holder, "guarded", ref, registrySource(r))
	addr := servePeer(t, holder, PeerAccess{Token: token}, nil)

	for _, tc := range []struct {
		name     string
		token    Token
		fromPeer bool
	}{
		{"no token", "", false},
		{"another token", "not-the-token", false},
		{"the token", token, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 0)
			peer := peerSource("holder", addr)
			peer.Token = tc.token
			var skipped []string
			res, err := s.Pull(context.Background(), "guarded", ref, []Source{peer, registrySource(r)}, PullOptions{Progress: func(p Progress) {
				skipped = p.Skipped
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.BySource["peer:holder"] == res.Size; got != tc.fromPeer {
				t.Fatalf("from the peer: %v (%+v), want %v", got, res.BySource, tc.fromPeer)
			}
			// A peer that refuses this runner is left for the whole pull,
			// not asked again for every blob.
			if got := slices.Contains(skipped, "peer:holder"); got == tc.fromPeer {
				t.Errorf("skipped %v: the peer given up = %v, want %v", skipped, got, !tc.fromPeer)
			}
			if printed := fmt.Sprintf("%v %+v %#v", peer, peer, peer); strings.Contains(printed, string(token)) && tc.token == token {
				t.Fatalf("a printed Source shows the token: %s", printed)
			}
			if j, _ := json.Marshal(peer); strings.Contains(string(j), string(token)) && tc.token == token {
				t.Fatalf("a Source in JSON shows the token: %s", j)
			}
		})
	}
	t.Run("answers", func(t *testing.T) {
		for _, tc := range []struct {
			name, auth string
			status     int
		}{
			{"no credentials", "", http.StatusUnauthorized},
			{"basic with the token", "Basic " + basic("anyone", string(token)), http.StatusOK},
			{"basic with another password", "Basic " + basic(string(token), "x"), http.StatusUnauthorized},
			{"bearer token", "Bearer " + string(token), http.StatusOK},
			{"bearer prefix of the token", "Bearer " + string(token[:len(token)-1]), http.StatusUnauthorized},
			{"malformed basic", "Basic !!!", http.StatusUnauthorized},
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v2/x/manifests/"+digest, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s: HTTP %d, want %d", tc.name, resp.StatusCode, tc.status)
			}
			if tc.status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: challenge %q, want Basic", tc.name, resp.Header.Get("WWW-Authenticate"))
			}
		}
	})
}

func basic(user, pass string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// A client with ClientRequests in flight gets 429 and Retry-After for one
// more, while another address is served; a pull that meets the 429 gives
// the peer up for the rest of the pull, says so, and gets the image from
// the registry — as it does for a peer that stalls.
func TestPeerPortLimitsRequestsPerClient(t *testing.T) {
	r := startRegistry(t)
	holder := newStore(t, 0)
	l := layer(t, 22, 0, 64*kb)
	_, digest, _ := pushImage(t, r, "snapshots/busy", "v1", l, layer(t, 22, 1, 64*kb))
	ref := r.Ref("snapshots/busy", digest)
	pull(t, holder, "busy", ref, registrySource(r))
	held := digestOf(t, l)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// The first GET of the held layer stays in flight until the test ends.
	addr := servePeer(t, holder, PeerAccess{ClientRequests: 1}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasSuffix(req.URL.Path, "/blobs/"+held) && req.Header.Get("X-Hold") != "" {
				entered <- struct{}{}
				select {
				case <-release:
				case <-req.Context().Done():
				}
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	t.Cleanup(func() { close(release) }) // before the server closes
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v2/x/blobs/"+held, nil)
		req.Header.Set("X-Hold", "1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered

	resp, err := http.Get("http://" + addr + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("one request more from the same address: HTTP %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	resp, err = other.Get("http://" + addr + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another address: HTTP %d, want 200", resp.StatusCode)
	}

	s := newStore(t, 0)
	var skipped []string
	res, err := s.Pull(context.Background(), "busy", ref, []Source{peerSource("busy", addr), registrySource(r)}, PullOptions{Progress: func(p Progress) {
		skipped = p.Skipped
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.BySource["registry"] != res.Size || !slices.Contains(skipped, "peer:busy") {
		t.Fatalf("pull from a busy peer: %+v, skipped %v; want everything from the registry, the peer skipped", res.BySource, skipped)
	}
}

// Bytes a second are metered per client address and for all together: a
// response stops where its bucket is empty and the wait would outlast the
// request (rate.Limiter refuses at once rather than sleep past a
// deadline), so what each client got shows whose bucket it drew from.
func TestPeerPortMetersBytesPerClient(t *testing.T) {
	const rate = 1 << 10 // a second of it is the burst: 1 KiB
	body := bytes.Repeat([]byte("z"), 64<<10)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
	serve := func(g *peerGuard, addr string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://peer/v2/x/blobs/y", nil)
		req.RemoteAddr = addr + ":40000"
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		return rec.Body.Len()
	}
	t.Run("per client", func(t *testing.T) {
		g := guard(PeerAccess{ClientRate: rate}, next)
		a1, a2, b := serve(g, "10.0.0.1"), serve(g, "10.0.0.1"), serve(g, "10.0.0.2")
		if a1 != rate || a2 != 0 || b != rate {
			t.Fatalf("sent %d then %d bytes to one client, %d to another; want %d, 0 (its bucket is empty), %d (a bucket of its own)", a1, a2, b, rate, rate)
		}
	})
	t.Run("all clients", func(t *testing.T) {
		g := guard(PeerAccess{Rate: rate}, next)
		if a, b := serve(g, "10.0.0.1"), serve(g, "10.0.0.2"); a != rate || b != 0 {
			t.Fatalf("sent %d and %d bytes to two clients; want %d and 0 (one bucket for all)", a, b, rate)
		}
	})
	t.Run("unbounded", func(t *testing.T) {
		if n := serve(guard(PeerAccess{}, next), "10.0.0.1"); n != len(body) {
			t.Fatalf("sent %d bytes, want all %d", n, len(body))
		}
	})
}

// The peer token goes to the peer's own address only: a peer that
// redirects its blobs elsewhere has them fetched there without it.
func TestPeerTokenStaysWithThePeer(t *testing.T) {
	const token = Token("peer-token-sentinel-93b1")
	r := startRegistry(t)
	holder := newStore(t, 0)
	_, digest, _ := pushImage(t, r, "snapshots/redirected", "v1", layer(t, 23, 0, 16*kb))
	ref := r.Ref("snapshots/redirected", digest)
	pull(t, holder, "redirected", ref, registrySource(r))
	var mu sync.Mutex
	var seen []string // Authorization headers elsewhere received
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, req.Header.Get("Authorization"))
		mu.Unlock()
		holder.PeerHandler().ServeHTTP(w, req)
	}))
	t.Cleanup(elsewhere.Close)
	addr := servePeer(t, holder, PeerAccess{Token: token}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.Contains(req.URL.Path, "/blobs/") {
				http.Redirect(w, req, elsewhere.URL+req.URL.Path, http.StatusTemporaryRedirect)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	peer := peerSource("holder", addr)
	peer.Token = token
	pull(t, newStore(t, 0), "redirected", ref, peer, registrySource(r))
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the redirect was not followed")
	}
	for _, a := range seen {
		if a != "" {
			t.Errorf("the peer's token went to the host it redirected to: %q", a)
		}
	}
}
