package resilient_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// Re-executed by TestCrashResume as the client process.
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}

// sent is what the stub base transport saw for one attempt.
type sent struct {
	method string
	header http.Header
	body   []byte
}

// step scripts one attempt's outcome.
type step func(*http.Request) (*http.Response, error)

// stub is a base RoundTripper that plays a script (the last step repeats),
// records every attempt and counts response bodies opened and closed.
type stub struct {
	mu     sync.Mutex
	steps  []step
	sent   []sent
	opened atomic.Int32
	closed atomic.Int32
}

func newStub(steps ...step) *stub { return &stub{steps: steps} }

func (s *stub) RoundTrip(req *http.Request) (*http.Response, error) {
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
	s.sent = append(s.sent, sent{method: req.Method, header: wire(req.Header), body: b})
	st := s.steps[i]
	s.mu.Unlock()
	resp, err := st(req)
	if resp != nil {
		s.opened.Add(1)
		if resp.Body != nil {
			resp.Body = &countBody{Reader: resp.Body, closed: &s.closed}
		}
		resp.Request = req
	}
	return resp, err
}

// wire returns h as a server reads it: field names are case-insensitive on
// the wire, and net/http's server canonicalizes them.
func wire(h http.Header) http.Header {
	w := make(http.Header, len(h))
	for k, vv := range h {
		ck := http.CanonicalHeaderKey(k)
		w[ck] = append(w[ck], vv...)
	}
	return w
}

func (s *stub) attempts() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sent(nil), s.sent...)
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

// reply returns a step answering code with headers given as "Name: value".
// Like most servers, it ignores the request's idempotency key: it shows no
// evidence that it dedupes. A test about a deduping server uses
// replyDeduping.
func reply(code int, headers ...string) step {
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

// replyDeduping is reply from a server that dedupes by key and shows it, as
// Stripe's does: the answer echoes the request's Idempotency-Key.
func replyDeduping(code int, headers ...string) step {
	return func(req *http.Request) (*http.Response, error) {
		resp, _ := reply(code, headers...)(req)
		if k := wire(resp.Request.Header).Get("Idempotency-Key"); k != "" && resp.Header.Get("Idempotency-Key") == "" {
			resp.Header.Set("Idempotency-Key", k)
		}
		return resp, nil
	}
}

// replyBody returns a step answering code with a body.
func replyBody(code int, body string, headers ...string) step {
	return func(req *http.Request) (*http.Response, error) {
		resp, _ := reply(code, headers...)(req)
		resp.Body = io.NopCloser(bytes.NewReader([]byte(body)))
		resp.ContentLength = int64(len(body))
		return resp, nil
	}
}

// fail returns a step failing with err.
func fail(err error) step {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}
