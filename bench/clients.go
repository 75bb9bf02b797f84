package bench

import (
	"io"
	"net/http"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/resilienthttp/resilient"
)

// The clients compared by the benchmarks, each built over the same base
// RoundTripper so that only the retry layer differs. Each returns a new
// *http.Client with no Timeout; bound requests with their context.

// NetHTTP returns a client that sends each request once through base.
func NetHTTP(base http.RoundTripper) *http.Client {
	return &http.Client{Transport: base}
}

// Resilient returns a client whose Transport is resilient.NewTransport(base,
// opts...): with no options, the SDK's defaults (a key per POST, 4 attempts,
// FullJitter(100ms, 2s), a retry budget and a circuit breaker per host).
func Resilient(base http.RoundTripper, opts ...resilient.Option) *http.Client {
	return &http.Client{Transport: resilient.NewTransport(base, opts...)}
}

// RetryableHTTP returns go-retryablehttp's StandardClient with its defaults
// (4 retries, exponential backoff from 1 s to 30 s without jitter,
// Retry-After honoured on 429 and 503) and its logger off, sending through
// base.
func RetryableHTTP(base http.RoundTripper) *http.Client {
	return RetryableHTTPWith(base, nil)
}

// RetryableHTTPWith is RetryableHTTP with configure applied to the
// retryablehttp.Client (after the defaults, before StandardClient), if not nil.
func RetryableHTTPWith(base http.RoundTripper, configure func(*retryablehttp.Client)) *http.Client {
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	rc.HTTPClient = &http.Client{Transport: base}
	if configure != nil {
		configure(rc)
	}
	return rc.StandardClient()
}

// Failsafe returns a client whose Transport is failsafe-go's failsafehttp
// RoundTripper over base with the retry policy of
// failsafehttp.NewRetryPolicyBuilder at its defaults: 2 retries (3 attempts)
// on errors, 429 and 5xx except 501, no delay unless Retry-After says so.
//
// Two fixes, which change no decision of the policy: failsafe-go v0.9.8
// closes neither the body of a response it retries nor that of the last
// response when retries run out (it returns a retrypolicy.ExceededError that
// holds it). Each leaks a connection and its two goroutines, which a storm
// turns into thousands. The policy here drains and closes a response when it
// schedules its retry and when it gives up; the error is returned unchanged.
func Failsafe(base http.RoundTripper) *http.Client {
	policy := failsafehttp.NewRetryPolicyBuilder().
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) { discard(e.LastResult()) }).
		OnRetriesExceeded(func(e failsafe.ExecutionEvent[*http.Response]) { discard(e.LastResult()) }).
		Build()
	return &http.Client{Transport: failsafehttp.NewRoundTripper(base, policy)}
}

// discard drains (up to 64 KiB) and closes resp's body.
func discard(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		io.CopyN(io.Discard, resp.Body, 64<<10)
		resp.Body.Close()
	}
}
