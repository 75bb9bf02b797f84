package resilient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// gateTransport has every policy of the gate, with room to see each one's
// accounting: 3 retry tokens, a budget of 10 retries, a breaker that never
// trips on its own.
var gateControls = []RetryControl{
	RetryTokens{MinTokens: 3, CapRatio: -1},
	RetryBudget{Ratio: -1, MinPerSecond: 1},
	CircuitBreaker{MinRequests: 1000},
}

func gateTransport(base http.RoundTripper, opts ...Option) *Transport {
	all := append([]Option{
		WithBackoff(Exponential(10*time.Millisecond, 10*time.Millisecond)),
		WithRetryControl(gateControls...),
	}, opts...)
	return NewTransport(base, all...)
}

// assertReleased checks that every reservation of the host was released
// exactly once: tokens and budget hold only what sent retries spent, and
// the breaker saw one done for every Allow.
func assertReleased(t *testing.T, tr *Transport, sentRetries int) {
	t.Helper()
	v, ok := tr.hosts.M.Load("api.test")
	require.True(t, ok)
	h := v.(*host.State)
	now := tr.cfg.now()
	assert.Equal(t, float64(3-sentRetries), h.Tokens.AvailableAt(now), "tokens: only sent retries are spent")
	assert.Equal(t, float64(10-sentRetries), h.Budget.(*retrycontrol.Budget).AvailableAt(now), "budget: only sent retries are spent")
	c := h.Breaker.Counts()
	assert.Equal(t, c.Requests, c.TotalSuccesses+c.TotalFailures+c.TotalExclusions, "breaker: one done per Allow")
}

func TestGateReleasesEveryReservationOnce(t *testing.T) {
	tests := []struct {
		name        string
		codes       []int
		headers     []string
		opts        []Option
		req         func(ctx context.Context) *http.Request
		cancelAfter time.Duration // cancel the caller's context after this long
		deadline    time.Duration
		wantErr     error
		sentRetries int
	}{
		{name: "success", codes: []int{201}},
		{name: "retried then success", codes: []int{503, 201}, sentRetries: 1},
		{
			name: "GetBody fails on the retry", codes: []int{503},
			req: func(ctx context.Context) *http.Request {
				r := stubtest.Post(ctx, "{}")
				r.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
				return r
			},
			wantErr: ErrBodyNotReplayable,
		},
		{name: "cancelled in the backoff", codes: []int{503}, cancelAfter: 5 * time.Millisecond, wantErr: context.Canceled},
		{
			name: "rate limiter refuses a wait past the deadline", codes: []int{503},
			opts: []Option{WithRetryControl(append(gateControls, RateLimit{Rate: rate.Every(time.Hour), Burst: 1})...)}, deadline: time.Second, wantErr: ErrRateLimited,
		},
		{name: "tokens run out", codes: []int{503}, opts: []Option{WithMaxAttempts(10)}, sentRetries: 3, wantErr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := gateTransport(stubtest.New(stubtest.Deduping(tt.codes, tt.headers...)...), tt.opts...)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.deadline > 0 {
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				if tt.cancelAfter > 0 {
					time.AfterFunc(tt.cancelAfter, cancel)
				}
				rep := new(Report)
				ctx = ContextWithReport(ctx, rep)
				req := stubtest.Post(ctx, "{}")
				if tt.req != nil {
					req = tt.req(ctx)
				}
				resp, err := tr.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
					err = rep.Stopped // the last answer is returned; the Report says why it stands
				}
				if tt.wantErr != nil {
					assert.ErrorIs(t, err, tt.wantErr)
				}
				assertReleased(t, tr, tt.sentRetries)
			})
		})
	}
}

// Regression: a pause that begins while a retry sleeps (another answer
// set it) does not drop the retry once it has waited: it is sent, and its
// reservation released once. A retry slept for and then dropped made the
// caller wait for an answer a bare client had at once.
func TestRetryThatWaitedIsSentDespiteANewPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := gateTransport(stubtest.New(stubtest.Deduping([]int{500, 201})...))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		time.AfterFunc(5*time.Millisecond, func() {
			h, _ := tr.hosts.M.Load("api.test")
			h.(*host.State).Pauses.Pause(time.Now().UnixNano(), time.Minute, false)
		})
		rep := new(Report)
		resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(ctx, rep), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 201, resp.StatusCode, "the retry that waited was sent")
		assert.Len(t, rep.Attempts, 2)
		assert.Nil(t, rep.Stopped)
		assertReleased(t, tr, 1)
	})
}

func TestReservationIsReleasedOnlyOnce(t *testing.T) {
	tr := gateTransport(stubtest.New(stubtest.Deduping([]int{201})...))
	h := tr.hosts.Host("api.test", time.Now().UnixNano())
	require.True(t, h.Tokens.TakeAt(time.Now()))
	r := host.Reservation{H: h, Retry: true, Token: true}
	r.Cancel()
	r.Cancel()
	r.Release(&host.Applicant{Cfg: &tr.hc}, host.HealthOK)
	assert.Equal(t, float64(3), h.Tokens.AvailableAt(time.Now()), "one refund, and no earning after a cancel")
}

func TestHealthOf(t *testing.T) {
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	tests := []struct {
		name string
		resp *http.Response
		err  error
		d    Decision
		want host.Health
	}{
		{"201", resp(201), nil, Decision{Action: Success}, host.HealthOK},
		{"404 is the request's fault", resp(404), nil, Decision{Action: Terminal, Category: CategoryNotFound}, host.HealthOK},
		{"409 in progress: the operation is busy", resp(409), nil, Decision{Action: Retry, Category: CategoryInProgress}, host.HealthNeutral},
		{"429 with Retry-After: the pause handles it", resp(429), nil, Decision{Action: Retry, Category: CategoryRateLimit, Delay: time.Second}, host.HealthNeutral},
		{"429 without a delay", resp(429), nil, Decision{Action: Retry, Category: CategoryRateLimit}, host.HealthFailure},
		{"500", resp(500), nil, Decision{Action: Retry}, host.HealthFailure},
		{"503", resp(503), nil, Decision{Action: Retry, Category: CategoryUnavailable}, host.HealthFailure},
		{"501 is a working host's answer", resp(501), nil, Decision{Action: Terminal}, host.HealthOK},
		{"reset", nil, errors.New("reset"), Decision{Action: Retry}, host.HealthFailure},
		{"cancelled caller", nil, context.Canceled, Decision{Action: Terminal, Category: CategoryCanceled}, host.HealthNeutral},
		{"refused locally", nil, ErrInvalidRequest, Decision{Action: Terminal}, host.HealthNeutral},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, healthOf(tt.resp, tt.err, tt.d))
		})
	}
}

// Regression: one breaker Option used by two Transports gave them one
// settings struct, which each NewTransport wrote while the other read it.
func TestBreakerOptionBuildsManyTransports(t *testing.T) {
	opt := WithRetryControl(RetryTokens{}, CircuitBreaker{})
	a := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...), opt)
	b := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...), opt)
	assert.NotSame(t, a.cfg.breaker, b.cfg.breaker)
	assert.Equal(t, *a.cfg.breaker, *b.cfg.breaker)
}

// TestFirstAttemptsSizeTheTokens: every operation's first attempt is
// counted in its host's retry tokens as it is sent.
func TestFirstAttemptsSizeTheTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
		for i := 1; i <= 100; i++ {
			require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
			v, _ := tr.hosts.M.Load("api.test")
			require.Equal(t, int64(i), v.(*host.State).Tokens.Firsts(tr.cfg.now()), "after %d operations", i)
		}
	})
}

// TestPlainSuccessIsCounted: a first attempt that ends an unobserved
// operation early (a plain success, call.succeeded) still earns the host's
// retry tokens back and counts as a success in its breaker.
func TestPlainSuccessIsCounted(t *testing.T) {
	// In a bubble: the breaker's rolling window moves only with its
	// virtual time, so its counts cannot age out between the two reads.
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...), WithRetryControl(RetryTokens{}, CircuitBreaker{}))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		v, _ := tr.hosts.M.Load("api.test")
		h := v.(*host.State)
		for range 3 {
			require.True(t, h.Tokens.TakeAt(tr.cfg.now()))
		}
		before := h.Breaker.Counts()
		for range 4 {
			require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		}
		assert.Equal(t, int64(host.TokenUnit), h.Tokens.Deficit(), "four successes earn 4 × 0.5 tokens")
		after := h.Breaker.Counts()
		assert.Equal(t, before.TotalSuccesses+4, after.TotalSuccesses)
		assert.Equal(t, before.Requests+4, after.Requests)
	})
}

// A breaker-open refusal reaches observers with RetryAt set, and breaker
// transitions carry the host only, not the identity of the request that
// happened to observe them.
func TestObserverSeesRetryAtAndAnonymousTransitions(t *testing.T) {
	var mu sync.Mutex
	var events []Event
	obs := func(_ context.Context, e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{503})...), WithObserver(obs), WithMaxAttempts(1),
		WithRetryControl(RetryTokens{}, CircuitBreaker{MinRequests: 2, FailureRatio: 1, OpenTimeout: time.Hour}))
	for range 2 {
		resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
	}
	_, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
	var re *Error
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, ErrCircuitOpen)
	assert.False(t, re.RetryAt.IsZero())

	var transitions, refusals int
	for _, e := range events {
		switch {
		case e.Kind == EventBreaker:
			transitions++
			assert.Equal(t, "api.test", e.Host)
			assert.Empty(t, e.Key, "a transition belongs to no request")
			assert.Empty(t, e.Method)
		case e.Kind == EventOutcome && e.Outcome == OutcomeCircuitOpen:
			refusals++
			var ee *Error
			require.ErrorAs(t, e.Err, &ee)
			assert.Equal(t, re.RetryAt, ee.RetryAt, "the observer's event carries RetryAt")
		}
	}
	assert.Equal(t, 1, transitions)
	assert.Equal(t, 1, refusals)
}

// Answers that say nothing about the host's health do not open a classic
// breaker: 64 goroutines posting one operation get 409 "in progress", a
// rate limiter answers 429 with Retry-After, callers give up.
func TestOnlyUnhealthyOutcomesCountAgainstTheHost(t *testing.T) {
	tests := []struct {
		name    string
		codes   []int
		headers []string
	}{
		{"409 in progress", []int{409}, []string{"Content-Type: application/problem+json", "Retry-After: 0"}},
		{"429 with Retry-After", []int{429}, []string{"Retry-After: 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTransport(stubtest.New(stubtest.Deduping(tt.codes, tt.headers...)...), WithBackoff(nil), WithMaxAttempts(2),
				WithRetryControl(RetryTokens{}, CircuitBreaker{MinRequests: 5, FailureRatio: 0.5, OpenTimeout: time.Hour}))
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					ctx := ContextWithKey(context.Background(), "popular-operation")
					resp, err := tr.RoundTrip(stubtest.Post(ctx, "{}"))
					if err == nil {
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			h, _ := tr.hosts.M.Load("api.test")
			assert.Equal(t, BreakerClosed, fromGobreaker(h.(*host.State).Breaker.State()))
			assert.Zero(t, h.(*host.State).Breaker.Counts().TotalFailures)
		})
	}
}

// A redirect hop continues an operation: it is not a new first attempt.
func TestRedirectHopIsNotAFirstAttempt(t *testing.T) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{201})...))
	first := stubtest.Post(context.Background(), "{}")
	resp, err := tr.RoundTrip(first)
	require.NoError(t, err)
	hop := stubtest.Post(context.Background(), "{}")
	hop.Response = resp
	resp2, err := tr.RoundTrip(hop)
	require.NoError(t, err)
	resp2.Body.Close()
	h, _ := tr.hosts.M.Load("api.test")
	firsts := h.(*host.State).Tokens.Firsts(time.Now())
	assert.Equal(t, int64(1), firsts)
}
