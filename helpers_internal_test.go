package resilient

import (
	"net/http"
	"testing"
)

// RoundTripFunc adapts a function to http.RoundTripper, for tests.
type RoundTripFunc func(*http.Request) (*http.Response, error)

func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// roundTrip sends req through tr and returns the status, or 0 on error.
func roundTrip(t *testing.T, tr *Transport, req *http.Request) int {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// pausing answers 200, and code with Retry-After: retryAfter to a request
// for /pause.
func pausing(code int, retryAfter string) RoundTripFunc {
	return func(req *http.Request) (*http.Response, error) {
		status, h := http.StatusOK, http.Header{}
		if req.URL.Path == "/pause" {
			status = code
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
	}
}
