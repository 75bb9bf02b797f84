package host

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// newTable returns a table of hosts as a Transport with the default options
// but retry tokens tc makes it (NewTransport, config.hostConfig): no budget,
// no breaker, no rate limit; hosts idle for the tokens' window are swept,
// the first sweep due a window from now.
func newTable(tc retrycontrol.TokensConfig) *Table {
	hs := &Table{Cfg: &Config{Clock: clock.New(), Tokens: &tc, RateLimit: rate.Inf}, IdleAfter: int64(tc.Span())}
	hs.NextSweep.Store(hs.Cfg.Clock.Nanos() + hs.IdleAfter)
	return hs
}

// cacheHolds reports whether the cached host is absent or an entry of the
// table: the invariant remember and sweep keep.
func cacheHolds(hs *Table) bool {
	h := hs.Last.Load()
	if h == nil {
		return true
	}
	v, ok := hs.M.Load(h.Name)
	return ok && v == h
}

// TestHostCache: each name gets one state whichever way it is found (the
// cache or the table); the cache keeps a host in use and passes to another
// host only once it has been unused for lastReplace; an evicted host leaves
// the cache, and its next request starts afresh.
func TestHostCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := newTable(retrycontrol.TokensConfig{})
		a := hs.Host("a.test", time.Now().UnixNano())
		assert.Same(t, a, hs.Last.Load(), "the first host is cached")
		b := hs.Host("b.test", time.Now().UnixNano())
		assert.Same(t, a, hs.Last.Load(), "a host in use keeps the cache")
		for range 3 {
			assert.Same(t, a, hs.Host("a.test", time.Now().UnixNano()))
			assert.Same(t, b, hs.Host("b.test", time.Now().UnixNano()))
		}
		time.Sleep(time.Duration(lastReplace))
		assert.Same(t, b, hs.Host("b.test", time.Now().UnixNano()))
		assert.Same(t, b, hs.Last.Load(), "an unused cached host gives way")
		assert.True(t, cacheHolds(hs))

		time.Sleep(2 * 10 * time.Second) // twice RetryTokens' default Window
		hs.sweep(time.Now().UnixNano())
		_, ok := hs.M.Load("b.test")
		assert.False(t, ok, "b was idle for a window")
		assert.Nil(t, hs.Last.Load(), "the evicted host left the cache")
		b2 := hs.Host("b.test", time.Now().UnixNano())
		assert.NotSame(t, b, b2, "an evicted host starts afresh")
		assert.True(t, cacheHolds(hs))
	})
}

// TestHostCacheUnderSweeps: goroutines look up hosts while sweeps evict
// them (a window of 1 ms, so every lookup may sweep); the cache never holds
// a state the table has not (go test -race checks the accesses).
func TestHostCacheUnderSweeps(t *testing.T) {
	hs := newTable(retrycontrol.TokensConfig{Window: time.Millisecond})
	require.Equal(t, int64(time.Millisecond), hs.IdleAfter)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				name := fmt.Sprintf("h%d.test", (g+i)%3)
				h := hs.Host(name, time.Now().UnixNano())
				assert.Equal(t, name, h.Name)
			}
		}()
	}
	wg.Wait()
	assert.True(t, cacheHolds(hs))
}

// BenchmarkHost measures finding a host's state: the cached host, a second
// host (the table), and both from parallel goroutines.
func BenchmarkHost(b *testing.B) {
	hs := newTable(retrycontrol.TokensConfig{})
	now := time.Now()
	hs.Host("api.test", now.UnixNano())
	hs.Host("other.test", now.UnixNano())
	for _, name := range []string{"api.test", "other.test"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hs.Host(name, now.UnixNano())
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					hs.Host(name, now.UnixNano())
				}
			})
		})
	}
}

// TestHostAndClockDoNotAllocate: finding a host's state (cached or in the
// table) and reading the clock allocate nothing.
func TestHostAndClockDoNotAllocate(t *testing.T) {
	hs := newTable(retrycontrol.TokensConfig{})
	now := time.Now()
	hs.Host("api.test", now.UnixNano())
	hs.Host("other.test", now.UnixNano())
	c := clock.New()
	for name, f := range map[string]func(){
		"cached host": func() { hs.Host("api.test", now.UnixNano()) },
		"table host":  func() { hs.Host("other.test", now.UnixNano()) },
		"clock":       func() { c.Now() },
		"clock nanos": func() { c.Nanos() },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, f), name)
	}
}

// TestCachedHostRunsADueSweep: a request to the cached host runs the sweep
// when one is due, as a request to any other host does: the idle hosts go,
// the cached one stays, marked used.
func TestCachedHostRunsADueSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := newTable(retrycontrol.TokensConfig{})
		a := hs.Host("a.test", time.Now().UnixNano())
		hs.Host("b.test", time.Now().UnixNano())
		require.Same(t, a, hs.Last.Load())
		for range 3 { // no sweep due: both stay
			time.Sleep(time.Duration(hs.IdleAfter) / 4)
			assert.Same(t, a, hs.Host("a.test", time.Now().UnixNano()))
			_, ok := hs.M.Load("b.test")
			assert.True(t, ok)
		}
		time.Sleep(time.Duration(hs.IdleAfter))
		now := time.Now()
		assert.Same(t, a, hs.Host("a.test", now.UnixNano()), "the cached host stays")
		_, ok := hs.M.Load("b.test")
		assert.False(t, ok, "the sweep due ran and evicted the idle host")
		assert.Equal(t, now.UnixNano(), a.lastUsed.Load())
		assert.Greater(t, hs.NextSweep.Load(), now.UnixNano())
	})
}
