// TestStripeGoAndALocalRefusal: a request the Transport refuses without
// sending it (its breaker open) must be something stripe-go does not retry
// with its own sleeps. stripe-go (v82 to v85 alike) reads Stripe-Should-Retry
// only on a response below 400; for a 4xx or 5xx it decides by the body: a
// Stripe error object ({"error":{"type":…}}) is not retried (except a 429
// lock_timeout), any other body is a plain error it retries. So the refusal
// response of WithRefusalResponses carries a Stripe-shaped "error" member
// next to its problem fields (RFC 9457 allows extension members).

package e2e

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v85"
)

// refusalRT records which of stripe-go's calls of the Transport the
// Transport refused locally (its breaker open), without sending anything:
// an ErrCircuitOpen error, or with WithRefusalResponses a synthetic response
// that says so.
type refusalRT struct {
	next    http.RoundTripper
	mu      sync.Mutex
	refused []bool
}

func (r *refusalRT) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	refused := errors.Is(err, resilient.ErrCircuitOpen) || (resp != nil && resp.Header.Get("Resilient-Refused") != "")
	r.mu.Lock()
	r.refused = append(r.refused, refused)
	r.mu.Unlock()
	return resp, err
}

// TestStripeGoAndALocalRefusal: a request the Transport refuses without
// sending it (a breaker that opens after two failures, here) reaches
// stripe-go as an error, which stripe-go retries with its own sleeps; with
// WithRefusalResponses it is a 503 with Stripe-Should-Retry: false, which
// stripe-go honours: it does not call the Transport again.
func TestStripeGoAndALocalRefusal(t *testing.T) {
	mock := startStripeMock(t)
	tests := []struct {
		name      string
		responses bool // WithRefusalResponses
	}{
		{"refusal as an error: stripe-go retries it", false},
		{"refusal as a response (WithRefusalResponses): stripe-go stops", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy, proxyURL := newFaultProxy(t, mock, func(int) string { return "503" })
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			opts := []resilient.Option{
				resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 5*time.Millisecond)),
				resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{MinRequests: 2, FailureRatio: 0.5, Window: 10 * time.Second, OpenTimeout: time.Minute}),
			}
			if tt.responses {
				opts = append(opts, resilient.WithRefusalResponses())
			}
			hc := resilient.Wrap(&http.Client{Transport: base, Timeout: 20 * time.Second}, opts...)
			rt := &refusalRT{next: hc.Transport}
			hc.Transport = rt
			sc := stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
				HTTPClient:    hc,
				URL:           stripe.String(proxyURL),
				LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
			})))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("jenny@example.com")})
			require.Error(t, err)

			rt.mu.Lock()
			defer rt.mu.Unlock()
			t.Logf("%s: stripe-go's calls, refused locally: %v; %d attempts sent", tt.name, rt.refused, len(proxy.sightings()))
			first := slices.Index(rt.refused, true)
			require.GreaterOrEqual(t, first, 0, "the breaker opened and refused a call")
			if tt.responses {
				assert.Len(t, rt.refused, first+1, "stripe-go called the Transport again after a local refusal")
			} else {
				assert.Greater(t, len(rt.refused), first+1, "stripe-go retries an error")
			}
		})
	}
}
