package mirror

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/reach"
)

// A remote decides where its redirects lead, so gitfleet follows them
// only within the origin it asked (scheme, host and port; GitHub's
// redirects for renamed and transferred repositories stay on its host),
// upgrading http to https on the same host but never the reverse, and
// refuses the others before sending anything there: the probe (advertise)
// checks each hop before it is made, and so does every request go-git
// makes for a fetch, so a remote that redirects the fetch's own request
// elsewhere gets nowhere either. The reference advertisement read, by
// either, is bounded by maxAdvertisement.

// maxAdvertisement bounds a reference advertisement (about a million
// refs; GitHub's largest repositories advertise a few hundred thousand).
// A variable for the tests.
var maxAdvertisement int64 = gitread.MaxRefsBytes

// checkRedirect is an http.Client's CheckRedirect for Git remotes: a hop
// may stay on the origin of the first request, or upgrade it from http to
// https on the same host. The error is Permanent: the remote answers the
// same way next time.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errclass.Permanentf(errclass.ReasonUnsupported, "more than 10 redirects")
	}
	from := via[0].URL
	if !sameOrigin(from, req.URL) {
		return errclass.Permanentf(errclass.ReasonUnsupported, "%s redirects to %s: not followed (another host, or from https to http)",
			redacted(from), redacted(req.URL))
	}
	return nil
}

// sameOrigin reports whether a request to from may be redirected to to:
// same scheme, host and port, or http upgraded to https on the same host
// (default ports).
func sameOrigin(from, to *url.URL) bool {
	if !strings.EqualFold(from.Hostname(), to.Hostname()) {
		return false
	}
	fs, ts := strings.ToLower(from.Scheme), strings.ToLower(to.Scheme)
	if fs == ts {
		return port(from) == port(to)
	}
	return fs == "http" && ts == "https" && port(from) == "80" && port(to) == "443"
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// redacted is u without credentials, query or fragment, for messages.
func redacted(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// withPolicy returns a copy of c (nil: a client with a 30 s timeout) that
// follows redirects by checkRedirect and reaches only what reach allows.
func withPolicy(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.CheckRedirect = checkRedirect
	out.Transport = reach.Transport(out.Transport)
	return &out
}

// advertisementLimit bounds the body of every reference advertisement
// go-git reads.
type advertisementLimit struct{ base http.RoundTripper }

func (t advertisementLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.URL.Path, "/info/refs") {
		resp.Body = limitAdvertisement(resp.Body)
	}
	return resp, err
}

// limitAdvertisement reads an advertisement up to maxAdvertisement bytes;
// past that, its reads fail over a limit.
func limitAdvertisement(rc io.ReadCloser) io.ReadCloser {
	return &cappedBody{ReadCloser: rc, left: maxAdvertisement}
}

type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errAdvertisementSize()
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one byte more tells a body of exactly the limit from a longer one
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, errAdvertisementSize()
	}
	return n, err
}

func errAdvertisementSize() error {
	return &gitread.LimitError{What: "refs size", Detail: fmt.Sprintf("a reference advertisement over %d bytes", maxAdvertisement)}
}

// gitTransport is go-git's HTTP transport for every fetch of the process,
// with the redirect policy, the advertisement's bound and reach's policy.
// (go-git takes its transports from a process-wide table: no fetch option
// chooses one.)
func gitTransport() *http.Client {
	return &http.Client{
		Transport:     metered{advertisementLimit{base: reach.Transport(nil)}},
		CheckRedirect: checkRedirect,
	}
}

func init() {
	t := githttp.NewClient(gitTransport())
	client.InstallProtocol("http", t)
	client.InstallProtocol("https", t)
}
