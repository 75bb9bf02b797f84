package e2e

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v85"
)

// stripeMockInstall is how scripts/e2e-deps installs stripe-mock.
// defaultAttempts is WithMaxAttempts' default.
const defaultAttempts = 4

const stripeMockInstall = "go install github.com/stripe/stripe-mock@v0.203.0"

// startStripeMock starts stripe-mock (Stripe's API, canned responses) on a
// free loopback port and returns its base URL. It is stopped when the test
// ends. A missing binary fails the test with the command that installs it.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := findBinary(t, "E2E_STRIPE_MOCK", "stripe-mock", stripeMockInstall, goBin())
	addr := "127.0.0.1:" + itoa(freePort(t))
	dir := t.TempDir()
	startProcess(t, exec.Command(bin, "-http-addr", addr), dir, "stripe-mock.log")
	err := waitFor(context.Background(), 20*time.Second, func() error { return dialable(addr) })
	require.NoError(t, err, "stripe-mock did not listen on %s (log in %s)", addr, dir)
	return "http://" + addr
}

// sighting is one request the fault proxy saw.
type sighting struct {
	key     string // Idempotency-Key
	attempt string // Retry-Attempt
	fault   string // what the proxy did: "503", "drop" or "" (forwarded)
}

// faultProxy stands in front of stripe-mock and injects failures: for the
// n-th request (1 for the first) of each idempotency key, fault says what
// to do — "503" (a gateway's page, answered by the proxy, not forwarded), "drop" (forwarded,
// answered by stripe-mock, then the connection is closed before the answer
// reaches the client) or "" (forwarded). It records every request.
type faultProxy struct {
	fault func(n int) string
	proxy *httputil.ReverseProxy

	mu   sync.Mutex
	seen []sighting
	per  map[string]int
}

func newFaultProxy(t *testing.T, upstream string, fault func(n int) string) (*faultProxy, string) {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p := &faultProxy{fault: fault, per: map[string]int{}, proxy: httputil.NewSingleHostReverseProxy(u)}
	p.proxy.Transport = tr
	p.proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewUnstartedServer(p)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	p.per[key]++
	f := p.fault(p.per[key])
	p.seen = append(p.seen, sighting{key: key, attempt: r.Header.Get(resilient.DefaultAttemptHeader), fault: f})
	p.mu.Unlock()
	switch f {
	case "503":
		// A gateway's page, not a Stripe error: stripe-go retries it (it
		// does not retry a 5xx whose body is a Stripe error object unless
		// Stripe-Should-Retry says so).
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "<html><body><h1>503 Service Unavailable</h1></body></html>\n")
	case "drop":
		p.proxy.ServeHTTP(httptest.NewRecorder(), r) // stripe-mock answers; the answer is lost
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		conn.Close()
	default:
		p.proxy.ServeHTTP(w, r)
	}
}

// sightings returns what the proxy saw, in arrival order.
func (p *faultProxy) sightings() []sighting {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sighting(nil), p.seen...)
}

// countingRT counts the calls of stripe-go's own retry loop: each is one
// RoundTrip of the resilient Transport.
// It notes, for each call, how many requests the proxy had seen before it.
type countingRT struct {
	next   http.RoundTripper
	proxy  *faultProxy
	calls  atomic.Int32
	mu     sync.Mutex
	starts []int
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	n := len(c.proxy.sightings())
	c.mu.Lock()
	c.starts = append(c.starts, n)
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// perCall returns the attempts of each call, given the total.
func (c *countingRT) perCall(total int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, s := range c.starts {
		end := total
		if i+1 < len(c.starts) {
			end = c.starts[i+1]
		}
		out = append(out, end-s)
	}
	return out
}

// TestStripeGoAgainstStripeMock runs stripe-go, its backend's HTTPClient
// being resilient.Wrap(...), against stripe-mock behind a fault proxy, and
// shows what issue 12 asks of SDKs that retry on their own:
//
//   - with stripe-go's default MaxNetworkRetries and the Transport's
//     defaults, the attempts of one logical create (one idempotency key) are
//     numbered continuously across stripe-go's calls: Retry-Attempt never
//     restarts (none on the first attempt, then 1, 2, …), and the total is bounded by (retries+1) × attempts;
//   - the two sane setups work: stripe-go's retries off with resilient
//     retrying, and resilient as a gate (WithMaxAttempts(1)) with stripe-go
//     retrying.
//
// Everything is asserted on what the proxy saw.
func TestStripeGoAgainstStripeMock(t *testing.T) {
	mock := startStripeMock(t)
	always := func(int) string { return "503" }
	firstTwo := func(n int) string {
		if n <= 2 {
			return "503"
		}
		return ""
	}
	lostOnce := func(n int) string {
		if n == 1 {
			return "drop"
		}
		return ""
	}
	tests := []struct {
		name       string
		retries    *int64 // stripe-go's MaxNetworkRetries; nil: its default
		options    []resilient.Option
		fault      func(n int) string
		created    bool
		attempts   int // exact attempts the proxy sees; 0: only bounded
		maxAtt     int // bound on attempts
		stripeRuns int // stripe-go's calls of the Transport; 0: not checked
	}{
		{
			name:       "stripe-go default retries, resilient defaults, always 503",
			fault:      always,
			maxAtt:     int(stripe.DefaultMaxNetworkRetries+1) * defaultAttempts,
			stripeRuns: int(stripe.DefaultMaxNetworkRetries + 1),
		},
		{
			name:    "stripe-go retries off, resilient retrying: 503, 503, created",
			retries: stripe.Int64(0),
			options: []resilient.Option{resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 10*time.Millisecond))},
			fault:   firstTwo, created: true, attempts: 3, maxAtt: 3, stripeRuns: 1,
		},
		{
			name:    "stripe-go retries off, resilient retrying: answer lost, created",
			retries: stripe.Int64(0),
			options: []resilient.Option{resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 10*time.Millisecond))},
			fault:   lostOnce, created: true, attempts: 2, maxAtt: 2, stripeRuns: 1,
		},
		{
			name:    "resilient as a gate (one attempt per call), stripe-go retrying: 503, 503, created",
			options: []resilient.Option{resilient.WithMaxAttempts(1)},
			fault:   firstTwo, created: true, attempts: 3, maxAtt: 3, stripeRuns: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy, proxyURL := newFaultProxy(t, mock, tt.fault)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			hc := resilient.Wrap(&http.Client{Transport: base, Timeout: 20 * time.Second}, tt.options...)
			calls := &countingRT{next: hc.Transport, proxy: proxy}
			hc.Transport = calls
			sc := stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
				HTTPClient:        hc,
				URL:               stripe.String(proxyURL),
				MaxNetworkRetries: tt.retries,
				LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
			})))

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cus, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("jenny@example.com")})

			seen := proxy.sightings()
			require.NotEmpty(t, seen)
			key := seen[0].key
			require.NotEmpty(t, key, "stripe-go sends an idempotency key on a create")
			var attempts []string
			for i, s := range seen {
				assert.Equal(t, key, s.key, "one logical create, one key")
				want := strconv.Itoa(i)
				if i == 0 {
					want = "" // a first attempt has no attempt header
				}
				assert.Equal(t, want, s.attempt, "attempt %d of the operation: numbered continuously across stripe-go's calls", i)
				attempts = append(attempts, s.attempt)
			}
			t.Logf("%s: %d attempts %v, %d stripe-go calls (attempts per call %v), err %v", tt.name, len(seen), attempts, calls.calls.Load(), calls.perCall(len(seen)), err)
			assert.LessOrEqual(t, len(seen), tt.maxAtt, "attempts bounded")
			if tt.attempts > 0 {
				assert.Len(t, seen, tt.attempts)
			}
			if tt.stripeRuns > 0 {
				assert.Equal(t, int32(tt.stripeRuns), calls.calls.Load(), "stripe-go's calls of the Transport")
			}
			if tt.created {
				require.NoError(t, err)
				assert.NotEmpty(t, cus.ID)
			} else {
				require.Error(t, err)
				// stripe-go retried (its key repeats: its retries are an
				// outer loop's), and its retries went through the gate:
				// once the first call spent the retry tokens, each was
				// refused without being sent (issue 24: no attempt
				// multiplication).
				assert.Greater(t, calls.calls.Load(), int32(1), "stripe-go retried")
				assert.LessOrEqual(t, len(seen), defaultAttempts, "stripe-go's retries refused by the spent retry tokens")
			}
		})
	}
}
