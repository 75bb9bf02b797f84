package resilient

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

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

// Per-host state follows the active hosts: 100,000 hosts touched once, then
// idle for a window, are forgotten at the next request.
func TestIdleHostsAreEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{201})...))
		const n = 100_000
		count := func() int {
			c := 0
			tr.hosts.M.Range(func(any, any) bool { c++; return true })
			return c
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://h%d.test/", i), nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, n, count())
		var full runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&full)
		t.Logf("heap per active host: %d B", (int64(full.HeapInuse)-int64(before.HeapInuse))/n)
		time.Sleep(2 * 10 * time.Second) // twice RetryTokens' default Window
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, count(), "only the host just used remains")
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("heap retained after eviction: %d B for %d hosts", retained, n)
		assert.Less(t, retained, int64(n*100), "well under 100 B per evicted host")
	})
}

// A host with an open breaker or a pending pause is kept, whatever its idle
// time.
func TestHostWithStateIsNotEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{429}, "Retry-After: 30")...), WithMaxAttempts(1), WithRetryAfterMax(time.Minute))
		resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		h, _ := tr.hosts.M.Load("api.test")
		h.(*host.State).Pauses.Pause(time.Now().UnixNano(), time.Hour, true)
		time.Sleep(2 * 10 * time.Second) // twice RetryTokens' default Window
		tr.hosts.Host("other.test", time.Now().UnixNano())
		_, ok := tr.hosts.M.Load("api.test")
		assert.True(t, ok, "a paused host is kept")
	})
}
