package storm

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// naiveTransport is the retry loop an application writes by hand: a fixed
// number of attempts, a fixed delay between them (no backoff, no jitter), no
// budget, retrying errors, 429 and 5xx. It keeps the request's headers, so a
// key set by the caller is sent on every attempt; without one, every retry of
// a POST whose response was lost creates the effect again.
type naiveTransport struct {
	base     http.RoundTripper
	attempts int
	delay    time.Duration
}

func (t *naiveTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if req.Body != nil && req.GetBody == nil {
		req.Body.Close()
		return nil, errors.New("storm: naive retries need a request with GetBody")
	}
	for n := 1; ; n++ {
		areq := req.Clone(ctx)
		if req.Body != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			areq.Body = body
		}
		resp, err := t.base.RoundTrip(areq)
		retry := err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		if !retry || n >= t.attempts || ctx.Err() != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return resp, err
		}
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, 64<<10)
			resp.Body.Close()
		}
		timer := time.NewTimer(t.delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, ctx.Err()
		}
	}
}
