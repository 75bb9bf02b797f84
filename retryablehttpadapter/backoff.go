package retryablehttpadapter

import (
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/resilienthttp/resilient"
)

// Backoff returns a retryablehttp.Backoff that waits b's delay, but never less
// than the server asked: the server-directed delay resilient.DefaultClassifier
// reads from the response (Retry-After in seconds or as an HTTP-date on a 429,
// a 503, a 409 "in progress" or another retryable 5xx; the IETF RateLimit
// fields when the quota is spent).
//
// go-retryablehttp numbers retries from 0; b is called with attempt
// attemptNum+1 (1 for the first retry) and prev 0, since go-retryablehttp
// does not pass the previous delay: DecorrelatedJitter then draws from
// [base, 3·base) every time, so prefer FullJitter or EqualJitter here.
//
// With a nil b it uses resilient.FullJitter(RetryWaitMin, RetryWaitMax) of
// the retryablehttp.Client: a random wait in
// [0, min(RetryWaitMax, RetryWaitMin·2^attemptNum)). A non-nil b ignores them.
//
// The server-directed delay is not capped here; CheckRetry refuses to retry
// when it is over the Transport's default Retry-After maximum (30 s) or
// past the deadline.
func Backoff(b resilient.Backoff) retryablehttp.Backoff {
	return func(waitMin, waitMax time.Duration, attemptNum int, resp *http.Response) time.Duration {
		bo := b
		if bo == nil {
			bo = resilient.FullJitter(waitMin, waitMax)
		}
		return max(bo.Delay(attemptNum+1, 0), serverDelay(resp))
	}
}

// serverDelay is the server-directed delay of resp's headers (Retry-After,
// RateLimit), 0 without a response.
func serverDelay(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	return resilient.ServerDelay(resp.Header, time.Now())
}
