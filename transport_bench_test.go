package resilient_test

import (
	"net/http"
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
		{"GET/no-retry-control", http.MethodGet, []resilient.Option{resilient.WithoutRetryTokens()}, nil},
		{"GET/budget", http.MethodGet, []resilient.Option{resilient.WithoutRetryTokens(), resilient.WithBudgetConfig(resilient.DefaultBudgetConfig())}, nil},
		{"GET/breaker", http.MethodGet, []resilient.Option{resilient.WithoutRetryTokens(), resilient.WithBreaker(resilient.DefaultBreakerSettings())}, nil},
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
// string takes a sixteenth of an allocation, see keySource.mint), the watch
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
