package pushback_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/pushback"
)

// TestRetryClassification checks what counts as a retry: the attempt header
// above 0, else a key seen before; the attempt header wins over the key.
func TestRetryClassification(t *testing.T) {
	tests := []struct {
		name  string
		cfg   pushback.Config
		reqs  [][]string // header pairs of each request, in order
		first uint64
		retry uint64
	}{
		{"attempt 0 is a first attempt", pushback.Config{}, [][]string{{"Retry-Attempt", "0"}}, 1, 0},
		{"attempt 1 is a retry", pushback.Config{}, [][]string{{"Retry-Attempt", "1"}}, 0, 1},
		{"attempt with spaces", pushback.Config{}, [][]string{{"Retry-Attempt", " 3 "}}, 0, 1},
		{"no header, no key", pushback.Config{}, [][]string{{}, {}}, 2, 0},
		{"malformed attempt falls back to the key", pushback.Config{},
			[][]string{{"Retry-Attempt", "x", "Idempotency-Key", "k"}, {"Retry-Attempt", "-1", "Idempotency-Key", "k"}}, 1, 1},
		{"key seen again is a retry", pushback.Config{},
			[][]string{{"Idempotency-Key", "k1"}, {"Idempotency-Key", "k2"}, {"Idempotency-Key", "k1"}}, 2, 1},
		{"attempt header wins over a repeated key", pushback.Config{},
			[][]string{{"Retry-Attempt", "0", "Idempotency-Key", "k"}, {"Retry-Attempt", "0", "Idempotency-Key", "k"}}, 2, 0},
		{"key detection off", pushback.Config{KeyWindow: -1},
			[][]string{{"Idempotency-Key", "k"}, {"Idempotency-Key", "k"}}, 2, 0},
		{"custom header names", pushback.Config{AttemptHeader: "x-attempt", KeyHeader: "x-request-id"},
			[][]string{{"X-Attempt", "2"}, {"X-Request-Id", "a"}, {"X-Request-Id", "a"}, {"Retry-Attempt", "1"}}, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := pushback.New(tt.cfg)
			h := b.Middleware(status(http.StatusOK))
			for _, kv := range tt.reqs {
				serve(h, request(kv...))
			}
			st := b.Stats()
			assert.Equal(t, tt.first, st.FirstAttempts, "first attempts")
			assert.Equal(t, tt.retry, st.Retries, "retries")
		})
	}
}

// TestKeyWindow checks that a key is forgotten after KeyWindow.
func TestKeyWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := pushback.New(pushback.Config{KeyWindow: 5 * time.Second})
		h := b.Middleware(status(http.StatusOK))
		serve(h, request("Idempotency-Key", "k"))
		time.Sleep(4999 * time.Millisecond)
		serve(h, request("Idempotency-Key", "k")) // a retry; seen again now
		time.Sleep(5 * time.Second)
		serve(h, request("Idempotency-Key", "k")) // forgotten
		st := b.Stats()
		assert.Equal(t, uint64(2), st.FirstAttempts)
		assert.Equal(t, uint64(1), st.Retries)
	})
}

// TestPushbackAnswer checks the answer to a refused retry: status,
// Retry-After, X-Should-Retry, a problem body of ProblemType, and that the
// handler never ran.
func TestPushbackAnswer(t *testing.T) {
	tests := []struct {
		name        string
		cfg         pushback.Config
		status      int
		retryAfters []string
	}{
		{"defaults", pushback.Config{}, 503, []string{"1", "2"}},
		{"429", pushback.Config{Status: 429}, 429, []string{"1", "2"}},
		{"seeded", pushback.Config{Seed: 1}, 503, []string{"1", "2"}},
		{"seeded, wider jitter", pushback.Config{Seed: 1, RetryAfter: 2 * time.Second, RetryAfterJitter: 3 * time.Second}, 503, []string{"2", "3", "4", "5"}},
		{"no jitter, rounded up", pushback.Config{RetryAfter: 2500 * time.Millisecond, RetryAfterJitter: -1}, 503, []string{"3"}},
		{"wider jitter", pushback.Config{RetryAfter: 2 * time.Second, RetryAfterJitter: 3 * time.Second}, 503, []string{"2", "3", "4", "5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.MinPerSecond = -1 // no floor: the first retry is over the budget
			b := pushback.New(tt.cfg)
			ran := 0
			h := b.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }))
			seen := map[string]bool{}
			for range 200 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, retry("1"))
				res := rec.Result()
				require.Equal(t, tt.status, res.StatusCode)
				assert.Equal(t, "false", res.Header.Get("X-Should-Retry"))
				assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
				assert.Equal(t, strconv.Itoa(rec.Body.Len()), res.Header.Get("Content-Length"))
				ra := res.Header.Get("Retry-After")
				assert.Contains(t, tt.retryAfters, ra)
				seen[ra] = true
				var p struct {
					Type, Title, Detail string
					Status              int
				}
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
				assert.Equal(t, pushback.ProblemType, p.Type)
				assert.Equal(t, tt.status, p.Status)
				assert.NotEmpty(t, p.Title)
				assert.NotEmpty(t, p.Detail)
			}
			assert.Len(t, seen, len(tt.retryAfters), "every Retry-After of the range is drawn")
			assert.Zero(t, ran, "the handler never runs for a refused retry")
			st := b.Stats()
			assert.Equal(t, uint64(200), st.RetriesShed)
			assert.Zero(t, st.RetriesAdmitted())
		})
	}
}

// TestBudgetRule checks the allowance: Ratio × healthy answers + floor,
// exactly, with only healthy answers counting.
func TestBudgetRule(t *testing.T) {
	tests := []struct {
		name     string
		cfg      pushback.Config
		healthy  int // first attempts answered 200
		failed   int // first attempts answered 503
		throttle int // first attempts answered 429
		admitted uint64
	}{
		{"floor only", pushback.Config{MinPerSecond: 0.5, Window: 10 * time.Second}, 0, 0, 0, 5},
		{"no healthy answer: floor only", pushback.Config{MinPerSecond: 0.5}, 0, 100, 100, 5},
		{"ratio of healthy answers", pushback.Config{Ratio: 0.5, MinPerSecond: -1}, 100, 0, 0, 50},
		{"ratio plus floor", pushback.Config{Ratio: 0.2, MinPerSecond: 1}, 100, 40, 0, 30},
		{"fractional allowance rounds up", pushback.Config{Ratio: 0.25, MinPerSecond: -1}, 10, 0, 0, 3},
		{"no retries at all", pushback.Config{Ratio: -1, MinPerSecond: -1}, 100, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := pushback.New(tt.cfg)
				code := http.StatusOK
				h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
				for range tt.healthy {
					serve(h, first())
				}
				code = http.StatusServiceUnavailable
				for range tt.failed {
					serve(h, first())
				}
				code = http.StatusTooManyRequests
				for range tt.throttle {
					serve(h, first())
				}
				code = http.StatusBadGateway // admitted retries fail: the allowance stays put
				for range 1000 {
					serve(h, retry("1"))
				}
				st := b.Stats()
				assert.Equal(t, tt.admitted, st.RetriesAdmitted())
				assert.Equal(t, uint64(tt.healthy), st.WindowHealthy)
				assert.Equal(t, uint64(tt.healthy), st.Healthy)
			})
		})
	}
}

// TestWindowRolls checks that retries and answers count for Window, one
// bucket expiring at a time.
func TestWindowRolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := pushback.New(pushback.Config{MinPerSecond: 0.3, Window: 10 * time.Second, Buckets: 10})
		h := b.Middleware(status(http.StatusServiceUnavailable))
		admit := func() bool { return !refused(serve(h, retry("1"))) }
		for i := range 3 {
			require.True(t, admit(), "retry %d within the floor", i)
		}
		require.False(t, admit(), "the floor is 3 per window")
		time.Sleep(9999 * time.Millisecond)
		assert.False(t, admit(), "the first bucket still counts at 9.999 s")
		time.Sleep(time.Millisecond)
		assert.Equal(t, uint64(0), b.Stats().WindowRetries, "the first bucket expired at 10 s")
		assert.True(t, admit())
		// Retries spread over the window expire one bucket at a time.
		for range 2 {
			time.Sleep(3 * time.Second)
			require.True(t, admit())
		}
		assert.False(t, admit())
		time.Sleep(4 * time.Second) // 20 s: the retry of 10 s expired
		assert.True(t, admit())
		assert.False(t, admit())
	})
}

// TestHintWhenExhausted checks behaviour (b): while the budget is
// exhausted, the handler's failure answers carry pushback, its successes do
// not; before, nothing is added.
func TestHintWhenExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Floor 3 per window, no ratio: three failures may go out without
		// pushback (each may bring a retry), the next ones carry it.
		b := pushback.New(pushback.Config{Ratio: -1, MinPerSecond: 0.3})
		code := http.StatusInternalServerError
		h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(code)
			_, _ = w.Write([]byte("handler's own body"))
		}))
		for i := range 3 {
			w := serve(h, first())
			require.Equal(t, 500, w.status)
			require.Empty(t, w.h.Get("X-Should-Retry"), "failure %d invites a retry", i)
		}
		for _, c := range []int{500, 503, 429} {
			code = c
			w := serve(h, first())
			assert.Equal(t, c, w.status, "the handler's status is kept")
			assert.Equal(t, "text/plain", w.h.Get("Content-Type"), "and its body")
			assert.Equal(t, "false", w.h.Get("X-Should-Retry"))
			assert.Contains(t, []string{"1", "2"}, w.h.Get("Retry-After"))
		}
		code = http.StatusCreated
		w := serve(h, first())
		assert.Empty(t, w.h.Get("X-Should-Retry"), "a success carries no pushback")
		assert.Empty(t, w.h.Get("Retry-After"))

		st := b.Stats()
		assert.Equal(t, uint64(3), st.Hinted)
		assert.Equal(t, uint64(6), st.Failures)
		assert.Equal(t, uint64(3), st.WindowInvited)
		time.Sleep(10 * time.Second)
		code = http.StatusInternalServerError
		assert.Empty(t, serve(h, first()).h.Get("X-Should-Retry"), "the window rolled")
	})
}

// TestHintKeepsHandlersRetryAfter checks that a Retry-After set by the
// handler is not replaced.
func TestHintKeepsHandlersRetryAfter(t *testing.T) {
	b := pushback.New(pushback.Config{Ratio: -1, MinPerSecond: -1})
	h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	w := serve(h, first())
	assert.Equal(t, "30", w.h.Get("Retry-After"))
	assert.Equal(t, "false", w.h.Get("X-Should-Retry"))
}

// TestRetriesShedFirst checks MaxInFlight: retries are shed once
// RetryInFlightShare of it is in service, first attempts only at it.
func TestRetriesShedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := pushback.New(pushback.Config{MaxInFlight: 4, RetryInFlightShare: 0.5, MinPerSecond: 100})
		release := make(chan struct{})
		h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
		}))
		var wg sync.WaitGroup
		hold := func(r *http.Request) {
			wg.Go(func() { serve(h, r) })
			synctest.Wait()
		}
		hold(first())
		hold(retry("1")) // 1 in service: below 2, the retry gets in
		assert.Equal(t, int64(2), b.Stats().InFlight)

		w := serve(h, retry("1"))
		assert.Equal(t, http.StatusServiceUnavailable, w.status, "a retry is shed at 2 of 4")
		assert.Equal(t, "false", w.h.Get("X-Should-Retry"))
		hold(first())
		hold(first())
		assert.Equal(t, int64(4), b.Stats().InFlight, "first attempts get in up to 4")
		w = serve(h, first())
		assert.Equal(t, http.StatusServiceUnavailable, w.status, "a first attempt is shed at 4")
		assert.Equal(t, "false", w.h.Get("X-Should-Retry"))

		st := b.Stats()
		assert.Equal(t, uint64(1), st.RetriesShed)
		assert.Equal(t, uint64(1), st.FirstAttemptsShed)
		close(release)
		wg.Wait()
		assert.Equal(t, int64(0), b.Stats().InFlight)
		assert.False(t, refused(serve(h, retry("1"))), "retries get in again")
	})
}

// TestOverloadHintsFailures checks that the handler's failures carry
// pushback while retries are being shed for MaxInFlight.
func TestOverloadHintsFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := pushback.New(pushback.Config{MaxInFlight: 2, RetryInFlightShare: 0.5, MinPerSecond: 100})
		release := make(chan struct{})
		h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Block") != "" {
				<-release
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		assert.Empty(t, serve(h, first()).h.Get("X-Should-Retry"), "alone: no pushback")
		var wg sync.WaitGroup
		wg.Go(func() { serve(h, request("Retry-Attempt", "0", "Block", "1")) })
		synctest.Wait()
		assert.Equal(t, "false", serve(h, first()).h.Get("X-Should-Retry"), "one in service: retries are shed, failures say so")
		close(release)
		wg.Wait()
	})
}

// TestPanicCountsAsInvitation checks that a handler that drops the
// connection counts as a failure without pushback.
func TestPanicCountsAsInvitation(t *testing.T) {
	b := pushback.New(pushback.Config{})
	h := b.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	assert.PanicsWithValue(t, http.ErrAbortHandler, func() { serve(h, first()) })
	st := b.Stats()
	assert.Equal(t, uint64(1), st.Failures)
	assert.Equal(t, uint64(1), st.WindowInvited)
	assert.Zero(t, st.InFlight)
}

// TestImplicitStatus checks the status of handlers that write no header.
func TestImplicitStatus(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}},
		{"body only", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }},
		{"flush first", func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
			w.WriteHeader(http.StatusInternalServerError) // too late: 200 went out
		}},
		{"1xx then 200", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusOK)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := pushback.New(pushback.Config{})
			b.Middleware(tt.h).ServeHTTP(httptest.NewRecorder(), first())
			assert.Equal(t, uint64(1), b.Stats().Healthy)
		})
	}
}

// TestResponseController checks that http.ResponseController reaches the
// server's ResponseWriter through the middleware's (Unwrap).
func TestResponseController(t *testing.T) {
	b := pushback.New(pushback.Config{})
	errs := make(chan error, 3)
	srv := httptest.NewServer(b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
		_, _ = w.Write([]byte("a"))
		errs <- rc.Flush()
		errs <- rc.EnableFullDuplex()
	})))
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	for range 3 {
		assert.NoError(t, <-errs)
	}
	assert.Equal(t, uint64(1), b.Stats().Healthy)
}

// TestHijackIsNoAnswer: a handler that takes the connection over, directly
// or through http.ResponseController, counts neither as healthy nor as a
// failure.
func TestHijackIsNoAnswer(t *testing.T) {
	for _, viaController := range []bool{false, true} {
		b := pushback.New(pushback.Config{})
		srv := httptest.NewServer(b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			var conn net.Conn
			var err error
			if viaController {
				conn, _, err = http.NewResponseController(w).Hijack()
			} else {
				conn, _, err = w.(http.Hijacker).Hijack()
			}
			if err == nil {
				_, _ = conn.Write([]byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"))
				conn.Close()
			}
		})))
		res, err := srv.Client().Get(srv.URL)
		require.NoError(t, err)
		res.Body.Close()
		srv.Close()
		st := b.Stats()
		assert.Equal(t, 204, res.StatusCode)
		assert.Zero(t, st.Healthy, "controller %v", viaController)
		assert.Zero(t, st.Failures, "controller %v", viaController)
	}
}

// TestConfigPanics checks that New rejects invalid configurations.
func TestConfigPanics(t *testing.T) {
	for _, c := range []pushback.Config{
		{Status: 500}, {Window: -time.Second}, {Buckets: -1}, {MaxInFlight: -1}, {RetryInFlightShare: -0.5},
	} {
		assert.Panics(t, func() { pushback.New(c) }, "%+v", c)
	}
}
