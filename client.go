package resilient

import "net/http"

// NewClient returns a new *http.Client whose Transport is a Transport over
// http.DefaultTransport configured by opts. It sets no overall Timeout: bound
// each request with its context (the Transport never sleeps past the
// context's deadline), and each attempt with WithAttemptTimeout.
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: NewTransport(nil, opts...)}
}

// Wrap returns a copy of c whose Transport is a Transport over c's Transport
// (http.DefaultTransport if nil), configured by opts. c is not modified.
// Redirect policy, cookie jar and Timeout are kept. Note that c.Timeout
// bounds the whole request, retries and waits included. When it fires,
// http.Client replaces the error with its own timeout error. errors.As then
// no longer finds the *Error (its Key and Unknown). Prefer a context
// deadline.
func Wrap(c *http.Client, opts ...Option) *http.Client {
	if c == nil {
		return NewClient(opts...)
	}
	cp := *c
	cp.Transport = NewTransport(c.Transport, opts...)
	return &cp
}
