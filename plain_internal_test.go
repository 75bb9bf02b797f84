package resilient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plainOutcome is what a caller and the host's state show after a run of
// calls: the comparison of a plain call with the loop's.
type plainOutcome struct {
	Calls    []string // per call: status and body, or the error and the sentinels it matches
	Attempts []stubtest.Sent
	Opened   int32
	Closed   int32
	// The host's state.
	Deficit, Firsts        int64
	FirstsWindow           uint64
	Latency                int64
	Pause, Retry, Pushback int64
	Renewed                bool
	Evidence               bool // the POSTs' route has evidence that the server dedupes
}

var plainSentinels = []error{ErrRetriesExhausted, ErrDelayTooLong, ErrTokensExhausted, ErrBudgetExhausted,
	ErrCircuitOpen, ErrRateLimited, ErrInvalidRequest, ErrUnsafeRetry, context.DeadlineExceeded, context.Canceled}

// runPlain sends calls requests of method (GET, or a POST with a body the
// caller can rewind) through a Transport over a stub playing steps, with
// plain calls on or off, in a synctest bubble, and returns what they
// showed. The keys the Transport mints are named K1, K2… in the order
// they were sent, since two runs mint different ones.
func runPlain(t *testing.T, plain bool, method string, calls int, deadline time.Duration, steps []stubtest.Step, opts ...Option) plainOutcome {
	t.Helper()
	var out plainOutcome
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(steps...)
		tr := NewTransport(s, opts...)
		require.True(t, tr.plain, "the options let calls be plain")
		tr.plain = plain
		for range calls {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			req := stubtest.Get(ctx, "api.test")
			if method == http.MethodPost {
				req = stubtest.Post(ctx, `{"amount":1}`)
			}
			resp, err := tr.RoundTrip(req)
			var got string
			if err != nil {
				got = "error " + err.Error()
				for _, s := range plainSentinels {
					if errors.Is(err, s) {
						got += " is " + s.Error()
					}
				}
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = resp.Status + " " + http.StatusText(resp.StatusCode) + " " + string(b)
			}
			cancel()
			out.Calls = append(out.Calls, got)
			time.Sleep(100 * time.Millisecond)
		}
		out.Attempts = s.Attempts()
		out.Opened, out.Closed = s.Opened.Load(), s.Closed.Load()
		now := tr.cfg.nanos()
		h := tr.hosts.Host("api.test", now)
		if h.Tokens != nil {
			out.Deficit, out.Firsts = h.Tokens.Deficit(), h.Tokens.Firsts(clock.Wall(now))
		}
		out.FirstsWindow = h.Pauses.Firsts.W.Load()
		out.Latency = h.Latency.Avg.Load()
		out.Pause, out.Retry, out.Pushback = h.Pauses.PauseUntil.Load(), h.Pauses.RetryPauseUntil.Load(), h.Pauses.PushbackUntil.Load()
		out.Renewed = h.Pauses.Renewed.Load()
		out.Evidence = h.Evidence.Has(host.RouteOf(stubtest.Post(context.Background(), "")), now)
	})
	// The keys, named in the order they were sent.
	names := map[string]string{}
	for _, a := range out.Attempts {
		for _, k := range a.Header.Values(DefaultKeyHeader) {
			if names[k] == "" {
				names[k] = "K" + strconv.Itoa(len(names)+1)
			}
		}
		if ks := a.Header.Values(DefaultKeyHeader); len(ks) > 0 {
			a.Header[DefaultKeyHeader] = []string{names[ks[0]]}
		}
	}
	for i, c := range out.Calls {
		for k, name := range names {
			c = strings.ReplaceAll(c, k, name)
		}
		out.Calls[i] = c
	}
	return out
}

// TestPlainCallMatchesTheLoop: whatever the answers, a run of calls sent
// as plain calls shows the caller, the server and the host's state
// exactly what the loop alone shows. Time is synctest's, so durations and
// pauses compare exactly.
func TestPlainCallMatchesTheLoop(t *testing.T) {
	reset := stubtest.Fail(stubtest.ErrReset)
	for _, tt := range []struct {
		name     string
		steps    []stubtest.Step
		deadline time.Duration
		opts     []Option
	}{
		{"200", []stubtest.Step{stubtest.ReplyBody(200, "ok")}, time.Minute, nil},
		{"a deduping server: 200", []stubtest.Step{stubtest.ReplyDeduping(200)}, time.Minute, nil},
		{"a deduping server: 503 then 200", []stubtest.Step{stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(200)}, time.Minute, nil},
		{"a deduping server declared: 500 then 200", []stubtest.Step{stubtest.Reply(500), stubtest.Reply(200)}, time.Minute,
			[]Option{WithDedupingServer("api.test")}},
		{"409 in progress then 200", []stubtest.Step{stubtest.Reply(409, "Retry-After: 1"), stubtest.Reply(200)}, time.Minute, nil},
		{"204 and 302 are plain successes", []stubtest.Step{stubtest.Reply(204), stubtest.Reply(302, "Location: /x")}, time.Minute, nil},
		{"404 is final", []stubtest.Step{stubtest.Reply(404)}, time.Minute, nil},
		{"500 then 200", []stubtest.Step{stubtest.Reply(500), stubtest.ReplyBody(200, "ok")}, time.Minute, nil},
		{"500 always", []stubtest.Step{stubtest.Reply(500)}, time.Minute, nil},
		{"reset then 200", []stubtest.Step{reset, stubtest.ReplyBody(200, "ok")}, time.Minute, nil},
		{"503 with Retry-After then 200", []stubtest.Step{stubtest.Reply(503, "Retry-After: 1"), stubtest.ReplyBody(200, "ok")}, time.Minute, nil},
		{"429 with Retry-After then 200", []stubtest.Step{stubtest.Reply(429, "Retry-After: 2"), stubtest.ReplyBody(200, "ok")}, time.Minute, nil},
		{"429 past the deadline", []stubtest.Step{stubtest.Reply(429, "Retry-After: 30")}, time.Second, nil},
		{"a budget instead of tokens", []stubtest.Step{stubtest.Reply(500), stubtest.ReplyBody(200, "ok")}, time.Minute,
			[]Option{WithRetryControl(RetryBudget{Ratio: 0.1})}},
		{"no retry control", []stubtest.Step{stubtest.Reply(503), stubtest.Reply(200)}, time.Minute, []Option{WithRetryControl()}},
		{"one attempt", []stubtest.Step{stubtest.Reply(500)}, time.Minute, []Option{WithMaxAttempts(1)}},
		{"a contract-breaking base: no body", []stubtest.Step{func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req}, nil
		}}, time.Minute, nil},
		{"a contract-breaking base: neither", []stubtest.Step{func(*http.Request) (*http.Response, error) { return nil, nil }}, time.Minute, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				loop := runPlain(t, false, method, 6, tt.deadline, tt.steps, tt.opts...)
				plain := runPlain(t, true, method, 6, tt.deadline, tt.steps, tt.opts...)
				assert.Equal(t, loop, plain, method)
				assert.NotEmpty(t, loop.Attempts)
			}
		})
	}
}

// TestPlainCallOnlyWhenNothingIsToBeAdded: a request is a plain call only
// when the loop would send it as is, unobserved, to a host with nothing
// to pass; otherwise sendPlain sends nothing and leaves it to the loop.
func TestPlainCallOnlyWhenNothingIsToBeAdded(t *testing.T) {
	get := func(ctx context.Context) *http.Request { return stubtest.Get(ctx, "api.test") }
	for _, tt := range []struct {
		name  string
		opts  []Option
		req   func(ctx context.Context) *http.Request
		plain bool
	}{
		{"a GET", nil, get, true},
		{"a DELETE", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Method = http.MethodDelete
			return r
		}, true},
		{"a HEAD with a header", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Method = http.MethodHead
			r.Header.Set("Accept", "application/json")
			return r
		}, true},
		{"a POST: a key to mint, a body to rewind", nil, func(ctx context.Context) *http.Request { return stubtest.Post(ctx, "{}") }, true},
		{"a GET in the key methods", []Option{WithKeyMethods(http.MethodGet)}, get, true},
		{"a POST whose body cannot be rewound", nil, func(ctx context.Context) *http.Request {
			r := stubtest.Post(ctx, "{}")
			r.GetBody = nil
			return r
		}, false},
		{"a GET with a body that cannot be rewound", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Body = io.NopCloser(strings.NewReader("x"))
			return r
		}, false},
		{"the application's key function", []Option{WithKeyFunc(NewKey)}, func(ctx context.Context) *http.Request { return stubtest.Post(ctx, "{}") }, false},
		{"the caller's key", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Header.Set("Idempotency-Key", "k-1")
			return r
		}, false},
		{"the caller's key, another spelling", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Header["idempotency-key"] = []string{"k-1"}
			return r
		}, false},
		{"an attempt header", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Header.Set(DefaultAttemptHeader, "2")
			return r
		}, false},
		{"an SDK's retry mark", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Header.Set("X-Stainless-Retry-Count", "1")
			return r
		}, false},
		{"a redirect hop", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Response = &http.Response{StatusCode: 307, Request: get(ctx)}
			return r
		}, false},
		{"an invalid method", nil, func(ctx context.Context) *http.Request {
			r := get(ctx)
			r.Method = "GE T"
			return r
		}, false},
		{"a key in the context", nil, func(ctx context.Context) *http.Request { return get(ContextWithKey(ctx, "k-1")) }, false},
		{"a named operation", nil, func(ctx context.Context) *http.Request { return get(ContextWithOperation(ctx, "op")) }, false},
		{"a report", nil, func(ctx context.Context) *http.Request { return get(ContextWithReport(ctx, &Report{})) }, false},
		{"a context that ended", nil, func(ctx context.Context) *http.Request {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return get(ctx)
		}, false},
		{"an observer", []Option{WithObserver(func(context.Context, Event) {})}, get, false},
		{"a custom classifier", []Option{WithClassifier(DefaultClassifier)}, get, false},
		{"hedging", []Option{WithHedging(HedgingConfig{})}, get, false},
		{"an attempt timeout", []Option{WithAttemptTimeout(time.Second)}, get, false},
		{"a breaker", []Option{WithRetryControl(RetryTokens{}, CircuitBreaker{})}, get, false},
		{"a rate limit", []Option{WithRetryControl(RetryTokens{}, RateLimit{Rate: 100, Burst: 10})}, get, false},
		{"outer retries always", []Option{WithOuterRetries(true)}, get, false},
		{"outer retries for a host", []Option{WithOuterRetries(true, "other.test")}, get, false},
		{"a budget", []Option{WithRetryControl(RetryBudget{})}, get, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(200))
			tr := NewTransport(s, tt.opts...)
			var (
				resp *http.Response
				err  error
				ok   bool
			)
			req := tt.req(context.Background())
			if tr.plain && plainBody(req) { // roundTrip tries a plain call only then
				resp, err, ok = tr.sendPlain(req, &wire.HeaderScan{})
			}
			require.Equal(t, tt.plain, ok)
			if !ok {
				assert.Nil(t, resp)
				assert.NoError(t, err)
				assert.Empty(t, s.Attempts(), "nothing sent")
				return
			}
			require.NoError(t, err)
			resp.Body.Close()
			assert.Len(t, s.Attempts(), 1)
		})
	}
}

// TestPlainCallNotToAPausedHost: a host paused by a 429 is the loop's: a
// GET then waits the pause, as the loop has it.
func TestPlainCallNotToAPausedHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(429, "Retry-After: 1"), stubtest.Reply(200))
		tr := NewTransport(s)
		resp, err, ok := tr.sendPlain(stubtest.Get(context.Background(), "api.test"), &wire.HeaderScan{})
		require.True(t, ok)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "the loop retried the 429")
		require.NotZero(t, tr.hosts.Host("api.test", tr.cfg.nanos()).Pauses.PauseUntil.Load(), "the host is paused")
		_, _, ok = tr.sendPlain(stubtest.Get(context.Background(), "api.test"), &wire.HeaderScan{})
		assert.False(t, ok)
		assert.Len(t, s.Attempts(), 2, "nothing sent by the refused plain call")
	})
}
