package mirror

import (
	"io"
	"net/http"

	"gitfleet/internal/infra/liveness"
)

// metered counts what a fetch receives, and the time it waits for it, in
// the liveness.Meter of the request's context (if any): an activity
// watching it tells a slow fetch that moves from one that hangs.
type metered struct{ base http.RoundTripper }

func (t metered) RoundTrip(req *http.Request) (*http.Response, error) {
	m := liveness.From(req.Context())
	if m == nil {
		return t.base.RoundTrip(req)
	}
	done := m.Wait()
	resp, err := t.base.RoundTrip(req)
	done()
	if err == nil {
		resp.Body = &meteredBody{ReadCloser: resp.Body, m: m}
	}
	return resp, err
}

type meteredBody struct {
	io.ReadCloser
	m *liveness.Meter
}

func (b *meteredBody) Read(p []byte) (int, error) {
	done := b.m.Wait()
	n, err := b.ReadCloser.Read(p)
	done()
	b.m.Received(n)
	return n, err
}

// serverProgress is a fetch's Progress: asking for the remote's progress
// messages (go-git asks for none without one) keeps bytes coming while a
// large repository's pack is prepared, which is what tells it alive.
var serverProgress io.Writer = io.Discard
