package storm

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
)

// The anchors: published retry-admission policies, each in a self-contained
// retry loop (anchorTransport) that is otherwise the SDK's: 4 attempts,
// FullJitter(100 ms, 2 s) between them, Retry-After honoured (the wait is
// the larger of the backoff and the server's delay; a server delay above
// 30 s stops the retries), a stable Idempotency-Key per operation, and no
// sleep into the caller's deadline. Only the admission of retries differs;
// none of them ever refuses or delays a first attempt. Each policy is per
// Transport: per client at the per-client scale, one for all at the shared
// scale.
const (
	anchorAttempts      = 4
	anchorBackoffBase   = 100 * time.Millisecond
	anchorBackoffMax    = 2 * time.Second
	anchorRetryAfterMax = 30 * time.Second
)

// anchorOutcome is what an attempt says about the server's health.
type anchorOutcome uint8

const (
	outcomeSuccess anchorOutcome = iota // an answer that is not a failure (2xx–4xx but 408, 409, 425, 429)
	outcomeFailure                      // 5xx, 408, 429, a reset, a timeout: the server is struggling
	outcomeNeutral                      // 409 in progress, 425: retryable, but no sign of health either way
)

// anchorPolicy admits retries. The loop calls first before a first attempt,
// acquire before a retry (false: do not retry; cost is whatever the policy
// took for it), and done after every attempt with its outcome and the cost
// acquired for it (0 for a first attempt). Implementations are safe for
// concurrent use.
type anchorPolicy interface {
	first(now time.Time)
	acquire(now time.Time, timeout bool) (cost float64, ok bool)
	done(now time.Time, o anchorOutcome, cost float64)
}

// anchorTransport is the retry loop of the anchors.
type anchorTransport struct {
	base    http.RoundTripper
	policy  anchorPolicy
	backoff resilient.Backoff
	newKey  func() (string, error) // mints an operation's key when the request has none
}

func newAnchor(base http.RoundTripper, p anchorPolicy) *http.Client {
	return &http.Client{Transport: &anchorTransport{base: base, policy: p,
		backoff: jitter(base, resilient.FullJitter(anchorBackoffBase, anchorBackoffMax)), newKey: keysOf(base)}}
}

// RoundTrip sends req with up to anchorAttempts attempts.
func (t *anchorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	closeBody := func() {
		if req.Body != nil {
			req.Body.Close()
		}
	}
	if req.Body != nil && req.GetBody == nil {
		closeBody()
		return nil, errors.New("storm: anchor retries need a request with GetBody")
	}
	key := req.Header.Get(resilient.DefaultKeyHeader)
	if key == "" {
		k, err := t.newKey()
		if err != nil {
			closeBody()
			return nil, err
		}
		key = k
	}
	var prev time.Duration
	cost := 0.0
	for n := 1; ; n++ {
		areq := req.Clone(ctx)
		areq.Header.Set(resilient.DefaultKeyHeader, key)
		if req.Body != nil {
			body, err := req.GetBody()
			if err != nil {
				closeBody()
				return nil, err
			}
			areq.Body = body
		}
		if n == 1 {
			t.policy.first(time.Now())
		}
		resp, err := t.base.RoundTrip(areq)
		o, retryable, timeout := anchorClassify(ctx, resp, err)
		t.policy.done(time.Now(), o, cost)
		if !retryable || n >= anchorAttempts {
			closeBody()
			return resp, err
		}
		delay := t.backoff.Delay(n, prev)
		if resp != nil {
			server := resilient.ServerDelay(resp.Header, time.Now())
			if server > anchorRetryAfterMax {
				closeBody()
				return resp, err
			}
			delay = max(delay, server)
		}
		prev = delay
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= delay {
			closeBody()
			return resp, err // never sleep into the deadline
		}
		c, ok := t.policy.acquire(time.Now(), timeout)
		if !ok {
			closeBody()
			return resp, err
		}
		cost = c
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, 64<<10)
			resp.Body.Close()
		}
		if !sleep(ctx, delay) {
			closeBody()
			return nil, ctx.Err()
		}
	}
}

// anchorClassify says what an attempt's outcome means: for the server's
// health, whether to retry, and whether it was a timeout.
func anchorClassify(ctx context.Context, resp *http.Response, err error) (o anchorOutcome, retryable, timeout bool) {
	if err != nil {
		if ctx.Err() != nil {
			return outcomeNeutral, false, false // the caller gave up
		}
		var ne net.Error
		timeout = errors.As(err, &ne) && ne.Timeout()
		return outcomeFailure, true, timeout
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout:
		return outcomeFailure, true, true
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return outcomeFailure, true, resp.StatusCode == http.StatusGatewayTimeout
	case http.StatusConflict, http.StatusTooEarly:
		return outcomeNeutral, true, false // in progress: the same key is being served
	}
	return outcomeSuccess, false, false
}

// finaglePolicy is Finagle's retry budget (RetryBudget's defaults, as in
// Linkerd): every first attempt deposits, every retry withdraws, and
// retries may be at most 20 % of the first attempts plus 10 per second,
// over a 10 s window. It is resilient's in-memory budget at
// resilient.RetryBudget's defaults.
type finaglePolicy struct{ b *retrycontrol.Budget }

func (p finaglePolicy) first(time.Time) { p.b.Deposit() }
func (p finaglePolicy) acquire(time.Time, bool) (float64, bool) {
	return 0, p.b.Withdraw()
}
func (finaglePolicy) done(time.Time, anchorOutcome, float64) {}

// window counts two numbers over a rolling window of buckets.
type window struct {
	bucket time.Duration
	epochs []int64 // the bucket index in absolute time each slot holds
	a, b   []float64
}

func newWindow(length time.Duration, buckets int) *window {
	return &window{bucket: length / time.Duration(buckets), epochs: make([]int64, buckets),
		a: make([]float64, buckets), b: make([]float64, buckets)}
}

// add counts da and db at now.
func (w *window) add(now time.Time, da, db float64) {
	e := now.UnixNano() / int64(w.bucket)
	i := int(e % int64(len(w.epochs)))
	if w.epochs[i] != e {
		w.epochs[i], w.a[i], w.b[i] = e, 0, 0
	}
	w.a[i] += da
	w.b[i] += db
}

// sums returns the counts of the buckets within the window at now.
func (w *window) sums(now time.Time) (a, b float64) {
	e := now.UnixNano() / int64(w.bucket)
	for i, ep := range w.epochs {
		if ep > e-int64(len(w.epochs)) && ep <= e {
			a += w.a[i]
			b += w.b[i]
		}
	}
	return a, b
}

// retryBreakerPolicy is the retry-only circuit breaker of Brooker, "Fixing
// retries with token buckets and circuit breakers" (2022): first attempts
// always go out; retries are refused while the recent failure rate is
// above a threshold. The post gives the rule, not the numbers; here every
// attempt's outcome counts over a 10 s window (10 buckets), and retries stop
// while more than 10 % of the attempts in it failed (the post's token bucket
// turns over at the same 10 %).
type retryBreakerPolicy struct {
	mu sync.Mutex
	w  *window // a: attempts with a health outcome, b: failures
}

const (
	retryBreakerThreshold = 0.1
	retryBreakerWindow    = 10 * time.Second
)

func newRetryBreakerPolicy() *retryBreakerPolicy {
	return &retryBreakerPolicy{w: newWindow(retryBreakerWindow, 10)}
}

func (*retryBreakerPolicy) first(time.Time) {}

func (p *retryBreakerPolicy) acquire(now time.Time, _ bool) (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	attempts, failures := p.w.sums(now)
	return 0, attempts == 0 || failures <= retryBreakerThreshold*attempts
}

func (p *retryBreakerPolicy) done(now time.Time, o anchorOutcome, _ float64) {
	if o == outcomeNeutral {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := 0.0
	if o == outcomeFailure {
		f = 1
	}
	p.w.add(now, 1, f)
}

// srePolicy is the client-side adaptive throttling of Google's SRE book
// ("Handling Overload"), applied to retries only: the client counts, over
// the last 2 minutes, requests (every attempt, and every retry it refused
// itself) and accepts (attempts the backend answered without failing), and
// refuses a retry with probability max(0, (requests − K·accepts) /
// (requests + 1)), K = 2. Applied to every request it would refuse first
// attempts too, which is harm; first attempts here always go out. The
// window is the book's 2 minutes (12 buckets of 10 s): the storm's sweep
// points last 80 s at the default load, so the window holds the whole run.
type srePolicy struct {
	mu  sync.Mutex
	w   *window // a: requests, b: accepts
	rng *rand.Rand
}

const (
	sreK      = 2
	sreWindow = 2 * time.Minute
)

func newSREPolicy() *srePolicy {
	return &srePolicy{w: newWindow(sreWindow, 12), rng: rand.New(rand.NewPCG(0x5e, 0xe7))}
}

func (*srePolicy) first(time.Time) {}

func (p *srePolicy) acquire(now time.Time, _ bool) (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	requests, accepts := p.w.sums(now)
	reject := max(0, (requests-sreK*accepts)/(requests+1))
	if p.rng.Float64() < reject {
		p.w.add(now, 1, 0) // a refused request still counts as a request
		return 0, false
	}
	return 0, true
}

func (p *srePolicy) done(now time.Time, o anchorOutcome, _ float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	acc := 0.0
	if o != outcomeFailure {
		acc = 1
	}
	p.w.add(now, 1, acc)
}

// grpcPolicy is gRPC's retry throttling (gRFC A6, retryThrottling) at
// maxTokens 10, tokenRatio 0.1: the token count starts at 10; every failed
// attempt takes 1 (down to 0), every successful one gives back 0.1 (up to
// 10); retries are allowed only while the count is above maxTokens/2.
type grpcPolicy struct {
	mu     sync.Mutex
	tokens float64
}

const (
	grpcMaxTokens  = 10
	grpcTokenRatio = 0.1
)

func newGRPCPolicy() *grpcPolicy { return &grpcPolicy{tokens: grpcMaxTokens} }

func (*grpcPolicy) first(time.Time) {}

func (p *grpcPolicy) acquire(time.Time, bool) (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return 0, p.tokens > grpcMaxTokens/2
}

func (p *grpcPolicy) done(_ time.Time, o anchorOutcome, _ float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch o {
	case outcomeFailure:
		p.tokens = max(0, p.tokens-1)
	case outcomeSuccess:
		p.tokens = min(grpcMaxTokens, p.tokens+grpcTokenRatio)
	}
}

// awsPolicy is the retry quota of the AWS SDK for Go v2's standard retryer
// (aws/retry: DefaultRetryRateTokens 500, DefaultRetryCost 5,
// DefaultRetryTimeoutCost 10, DefaultNoRetryIncrement 1, over
// ratelimit.TokenRateLimit): the bucket starts full at 500; a retry takes 5
// tokens (10 after a timeout) and is not made if fewer remain; a first
// attempt that succeeds adds 1, and a retry that succeeds gives back what it
// took; the bucket never exceeds 500. Nothing refills it with time.
type awsPolicy struct {
	mu     sync.Mutex
	tokens float64
}

const (
	awsTokens           = 500
	awsRetryCost        = 5
	awsRetryTimeoutCost = 10
	awsNoRetryIncrement = 1
)

func newAWSPolicy() *awsPolicy { return &awsPolicy{tokens: awsTokens} }

func (*awsPolicy) first(time.Time) {}

func (p *awsPolicy) acquire(_ time.Time, timeout bool) (float64, bool) {
	cost := float64(awsRetryCost)
	if timeout {
		cost = awsRetryTimeoutCost
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens < cost {
		return 0, false
	}
	p.tokens -= cost
	return cost, true
}

func (p *awsPolicy) done(_ time.Time, o anchorOutcome, cost float64) {
	if o != outcomeSuccess {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cost > 0 {
		p.tokens = min(awsTokens, p.tokens+cost)
	} else {
		p.tokens = min(awsTokens, p.tokens+awsNoRetryIncrement)
	}
}

// anchorStrategies are the anchors as storm strategies.
func anchorStrategies() []Strategy {
	mk := func(name, desc string, policy func() anchorPolicy) Strategy {
		return Strategy{Name: name, Description: desc, Keyed: true, NewClient: func(base http.RoundTripper) *http.Client {
			return newAnchor(base, policy())
		}}
	}
	return []Strategy{
		mk("anchor-finagle", "Finagle retry budget: retries ≤ 20 % of first attempts + 10/s over 10 s", func() anchorPolicy {
			return finaglePolicy{retrycontrol.NewBudget(retrycontrol.BudgetConfig{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second})}
		}),
		mk("anchor-retrybreaker", "Brooker 2022 retry-only breaker: no retry while > 10 % of attempts failed in 10 s", func() anchorPolicy {
			return newRetryBreakerPolicy()
		}),
		mk("anchor-sre", "Google SRE adaptive throttling on retries: refuse with p = (requests − 2·accepts)/(requests + 1), 2 min", func() anchorPolicy {
			return newSREPolicy()
		}),
		mk("anchor-grpc", "gRPC retry throttling: 10 tokens, failure −1, success +0.1, retry while > 5", func() anchorPolicy {
			return newGRPCPolicy()
		}),
		mk("anchor-aws", "AWS SDK v2 retry quota: 500 tokens, retry −5 (timeout −10), success +1, successful retry refunded", func() anchorPolicy {
			return newAWSPolicy()
		}),
	}
}
