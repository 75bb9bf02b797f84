// Package stubtest is the root package's one scripted base transport and
// one request builder, shared by its internal and external tests. It is a
// test double: nothing outside tests imports it.
package stubtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Target is the URL Post sends to.
const Target = "http://api.test/v1/charges"

// Post returns a POST of body to Target under ctx. Post and Get are the
// tests' request builders.
func Post(ctx context.Context, body string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, Target, strings.NewReader(body))
	if err != nil {
		panic(err) // a nil ctx: a bug in the test
	}
	return req
}

// Get returns a GET of host's /v1/items under ctx.
func Get(ctx context.Context, host string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v1/items", nil)
	if err != nil {
		panic(err) // a nil ctx or a bad host: a bug in the test
	}
	return req
}

// Sent is what the stub saw of one attempt.
type Sent struct {
	Method string
	Header http.Header // as a server reads it (Wire)
	Body   []byte
}

// A Step scripts one attempt's outcome.
type Step func(*http.Request) (*http.Response, error)

// Stub is a base RoundTripper that plays a script (the last step repeats),
// records every attempt and counts the response bodies it opened and the
// ones closed.
type Stub struct {
	mu     sync.Mutex
	steps  []Step
	sent   []Sent
	Opened atomic.Int32
	Closed atomic.Int32
}

// New returns a Stub playing steps.
func New(steps ...Step) *Stub { return &Stub{steps: steps} }

// RoundTrip reads and closes req's body, records the attempt and plays the
// next step.
func (s *Stub) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		var err error
		b, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			// As net/http: the request is abandoned, and the server
			// never gets a whole one.
			return nil, err
		}
	}
	s.mu.Lock()
	i := min(len(s.sent), len(s.steps)-1)
	s.sent = append(s.sent, Sent{Method: req.Method, Header: Wire(req.Header), Body: b})
	st := s.steps[i]
	s.mu.Unlock()
	resp, err := st(req)
	if resp != nil {
		s.Opened.Add(1)
		if resp.Body != nil {
			resp.Body = &countBody{Reader: resp.Body, closed: &s.Closed}
		}
		resp.Request = req
	}
	return resp, err
}

// Attempts returns the attempts so far.
func (s *Stub) Attempts() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Wire returns h as a server reads it: field names are case-insensitive on
// the wire, and net/http's server canonicalizes them.
func Wire(h http.Header) http.Header {
	w := make(http.Header, len(h))
	for k, vv := range h {
		ck := http.CanonicalHeaderKey(k)
		w[ck] = append(w[ck], vv...)
	}
	return w
}

type countBody struct {
	io.Reader
	closed *atomic.Int32
	once   sync.Once
}

func (b *countBody) Close() error {
	b.once.Do(func() { b.closed.Add(1) })
	return nil
}

// Reply returns a step answering code with headers given as "Name: value".
// Like most servers, it ignores the request's idempotency key: it shows no
// evidence that it dedupes. A test about a deduping server uses
// ReplyDeduping.
func Reply(code int, headers ...string) Step {
	return func(req *http.Request) (*http.Response, error) {
		h := make(http.Header)
		for _, kv := range headers {
			k, v, _ := strings.Cut(kv, ":")
			h.Add(k, strings.TrimSpace(v))
		}
		if req == nil {
			req = &http.Request{Header: http.Header{}}
		}
		body := http.StatusText(code)
		return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
	}
}

// ReplyDeduping is Reply from a server that dedupes by key and shows it, as
// Stripe's does: the answer echoes the request's Idempotency-Key.
func ReplyDeduping(code int, headers ...string) Step {
	return func(req *http.Request) (*http.Response, error) {
		resp, _ := Reply(code, headers...)(req)
		if k := Wire(resp.Request.Header).Get("Idempotency-Key"); k != "" && resp.Header.Get("Idempotency-Key") == "" {
			resp.Header.Set("Idempotency-Key", k)
		}
		return resp, nil
	}
}

// ReplyBody returns a step answering code with a body.
func ReplyBody(code int, body string, headers ...string) Step {
	return func(req *http.Request) (*http.Response, error) {
		resp, _ := Reply(code, headers...)(req)
		resp.Body = io.NopCloser(bytes.NewReader([]byte(body)))
		resp.ContentLength = int64(len(body))
		return resp, nil
	}
}

// Fail returns a step failing with err.
func Fail(err error) Step {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

// ErrReset is the error of a connection the server reset.
var ErrReset = errors.New("connection reset by peer")

// Deduping returns the steps of a deduping server answering codes in
// turn, each with headers; a code of 0 is a connection reset (ErrReset).
func Deduping(codes []int, headers ...string) []Step {
	steps := make([]Step, len(codes))
	for i, c := range codes {
		if c == 0 {
			steps[i] = Fail(ErrReset)
		} else {
			steps[i] = ReplyDeduping(c, headers...)
		}
	}
	return steps
}
