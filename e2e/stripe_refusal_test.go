//go:build sdkbugs

// This file holds a test of a requirement of issue 12 (item 4) that the SDK
// does not meet yet, so that it does not fail the module's ordinary test
// run; run it with
//
//	go test -tags sdkbugs -run TestStripeGoDoesNotRetryALocalRefusal ./...

package e2e

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v85"
)

// refusalRT records which of stripe-go's calls of the Transport the
// Transport refused locally (ErrCircuitOpen), without sending anything.
type refusalRT struct {
	next    http.RoundTripper
	mu      sync.Mutex
	refused []bool
}

func (r *refusalRT) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	r.mu.Lock()
	r.refused = append(r.refused, errors.Is(err, resilient.ErrCircuitOpen))
	r.mu.Unlock()
	return resp, err
}

// TestStripeGoDoesNotRetryALocalRefusal: issue 12 asks that a local refusal
// (the breaker open) be something stripe-go will not retry — it honours
// Stripe-Should-Retry: false on a response — instead of stripe-go retrying
// the SDK's own ErrCircuitOpen with its own sleeps. With a breaker that
// opens after a few failures, stripe-go (default MaxNetworkRetries) must
// not call the Transport again once it refused a call.
func TestStripeGoDoesNotRetryALocalRefusal(t *testing.T) {
	mock := startStripeMock(t)
	_, proxyURL := newFaultProxy(t, mock, func(int) string { return "503" })
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	hc := resilient.Wrap(&http.Client{Transport: base, Timeout: 20 * time.Second},
		resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 5*time.Millisecond)),
		resilient.WithBreaker(resilient.BreakerSettings{MinRequests: 2, FailureRatio: 0.5, Window: 10 * time.Second, OpenTimeout: time.Minute}))
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
	t.Logf("stripe-go's calls, refused locally: %v", rt.refused)
	first := -1
	for i, r := range rt.refused {
		if r {
			first = i
			break
		}
	}
	require.GreaterOrEqual(t, first, 0, "the breaker opened and refused a call")
	assert.Len(t, rt.refused, first+1, "stripe-go called the Transport again after a local refusal")
}
