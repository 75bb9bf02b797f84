package retryablehttpadapter

import "net/http"

// Transport returns an http.RoundTripper that sends each request through base
// (http.DefaultTransport if nil) and, when it fails without a response,
// returns an error that carries the request, so that CheckRetry can tell its
// method and whether it had an Idempotency-Key header. The error's message
// and its chain (errors.Is, errors.As) are base's, unchanged; responses pass
// through untouched.
//
// Set it as the Transport of the retryablehttp.Client's HTTPClient:
//
//	c.HTTPClient.Transport = retryablehttpadapter.Transport(c.HTTPClient.Transport)
//
// CloseIdleConnections is forwarded to base.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, &requestError{req: req, err: err}
	}
	return resp, nil
}

// CloseIdleConnections closes base's idle connections, if it has any.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// requestError is an attempt's error with the request that got it.
type requestError struct {
	req *http.Request
	err error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }
