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

// A host that keeps shedding (every answer 503 with Retry-After, renewed by
// other requests) gets no retries once its first attempts show it (cold,
// it gets the few its retry tokens allow), and no retry is slept for and
// then dropped: the caller of each operation gets the 503 at once, decided
// before any wait, as from a bare client. First attempts still go out.
func TestRetriesStopWhileTheHostKeepsShedding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.Deduping([]int{503}, "Retry-After: 1")...)
		tr := NewTransport(s)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var (
			others sync.WaitGroup
			mu     sync.Mutex
			waited int // calls that took time: a retry was waited for
			sent   int // attempts the others sent
		)
		others.Go(func() { // other operations, one starting every 100 ms
			for ctx.Err() == nil {
				others.Go(func() {
					rep := new(Report)
					start := time.Now()
					if resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(ctx, rep), "{}")); err == nil {
						resp.Body.Close()
					}
					mu.Lock()
					defer mu.Unlock()
					sent += len(rep.Attempts)
					if time.Since(start) > 0 {
						waited++
					}
				})
				time.Sleep(100 * time.Millisecond)
			}
		})
		time.Sleep(3 * time.Second)
		rep := new(Report)
		start := time.Now()
		resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(context.Background(), rep), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, rep.Attempts, 1, "no retry while the host sheds")
		assert.ErrorIs(t, rep.Stopped, ErrDelayTooLong)
		assert.Zero(t, time.Since(start), "decided before any wait")
		cancel()
		others.Wait()
		// Until firstsMin first attempts, the host is cold: no evidence
		// that it sheds, so its 503s' retries wait the delay, as many as
		// the retry tokens allow (a fresh bucket: 3). From then on, no
		// retry waited while others were shed.
		assert.LessOrEqual(t, waited, 3, "only the cold host's retries, within the tokens")
		assert.LessOrEqual(t, sent, 31+3, "first attempts, and the cold host's retries")
	})
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

// TestFirstAttemptWaitsForAPause: a 429 with Retry-After holds back the
// first attempts that follow it, when the wait fits their deadline.
func TestFirstAttemptWaitsForAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Duration
		start := time.Now()
		base := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			code, h := http.StatusOK, http.Header{}
			if len(sent) == 2 {
				code = http.StatusTooManyRequests
				h.Set("Retry-After", "3")
			}
			return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
		})
		tr := NewTransport(base, WithMaxAttempts(1))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		require.Equal(t, 429, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		assert.Equal(t, []time.Duration{0, 0, 3 * time.Second}, sent)
	})
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

// TestExpiredPauseIsCleared: once a server's pause has ended, the next
// request clears it.
func TestExpiredPauseIsCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusTooManyRequests, "2"), WithMaxAttempts(1))
		pause, _ := http.NewRequest(http.MethodGet, "http://api.test/pause", nil)
		require.Equal(t, 429, roundTrip(t, tr, pause))
		v, _ := tr.hosts.M.Load("api.test")
		h := v.(*host.State)
		require.NotZero(t, h.Pauses.PauseUntil.Load())
		time.Sleep(3 * time.Second)
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		assert.Zero(t, h.Pauses.PauseUntil.Load(), "the ended pause is cleared")
	})
}
