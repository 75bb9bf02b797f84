package sdk

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
)

// counted counts the SDK's calls of the Transport and the refusals among
// them.
type counted struct {
	next            http.RoundTripper
	calls, refusals atomic.Int32
}

func (c *counted) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	resp, err := c.next.RoundTrip(req)
	if err != nil || resp.Header.Get("Resilient-Refused") != "" {
		c.refusals.Add(1)
	}
	return resp, err
}

// TestSDKRefusedRetry: the gate governs the SDK's retries. A breaker that
// opens on the first failure refuses the SDK's first retry without sending
// it. openai-go gets a 503 with X-Should-Retry: false and stripe-go a 503
// with Stripe-Should-Retry: false and a Stripe error body, which they do
// not retry: the call fails after one attempt on the wire and two calls of
// the Transport. aws-sdk-go-v2 has no answer it does not retry (it retries
// any error of the HTTP client as a connection error): it gets an *Error
// for each of its retries, sleeps its backoff between them as it would
// alone, and no retry reaches the wire.
func TestSDKRefusedRetry(t *testing.T) {
	breaker := resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{MinRequests: 1, FailureRatio: 0.5, Window: 10 * time.Second, OpenTimeout: time.Minute})
	calls := map[string]int32{openaiGo.name: 2, dynamoDB.name: 4, stripeGo.name: 2}
	for _, c := range []client{openaiGo, dynamoDB, stripeGo} {
		t.Run(c.name, func(t *testing.T) {
			var ct *counted
			st := setup{"breaker", func(rt http.RoundTripper) *http.Client {
				hc := resilient.Wrap(&http.Client{Transport: rt}, append(recommended[c.name].opts, breaker)...)
				ct = &counted{next: hc.Transport}
				hc.Transport = ct
				return hc
			}}
			sc := scenario{name: "always 500", script: always(500, 0, nil)}
			if c.name == stripeGo.name {
				// stripe-go retries no 500 with a Stripe error body; it
				// retries a 429 whose code is lock_timeout.
				sc = scenario{name: "always 429 lock_timeout", script: always(429, 0, map[string]string{stripeCodeHeader: "lock_timeout"})}
			}
			r := run(t, c, st, sc)
			assert.Equal(t, 1, r.attempts, "attempts on the wire")
			assert.Equal(t, 0, r.ok)
			assert.Equal(t, calls[c.name], ct.calls.Load(), "the SDK's calls of the Transport")
			assert.Equal(t, calls[c.name]-1, ct.refusals.Load(), "every retry refused")
		})
	}
}
