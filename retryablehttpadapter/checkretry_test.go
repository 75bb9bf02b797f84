package retryablehttpadapter_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/retryablehttpadapter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// response returns a response to req with the given status and headers.
func response(method string, key bool, status int, header ...string) *http.Response {
	req, _ := http.NewRequest(method, "http://127.0.0.1:1/v1/charges", nil)
	if key {
		req.Header.Set(resilient.DefaultKeyHeader, "k1")
	}
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Request: req, Body: http.NoBody}
}

func TestCheckRetry(t *testing.T) {
	t.Parallel()
	reset := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/charges", Err: io.ErrUnexpectedEOF}
	resetGet := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/v1/charges", Err: io.ErrUnexpectedEOF}
	teapot := func(o resilient.Outcome) resilient.Decision {
		if o.Response != nil && o.Response.StatusCode == http.StatusTeapot {
			return resilient.Decision{Action: resilient.Retry}
		}
		return resilient.DefaultClassifier(o)
	}
	tests := []struct {
		name       string
		classifier resilient.Classifier
		resp       *http.Response
		err        error
		want       bool
	}{
		{name: "503", resp: response(http.MethodPost, false, 503), want: true},
		{name: "422 keyed", resp: response(http.MethodPost, true, 422)},
		{name: "500 unkeyed POST", resp: response(http.MethodPost, false, 500)},
		{name: "500 keyed POST", resp: response(http.MethodPost, true, 500), want: true},
		{name: "500 PUT", resp: response(http.MethodPut, false, 500), want: true},
		{name: "429 Retry-After 30 s", resp: response(http.MethodGet, false, 429, "Retry-After", "30"), want: true},
		{name: "429 Retry-After 31 s", resp: response(http.MethodGet, false, 429, "Retry-After", "31")},
		{name: "reset, POST from url.Error", err: reset},
		{name: "reset, GET from url.Error", err: resetGet, want: true},
		{name: "reset, no request at all", err: io.ErrUnexpectedEOF},
		{name: "redirect refused", resp: response(http.MethodGet, false, 302), err: &url.Error{Op: "Get", URL: "http://127.0.0.1:1/", Err: errors.New("stopped after 10 redirects")}},
		{name: "unsupported scheme", err: &url.Error{Op: "Get", URL: "ftp://127.0.0.1/", Err: errors.New(`unsupported protocol scheme "ftp"`)}},
		{name: "custom classifier", classifier: teapot, resp: response(http.MethodPost, false, http.StatusTeapot), want: true},
		{name: "custom classifier falls back", classifier: teapot, resp: response(http.MethodPost, false, 404)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			retry, err := retryablehttpadapter.CheckRetry(tt.classifier)(context.Background(), tt.resp, tt.err)
			require.NoError(t, err)
			assert.Equal(t, tt.want, retry)
		})
	}
}

func TestCheckRetryHonoursContext(t *testing.T) {
	t.Parallel()
	check := retryablehttpadapter.CheckRetry(nil)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	retry, err := check(canceled, response(http.MethodGet, false, 503), nil)
	assert.False(t, retry)
	assert.ErrorIs(t, err, context.Canceled)

	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	retry, err = check(expired, response(http.MethodGet, false, 503), nil)
	assert.False(t, retry)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// A Retry-After that ends after the deadline: return the response now.
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	retry, err = check(short, response(http.MethodGet, false, 503, "Retry-After", "5"), nil)
	assert.False(t, retry)
	assert.NoError(t, err)
	retry, err = check(short, response(http.MethodGet, false, 503), nil)
	assert.True(t, retry)
	assert.NoError(t, err)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	// 20 s ahead, to the second: the delay is (19 s, 20 s] when computed at
	// once, and stays above 10 s however long a busy machine takes to get
	// to the subtest.
	httpDate := time.Now().Add(20 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name     string
		b        resilient.Backoff
		attempt  int // go-retryablehttp's attemptNum, 0 for the first retry
		resp     *http.Response
		min, max time.Duration
	}{
		{name: "exponential, first retry", b: resilient.Exponential(10*time.Millisecond, time.Second), attempt: 0,
			min: 10 * time.Millisecond, max: 10 * time.Millisecond},
		{name: "exponential, third retry", b: resilient.Exponential(10*time.Millisecond, time.Second), attempt: 2,
			resp: response(http.MethodGet, false, 503), min: 40 * time.Millisecond, max: 40 * time.Millisecond},
		{name: "Retry-After wins over a shorter backoff", b: resilient.Exponential(10*time.Millisecond, time.Second),
			resp: response(http.MethodGet, false, 503, "Retry-After", "2"), min: 2 * time.Second, max: 2 * time.Second},
		{name: "a longer backoff wins over Retry-After", b: resilient.Exponential(5*time.Second, 5*time.Second),
			resp: response(http.MethodGet, false, 429, "Retry-After", "1"), min: 5 * time.Second, max: 5 * time.Second},
		{name: "Retry-After as an HTTP-date", b: resilient.Exponential(time.Millisecond, time.Millisecond),
			resp: response(http.MethodGet, false, 503, "Retry-After", httpDate), min: 10 * time.Second, max: 20 * time.Second},
		{name: "RateLimit r=0", b: resilient.Exponential(time.Millisecond, time.Millisecond),
			resp: response(http.MethodGet, false, 429, "RateLimit", `"default";r=0;t=3`), min: 3 * time.Second, max: 3 * time.Second},
		{name: "nil: FullJitter(RetryWaitMin, RetryWaitMax)", attempt: 3, min: 0, max: 80 * time.Millisecond},
		{name: "nil, honours Retry-After", resp: response(http.MethodGet, false, 503, "Retry-After", "1"),
			min: time.Second, max: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bo := retryablehttpadapter.Backoff(tt.b)
			for range 50 {
				d := bo(10*time.Millisecond, 100*time.Millisecond, tt.attempt, tt.resp)
				assert.GreaterOrEqual(t, d, tt.min)
				assert.LessOrEqual(t, d, tt.max)
			}
		})
	}
}
