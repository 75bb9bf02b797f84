package resilient

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// cacheHolds reports whether the cached host is absent or an entry of the
// table: the invariant remember and sweep keep.
func cacheHolds(tr *Transport) bool {
	h := tr.hosts.Last.Load()
	if h == nil {
		return true
	}
	v, ok := tr.hosts.M.Load(h.Name)
	return ok && v == h
}

// TestHostCache: each name gets one state whichever way it is found (the
// cache or the table); the cache keeps a host in use and passes to another
// host only once it has been unused for lastReplace; an evicted host leaves
// the cache, and its next request starts afresh.
func TestHostCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
		a := tr.hosts.Host("a.test", time.Now().UnixNano())
		assert.Same(t, a, tr.hosts.Last.Load(), "the first host is cached")
		b := tr.hosts.Host("b.test", time.Now().UnixNano())
		assert.Same(t, a, tr.hosts.Last.Load(), "a host in use keeps the cache")
		for range 3 {
			assert.Same(t, a, tr.hosts.Host("a.test", time.Now().UnixNano()))
			assert.Same(t, b, tr.hosts.Host("b.test", time.Now().UnixNano()))
		}
		time.Sleep(time.Duration(host.LastReplace))
		assert.Same(t, b, tr.hosts.Host("b.test", time.Now().UnixNano()))
		assert.Same(t, b, tr.hosts.Last.Load(), "an unused cached host gives way")
		assert.True(t, cacheHolds(tr))

		time.Sleep(2 * 10 * time.Second) // twice RetryTokens' default Window
		tr.hosts.Sweep(time.Now().UnixNano())
		_, ok := tr.hosts.M.Load("b.test")
		assert.False(t, ok, "b was idle for a window")
		assert.Nil(t, tr.hosts.Last.Load(), "the evicted host left the cache")
		b2 := tr.hosts.Host("b.test", time.Now().UnixNano())
		assert.NotSame(t, b, b2, "an evicted host starts afresh")
		assert.True(t, cacheHolds(tr))
	})
}

// TestHostCacheUnderSweeps: goroutines look up hosts while sweeps evict
// them (a window of 1 ms, so every lookup may sweep); the cache never holds
// a state the table has not (go test -race checks the accesses).
func TestHostCacheUnderSweeps(t *testing.T) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...), WithRetryControl(RetryTokens{Window: time.Millisecond}))
	require.Equal(t, int64(time.Millisecond), tr.hosts.IdleAfter)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				name := fmt.Sprintf("h%d.test", (g+i)%3)
				h := tr.hosts.Host(name, time.Now().UnixNano())
				assert.Equal(t, name, h.Name)
			}
		}()
	}
	wg.Wait()
	assert.True(t, cacheHolds(tr))
}

// BenchmarkHost measures finding a host's state: the cached host, a second
// host (the table), and both from parallel goroutines.
func BenchmarkHost(b *testing.B) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
	now := time.Now()
	tr.hosts.Host("api.test", now.UnixNano())
	tr.hosts.Host("other.test", now.UnixNano())
	for _, name := range []string{"api.test", "other.test"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.hosts.Host(name, now.UnixNano())
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tr.hosts.Host(name, now.UnixNano())
				}
			})
		})
	}
}

// TestHostAndClockDoNotAllocate: finding a host's state (cached or in the
// table) and reading the clock allocate nothing.
func TestHostAndClockDoNotAllocate(t *testing.T) {
	tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
	now := time.Now()
	tr.hosts.Host("api.test", now.UnixNano())
	tr.hosts.Host("other.test", now.UnixNano())
	c := clock.New()
	for name, f := range map[string]func(){
		"cached host": func() { tr.hosts.Host("api.test", now.UnixNano()) },
		"table host":  func() { tr.hosts.Host("other.test", now.UnixNano()) },
		"clock":       func() { c.Now() },
		"clock nanos": func() { c.Nanos() },
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
		v, _ := tr.hosts.M.Load("api.test")
		var wg sync.WaitGroup
		wg.Go(func() { // waits 30 s in the limiter
			assert.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		})
		time.Sleep(tr.cfg.idleAfter() + time.Second)
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "other.test"))) // sweeps
		got, ok := tr.hosts.M.Load("api.test")
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
		assert.Equal(t, "busy.test", tr.hosts.Last.Load().Name)
	})
}

// TestCachedHostRunsADueSweep: a request to the cached host runs the sweep
// when one is due, as a request to any other host does: the idle hosts go,
// the cached one stays, marked used.
func TestCachedHostRunsADueSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...))
		a := tr.hosts.Host("a.test", time.Now().UnixNano())
		tr.hosts.Host("b.test", time.Now().UnixNano())
		require.Same(t, a, tr.hosts.Last.Load())
		for range 3 { // no sweep due: both stay
			time.Sleep(time.Duration(tr.hosts.IdleAfter) / 4)
			assert.Same(t, a, tr.hosts.Host("a.test", time.Now().UnixNano()))
			_, ok := tr.hosts.M.Load("b.test")
			assert.True(t, ok)
		}
		time.Sleep(time.Duration(tr.hosts.IdleAfter))
		now := time.Now()
		assert.Same(t, a, tr.hosts.Host("a.test", now.UnixNano()), "the cached host stays")
		_, ok := tr.hosts.M.Load("b.test")
		assert.False(t, ok, "the sweep due ran and evicted the idle host")
		assert.Equal(t, now.UnixNano(), a.LastUsed.Load())
		assert.Greater(t, tr.hosts.NextSweep.Load(), now.UnixNano())
	})
}
