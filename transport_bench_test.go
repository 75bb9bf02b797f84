package resilient_test

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/resilienthttp/resilient"
)

// okTransport answers 200 with an empty body.
type okTransport struct{}

func (okTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// dedupingTransport answers 200 echoing the request's Idempotency-Key, as a
// server that dedupes by key does.
type dedupingTransport struct{}

func (dedupingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	if k := req.Header[resilient.DefaultKeyHeader]; len(k) > 0 {
		h[resilient.DefaultKeyHeader] = k
	}
	return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: req}, nil
}

// BenchmarkTransport measures the Transport's own cost per request over a
// base transport that does nothing: key minting, header copy, admission
// (retry tokens by default; a budget or breaker when configured) and
// classification. The sub-benchmark names say which mechanisms are on;
// "POST/deduping-server" (defaults) answers as a server that dedupes by key (it echoes the
// key), which the Transport notes as evidence on every answer.
func BenchmarkTransport(b *testing.B) {
	cases := []struct {
		name   string
		method string
		opts   []resilient.Option
		base   http.RoundTripper
	}{
		{"GET/no-retry-control", http.MethodGet, []resilient.Option{resilient.WithRetryControl()}, nil},
		{"GET/budget", http.MethodGet, []resilient.Option{resilient.WithRetryControl(resilient.RetryBudget{})}, nil},
		{"GET/breaker", http.MethodGet, []resilient.Option{resilient.WithRetryControl(resilient.CircuitBreaker{})}, nil},
		{"GET/defaults", http.MethodGet, nil, nil},
		{"POST/defaults", http.MethodPost, nil, nil},
		{"POST/deduping-server", http.MethodPost, nil, dedupingTransport{}},
	}
	for _, tc := range cases {
		base := tc.base
		if base == nil {
			base = okTransport{}
		}
		tr := resilient.NewTransport(base, tc.opts...)
		req, _ := http.NewRequest(tc.method, "http://api.test/v1/charges", nil)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := tr.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
				}
			})
		})
	}
}

// fixedTransport answers every request with the same response, allocating
// nothing, so that what a RoundTrip allocates is the Transport's own.
type fixedTransport struct{ resp *http.Response }

func (f fixedTransport) RoundTrip(*http.Request) (*http.Response, error) { return f.resp, nil }

// TestRoundTripAllocs pins what a request allocates in the Transport itself
// with the defaults: nothing for a GET (its first attempt is the caller's
// request, sent as is); for a POST without a body, the key (its UUID; its
// string takes a sixteenth of an allocation, see wire.KeySource.Mint), the watch
// of its writes (the watch, which is also the attempt's context, and its
// WroteRequest method value: a request without a body has no rewind to
// guard), the attempt's request and its header (map and group).
func TestRoundTripAllocs(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	tr := resilient.NewTransport(fixedTransport{resp})
	for _, tc := range []struct {
		method string
		header http.Header
		max    float64
	}{
		{http.MethodGet, nil, 0},
		{http.MethodGet, http.Header{"Accept": {"application/json"}}, 0},
		{http.MethodPost, nil, 6},
		{http.MethodPost, http.Header{"Content-Type": {"application/json"}}, 6}, // the header copied by maps.Clone
	} {
		req, _ := http.NewRequest(tc.method, "http://api.test/v1/charges", nil)
		for k, v := range tc.header {
			req.Header[k] = v
		}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > tc.max {
			t.Errorf("%s %v: %v allocations per request, want at most %v", tc.method, tc.header, allocs, tc.max)
		}
	}
}

// headerSeen records the header map of each request it is sent.
type headerSeen struct {
	fixedTransport
	seen []http.Header
}

func (h *headerSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	h.seen = append(h.seen, req.Header)
	return h.fixedTransport.RoundTrip(req)
}

// TestCallerKeyedFirstAttemptSharesTheHeader: the first attempt of a request
// whose key the caller set adds no header field (no key to add, no attempt
// header on a first attempt), so it is sent with the caller's header map,
// unchanged, and allocates only the request copy and the write watch with
// its hook; a retry gets a copy with its attempt header.
func TestCallerKeyedFirstAttemptSharesTheHeader(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	base := &headerSeen{fixedTransport: fixedTransport{resp}}
	tr := resilient.NewTransport(base)
	reqs := make([]*http.Request, 102)
	for i := range reqs {
		reqs[i], _ = http.NewRequest(http.MethodPost, "http://api.test/v1/charges", nil)
		reqs[i].Header["Content-Type"] = []string{"application/json"}
		reqs[i].Header["Idempotency-Key"] = []string{fmt.Sprintf("order-%d", i)} // one operation each
	}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := tr.RoundTrip(reqs[n]); err != nil {
			t.Fatal(err)
		}
		n++
	})
	if allocs > 3.1 { // the recent-keys map grows now and then
		t.Errorf("%v allocations per request, want 3", allocs)
	}
	for i, h := range base.seen {
		if reflect.ValueOf(h).UnsafePointer() != reflect.ValueOf(reqs[i].Header).UnsafePointer() {
			t.Fatalf("request %d: sent with another header map", i)
		}
		if len(h) != 2 {
			t.Fatalf("request %d: the caller's header changed: %v", i, h)
		}
	}
	// The same key again is the operation's next attempt: a copy with
	// Retry-Attempt: 1, the caller's map untouched.
	again, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/charges", nil)
	again.Header["Idempotency-Key"] = []string{"order-0"}
	_, err := tr.RoundTrip(again)
	if err != nil {
		t.Fatal(err)
	}
	last := base.seen[len(base.seen)-1]
	if last.Get("Retry-Attempt") != "1" || again.Header.Get("Retry-Attempt") != "" {
		t.Errorf("next attempt header %v, caller's %v", last, again.Header)
	}
}
