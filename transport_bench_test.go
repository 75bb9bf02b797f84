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

// BenchmarkTransport measures the Transport's own cost per request over a
// base transport that does nothing: key minting, header copy, admission
// (retry tokens by default; a budget or breaker when configured) and
// classification. The sub-benchmark names say which mechanisms are on.
func BenchmarkTransport(b *testing.B) {
	cases := []struct {
		name   string
		method string
		opts   []resilient.Option
	}{
		{"GET/no-retry-control", http.MethodGet, []resilient.Option{resilient.WithoutRetryTokens()}},
		{"GET/budget", http.MethodGet, []resilient.Option{resilient.WithoutRetryTokens(), resilient.WithBudgetConfig(resilient.DefaultBudgetConfig())}},
		{"GET/breaker", http.MethodGet, []resilient.Option{resilient.WithoutRetryTokens(), resilient.WithBreaker(resilient.DefaultBreakerSettings())}},
		{"GET/defaults", http.MethodGet, nil},
		{"POST/defaults", http.MethodPost, nil},
	}
	for _, tc := range cases {
		tr := resilient.NewTransport(okTransport{}, tc.opts...)
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
