package resilient

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// countClock makes tr count its clock reads (cfg.now and cfg.since) in
// reads.
func countClock(tr *Transport, reads *atomic.Int64) {
	now, since := tr.cfg.now, tr.cfg.since
	tr.cfg.now = func() time.Time { reads.Add(1); return now() }
	tr.cfg.since = func(t time.Time) time.Duration { reads.Add(1); return since(t) }
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

// makeBusy records enough first attempts in the host's retry tokens for it
// to be busy (busyFirsts per tenth of the window), as if they had just been
// sent, so that one operation in latencySample is timed from then on.
func makeBusy(t *testing.T, tr *Transport, host string) {
	t.Helper()
	v, ok := tr.hosts.m.Load(host)
	require.True(t, ok, "no state for %s yet", host)
	h := v.(*hostState)
	h.tokens.firstN(tr.cfg.now(), busyFirsts*budgetBuckets)
	h.busy.Store(true)
}

func newGet(ctx context.Context, host string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v1/items", nil)
	return req
}

// TestUnclockedFirstAttempts: with the defaults, an operation to the
// cached host of a busy host (unkeyed, or with a key the Transport mints)
// reads no clock before its first attempt is sent, unless it is the one in
// latencySample that feeds the latency average (two reads: the start and
// the end); an answer that is not a plain success reads the clock once,
// for its end time. Every operation to a host that is not busy is timed.
// The application's own key, a Report, an Observer or a Budget read the
// clock as before.
func TestUnclockedFirstAttempts(t *testing.T) {
	ok := RoundTripFunc(func(req *http.Request) (*http.Response, error) { // shows no dedupe
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"GET", func() *http.Request { return newGet(context.Background(), "api.test") }},
		{"keyed POST", func() *http.Request { return newPost(context.Background(), strings.NewReader(`{}`)) }},
	} {
		t.Run(tc.name+": one in eight reads the clock", func(t *testing.T) {
			var reads atomic.Int64
			tr := NewTransport(ok)
			countClock(tr, &reads)
			var got []int64
			for i := range 2*latencySample + 1 {
				reads.Store(0)
				require.Equal(t, 200, roundTrip(t, tr, tc.req()))
				got = append(got, reads.Load())
				if i == 0 {
					makeBusy(t, tr, "api.test")
				}
			}
			// The host's first operation finds no cached host: one read
			// to look it up (its start), one for its end (it is timed).
			want := []int64{2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2}
			assert.Equal(t, want, got)
		})
	}
	t.Run("a host that is not busy is timed", func(t *testing.T) {
		var reads atomic.Int64
		tr := NewTransport(&scripted{codes: []int{200}})
		countClock(tr, &reads)
		for i := range 2 * latencySample {
			reads.Store(0)
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
			assert.Equal(t, int64(2), reads.Load(), "operation %d", i+1)
		}
	})
	t.Run("a failure reads its end", func(t *testing.T) {
		var reads atomic.Int64
		tr := NewTransport(&scripted{codes: []int{200, 503}}, WithMaxAttempts(1))
		countClock(tr, &reads)
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		makeBusy(t, tr, "api.test")
		reads.Store(0)
		require.Equal(t, 503, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		assert.Equal(t, int64(1), reads.Load())
	})
	for _, tc := range []struct {
		name string
		opts []Option
		req  func() *http.Request
	}{
		{"application's key", nil, func() *http.Request {
			return newPost(ContextWithKey(context.Background(), "order-1"), strings.NewReader(`{}`))
		}},
		{"report", nil, func() *http.Request {
			return newGet(ContextWithReport(context.Background(), &Report{}), "api.test")
		}},
		{"observer", []Option{WithObserver(func(context.Context, Event) {})}, func() *http.Request { return newGet(context.Background(), "api.test") }},
		{"budget", []Option{WithBudgetConfig(BudgetConfig{})}, func() *http.Request { return newGet(context.Background(), "api.test") }},
		{"retry tokens off", []Option{WithoutRetryTokens()}, func() *http.Request { return newGet(context.Background(), "api.test") }},
	} {
		t.Run(tc.name+" reads the clock", func(t *testing.T) {
			var reads, beforeSend atomic.Int64
			base := &scripted{codes: []int{200}}
			tr := NewTransport(RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				beforeSend.Store(reads.Load())
				return base.RoundTrip(req)
			}), tc.opts...)
			countClock(tr, &reads)
			require.Equal(t, 200, roundTrip(t, tr, tc.req()))
			if v, _ := tr.hosts.m.Load("api.test"); v.(*hostState).tokens != nil {
				makeBusy(t, tr, "api.test") // else unclocked operations would read no clock
			}
			for i := range latencySample {
				reads.Store(0)
				require.Equal(t, 200, roundTrip(t, tr, tc.req()))
				assert.Positive(t, beforeSend.Load(), "operation %d: no clock read before its first attempt", i+1)
			}
		})
	}
}

// TestUnclockedFirstAttemptWaitsForAPause: a 429 with Retry-After holds
// back the first attempts that follow it, unclocked ones included, when
// the wait fits their deadline.
func TestUnclockedFirstAttemptWaitsForAPause(t *testing.T) {
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
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		require.Equal(t, 429, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		assert.Equal(t, []time.Duration{0, 0, 3 * time.Second}, sent)
	})
}

// TestUnclockedFirstAttemptsSizeTheTokens: the operations that read no
// clock still size the host's retry tokens. Until the host is busy every
// operation is recorded as it is sent; then each timed one records the
// first attempts since the previous one, its own included, so the count
// lags by at most latencySample-1. A host whose traffic falls below busy
// is timed again, operation by operation.
func TestUnclockedFirstAttemptsSizeTheTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(&scripted{codes: []int{200}})
		h := func() *hostState { v, _ := tr.hosts.m.Load("api.test"); return v.(*hostState) }
		counted := func() int64 { return h().tokens.firstsAt(tr.cfg.now()) }
		const busyAt = busyFirsts * budgetBuckets
		for i := 1; i <= busyAt+3*latencySample; i++ {
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
			switch {
			case i < busyAt:
				require.Equal(t, int64(i), counted(), "after %d operations", i)
				require.False(t, h().busy.Load(), "busy after %d operations", i)
			case i == busyAt:
				require.Equal(t, int64(i), counted())
				require.True(t, h().busy.Load(), "not busy after %d operations", i)
			default:
				want := int64(i - (i-1)%latencySample) // recorded by the last k ≡ 1 (mod 8)
				require.Equal(t, want, counted(), "after %d operations", i)
			}
		}
		// A window later, the next timed operation finds the host quiet.
		time.Sleep(tr.cfg.tokens.window() + time.Second)
		for range latencySample {
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		}
		assert.False(t, h().busy.Load())
		before := counted()
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		assert.Equal(t, before+1, counted(), "a quiet host's operation is recorded as it is sent")
	})
}

// TestUnclockedHostIsNotEvicted: a host that only unclocked requests use
// (they mark it used without a time) survives the sweeps while it is used,
// and is evicted once it has been idle for the window.
func TestUnclockedHostIsNotEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(&scripted{codes: []int{200}})
		idle := tr.cfg.idleAfter()
		has := func() bool { _, ok := tr.hosts.m.Load("api.test"); return ok }
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test"))) // timed: clocked
		makeBusy(t, tr, "api.test")
		// Operations 2–8 read no clock, spread over three windows; a
		// request to another host (clocked) runs a sweep in each.
		for range latencySample - 1 {
			time.Sleep(idle/2 + time.Millisecond)
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
			time.Sleep(idle/2 + time.Millisecond)
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "other.test")))
			require.True(t, has(), "a host in use was evicted")
		}
		// Idle: a sweep after the window evicts it (at most one window
		// after the last use the sweep saw, which it stamped).
		for range 3 {
			time.Sleep(idle + time.Millisecond)
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "other.test")))
		}
		assert.False(t, has(), "an idle host was kept")
	})
}

// TestUnclockedSuccessIsCounted: a first attempt that ends an unclocked
// operation early (a plain success) still earns the host's retry tokens
// back and counts as a success in its breaker.
func TestUnclockedSuccessIsCounted(t *testing.T) {
	// In a bubble: the breaker's rolling window moves only with its
	// virtual time, so its counts cannot age out between the two reads.
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(&scripted{codes: []int{200}}, WithBreaker(BreakerSettings{}))
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		v, _ := tr.hosts.m.Load("api.test")
		h := v.(*hostState)
		h.tokens.deficit.Store(3 * tokenUnit)
		before := h.breaker.Counts()
		for range 4 {
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		}
		assert.Equal(t, int64(tokenUnit), h.tokens.deficit.Load(), "four successes earn 4 × 0.5 tokens")
		after := h.breaker.Counts()
		assert.Equal(t, before.TotalSuccesses+4, after.TotalSuccesses)
		assert.Equal(t, before.Requests+4, after.Requests)
	})
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

// TestUnclockedRequestsSweep: the idle hosts are swept when a request that
// read no clock for its host makes its first read later, here because a
// server's pause (a 429's Retry-After) makes it read the time.
func TestUnclockedRequestsSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusTooManyRequests, "12"), WithMaxAttempts(1))
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))   // cached
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "other.test"))) // not cached
		v, _ := tr.hosts.m.Load("api.test")
		require.Same(t, v.(*hostState), tr.hosts.last.Load(), "api.test is the cached host")
		makeBusy(t, tr, "api.test")
		pause, _ := http.NewRequest(http.MethodGet, "http://api.test/pause", nil)
		require.Equal(t, 429, roundTrip(t, tr, pause))
		// Neither is timed. The first waits out the pause (12 s); the
		// second finds the ended pause, reads the clock for it, and the
		// sweep that is due (other.test has been idle for over 10 s)
		// runs then.
		for range 2 {
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		}
		_, ok := tr.hosts.m.Load("other.test")
		assert.False(t, ok, "an idle host was kept")
		_, ok = tr.hosts.m.Load("api.test")
		assert.True(t, ok, "the host in use was evicted")
	})
}

// TestUnclockedRequestKeepsItsHost: a request that read no clock for its
// host and waited in the rate limiter past a sweep marks its host used
// before the sweep its own clock read runs, so that the sweep keeps it
// (and its limiter, which would otherwise start afresh with a full burst).
func TestUnclockedRequestKeepsItsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusOK, ""), WithMaxAttempts(1), WithRateLimit(rate.Every(30*time.Second), 1))
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		makeBusy(t, tr, "api.test")
		v, _ := tr.hosts.m.Load("api.test")
		var wg sync.WaitGroup
		wg.Go(func() { // waits 30 s in the limiter
			assert.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		})
		time.Sleep(tr.cfg.idleAfter() + time.Second)
		// A clocked request sweeps: api.test was touched, so it is kept,
		// its use taken as now.
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "other.test")))
		wg.Wait() // at 30 s: the next sweep is due when the request reads the clock
		got, ok := tr.hosts.m.Load("api.test")
		require.True(t, ok, "the host in use was evicted")
		assert.Same(t, v, got)
	})
}

// TestUnclockedHostKeepsTheCacheOnlyWhileUsed: a cached host that unclocked
// requests use rarely gives the one-entry cache up to a busier host once it
// has not been used for lastReplace, its use counted from when it is seen.
func TestUnclockedHostKeepsTheCacheOnlyWhileUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusOK, ""))
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "rare.test")))
		makeBusy(t, tr, "rare.test")
		for i := range 1000 { // 10 s of busy.test at 100 requests a second
			if i%500 == 0 { // rare.test every 5 s
				require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "rare.test")))
			}
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "busy.test")))
			time.Sleep(10 * time.Millisecond)
		}
		assert.Equal(t, "busy.test", tr.hosts.last.Load().name)
	})
}

// TestClearPauses: an ended pause is cleared, a pending one is kept.
func TestClearPauses(t *testing.T) {
	var h hostState
	h.pauseUntil.Store(100)
	h.retryPauseUntil.Store(200)
	h.clearPauses(150)
	assert.Zero(t, h.pauseUntil.Load())
	assert.Equal(t, int64(200), h.retryPauseUntil.Load())
	h.clearPauses(200)
	assert.Zero(t, h.retryPauseUntil.Load())
}

// TestExpiredPauseIsCleared: once a server's pause has ended, the next
// request clears it, and unclocked requests read no clock for it again.
func TestExpiredPauseIsCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		tr := NewTransport(pausing(http.StatusTooManyRequests, "2"), WithMaxAttempts(1))
		countClock(tr, &reads)
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		makeBusy(t, tr, "api.test")
		pause, _ := http.NewRequest(http.MethodGet, "http://api.test/pause", nil)
		require.Equal(t, 429, roundTrip(t, tr, pause))
		v, _ := tr.hosts.m.Load("api.test")
		h := v.(*hostState)
		require.NotZero(t, h.pauseUntil.Load())
		time.Sleep(3 * time.Second)
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		assert.Zero(t, h.pauseUntil.Load(), "the ended pause is cleared")
		reads.Store(0)
		for range latencySample - 4 { // operations 4 to 7: not timed
			require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		}
		assert.Zero(t, reads.Load())
	})
}

// TestUnclockedSuccessNotesEvidenceWithItsTime: a keyed answer that shows
// the server dedupes, to an operation that read no clock, is noted as
// evidence at the time it came, not at the zero time (already expired).
func TestUnclockedSuccessNotesEvidenceWithItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		tr := NewTransport(&scripted{codes: []int{200}}) // echoes the key
		countClock(tr, &reads)
		// The host's first operation is timed; once the host is busy, the
		// next one (the second counted) is not.
		require.Equal(t, 200, roundTrip(t, tr, newGet(context.Background(), "api.test")))
		makeBusy(t, tr, "api.test")
		reads.Store(0)
		req := newPost(context.Background(), strings.NewReader(`{}`))
		require.Equal(t, 200, roundTrip(t, tr, req))
		assert.Equal(t, int64(1), reads.Load(), "one read: the evidence's time")
		v, _ := tr.hosts.m.Load("api.test")
		assert.True(t, v.(*hostState).evidence.has(routeOf(req), time.Now()), "evidence noted now")
	})
}
