package resilient

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// cacheHolds reports whether the cached host is absent or an entry of the
// table: the invariant remember and sweep keep.
func cacheHolds(tr *Transport) bool {
	h := tr.hosts.last.Load()
	if h == nil {
		return true
	}
	v, ok := tr.hosts.m.Load(h.name)
	return ok && v == h
}

// TestHostCache: each name gets one state whichever way it is found (the
// cache or the table); the cache keeps a host in use and passes to another
// host only once it has been unused for lastReplace; an evicted host leaves
// the cache, and its next request starts afresh.
func TestHostCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
		a := tr.host("a.test", time.Now().UnixNano())
		assert.Same(t, a, tr.hosts.last.Load(), "the first host is cached")
		b := tr.host("b.test", time.Now().UnixNano())
		assert.Same(t, a, tr.hosts.last.Load(), "a host in use keeps the cache")
		for range 3 {
			assert.Same(t, a, tr.host("a.test", time.Now().UnixNano()))
			assert.Same(t, b, tr.host("b.test", time.Now().UnixNano()))
		}
		time.Sleep(time.Duration(lastReplace))
		assert.Same(t, b, tr.host("b.test", time.Now().UnixNano()))
		assert.Same(t, b, tr.hosts.last.Load(), "an unused cached host gives way")
		assert.True(t, cacheHolds(tr))

		time.Sleep(2 * 10 * time.Second) // twice RetryTokens' default Window
		tr.hosts.sweep(time.Now().UnixNano())
		_, ok := tr.hosts.m.Load("b.test")
		assert.False(t, ok, "b was idle for a window")
		assert.Nil(t, tr.hosts.last.Load(), "the evicted host left the cache")
		b2 := tr.host("b.test", time.Now().UnixNano())
		assert.NotSame(t, b, b2, "an evicted host starts afresh")
		assert.True(t, cacheHolds(tr))
	})
}

// TestHostCacheUnderSweeps: goroutines look up hosts while sweeps evict
// them (a window of 1 ms, so every lookup may sweep); the cache never holds
// a state the table has not (go test -race checks the accesses).
func TestHostCacheUnderSweeps(t *testing.T) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...), WithRetryControl(RetryTokens{Window: time.Millisecond}))
	require.Equal(t, int64(time.Millisecond), tr.hosts.idleAfter)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				name := fmt.Sprintf("h%d.test", (g+i)%3)
				h := tr.host(name, time.Now().UnixNano())
				assert.Equal(t, name, h.name)
			}
		}()
	}
	wg.Wait()
	assert.True(t, cacheHolds(tr))
}

// TestClock: the clock's time is time.Now's, read once per call from the
// monotonic clock; it reads the wall clock again after clockRebase, and a
// clock made outside a synctest bubble gives the bubble's time inside it.
func TestClock(t *testing.T) {
	outside := newClock()
	synctest.Test(t, func(t *testing.T) {
		assert.True(t, outside.now().Equal(time.Now()), "a clock from outside the bubble rebases")
		c := newClock()
		base := c.base.Load()
		for _, step := range []time.Duration{0, time.Millisecond, 300 * time.Millisecond, clockRebase / 2} {
			time.Sleep(step)
			assert.True(t, c.now().Equal(time.Now()))
			assert.Equal(t, time.Now().UnixNano(), c.nanos(), "nanos is now's Unix nanoseconds")
		}
		assert.Same(t, base, c.base.Load(), "no wall-clock read within clockRebase")
		time.Sleep(clockRebase)
		now := c.now()
		assert.True(t, now.Equal(time.Now()))
		assert.NotSame(t, base, c.base.Load(), "the wall clock read again")
		later := c.now()
		assert.False(t, later.Before(now))
		assert.Equal(t, outside.nanos(), time.Now().UnixNano(), "nanos rebases as now does")
	})
}

// TestLater: a time plus a server's delay saturates instead of wrapping.
func TestLater(t *testing.T) {
	for _, tt := range []struct {
		name string
		ns   int64
		d    time.Duration
		want int64
	}{
		{"plain", 1_000, 500, 1_500},
		{"zero delay", math.MaxInt64, 0, math.MaxInt64},
		{"negative delay", 1_000, -500, 500},
		{"past the end", time.Now().UnixNano(), math.MaxInt64, math.MaxInt64},
		{"before the start", -1_000, math.MinInt64, math.MinInt64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, later(tt.ns, tt.d))
		})
	}
}

// BenchmarkHost measures finding a host's state: the cached host, a second
// host (the table), and both from parallel goroutines.
func BenchmarkHost(b *testing.B) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
	now := time.Now()
	tr.host("api.test", now.UnixNano())
	tr.host("other.test", now.UnixNano())
	for _, name := range []string{"api.test", "other.test"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.host(name, now.UnixNano())
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tr.host(name, now.UnixNano())
				}
			})
		})
	}
}

// BenchmarkClock compares the Transport's clock with time.Now.
func BenchmarkClock(b *testing.B) {
	c := newClock()
	b.Run("clock", func(b *testing.B) {
		for b.Loop() {
			c.now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			time.Now()
		}
	})
}

// TestHostAndClockDoNotAllocate: finding a host's state (cached or in the
// table) and reading the clock allocate nothing.
func TestHostAndClockDoNotAllocate(t *testing.T) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
	now := time.Now()
	tr.host("api.test", now.UnixNano())
	tr.host("other.test", now.UnixNano())
	c := newClock()
	for name, f := range map[string]func(){
		"cached host": func() { tr.host("api.test", now.UnixNano()) },
		"table host":  func() { tr.host("other.test", now.UnixNano()) },
		"clock":       func() { c.now() },
		"clock nanos": func() { c.nanos() },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, f), name)
	}
}

// TestRateLimitedRequestKeepsItsHost: a host whose rate limiter has a
// request waiting is not evicted by a sweep meanwhile, so that its limiter
// does not start afresh with a full burst for the next request.
func TestRateLimitedRequestKeepsItsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusOK, ""), WithMaxAttempts(1), WithRetryControl(RetryTokens{}, RateLimit{Rate: rate.Every(30 * time.Second), Burst: 1}))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		v, _ := tr.hosts.m.Load("api.test")
		var wg sync.WaitGroup
		wg.Go(func() { // waits 30 s in the limiter
			assert.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		})
		time.Sleep(tr.cfg.idleAfter() + time.Second)
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "other.test"))) // sweeps
		got, ok := tr.hosts.m.Load("api.test")
		require.True(t, ok, "the host in use was evicted")
		assert.Same(t, v, got)
		wg.Wait()
	})
}

// TestRarelyUsedHostGivesUpTheCache: a cached host used rarely gives the
// one-entry cache up to a busier host once it has not been used for
// lastReplace.
func TestRarelyUsedHostGivesUpTheCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusOK, ""))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "rare.test")))
		for i := range 1000 { // 10 s of busy.test at 100 requests a second
			if i%500 == 0 { // rare.test every 5 s
				require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "rare.test")))
			}
			require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "busy.test")))
			time.Sleep(10 * time.Millisecond)
		}
		assert.Equal(t, "busy.test", tr.hosts.last.Load().name)
	})
}

// TestCachedHostRunsADueSweep: a request to the cached host runs the sweep
// when one is due, as a request to any other host does: the idle hosts go,
// the cached one stays, marked used.
func TestCachedHostRunsADueSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
		a := tr.host("a.test", time.Now().UnixNano())
		tr.host("b.test", time.Now().UnixNano())
		require.Same(t, a, tr.hosts.last.Load())
		for range 3 { // no sweep due: both stay
			time.Sleep(time.Duration(tr.hosts.idleAfter) / 4)
			assert.Same(t, a, tr.host("a.test", time.Now().UnixNano()))
			_, ok := tr.hosts.m.Load("b.test")
			assert.True(t, ok)
		}
		time.Sleep(time.Duration(tr.hosts.idleAfter))
		now := time.Now()
		assert.Same(t, a, tr.host("a.test", now.UnixNano()), "the cached host stays")
		_, ok := tr.hosts.m.Load("b.test")
		assert.False(t, ok, "the sweep due ran and evicted the idle host")
		assert.Equal(t, now.UnixNano(), a.lastUsed.Load())
		assert.Greater(t, tr.hosts.nextSweep.Load(), now.UnixNano())
	})
}
