package host

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRouteShareOfTheOnlyRouteIsTheBucket: a host's only route takes,
// earns and gives back what the host's bucket does, so its share refuses
// nothing the bucket would not.
func TestRouteShareOfTheOnlyRouteIsTheBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rt := NewRetryTokens(retrycontrol.TokensConfig{})
	var rs routeShares
	r := Route{method: "POST", prefix: "/v1/charges"}
	now := time.Now()
	for i := range 10000 {
		switch rng.IntN(4) {
		case 0:
			rt.FirstAt(now)
		case 1: // a retry, as spend takes it
			s, ok := rs.take(r, rt.Capacity(now.UnixNano()))
			took := rt.TakeAt(now)
			require.Equal(t, took, ok, "step %d: the share decides as the bucket", i)
			if ok && rng.IntN(4) == 0 { // not sent: cancel
				rt.Refund()
				rs.give(s, TokenUnit)
			}
		default: // a healthy answer
			rt.Earn()
			rs.earn(r, rt.Params().Refill)
		}
		s := rs.get(r)
		require.Equal(t, rt.Deficit(), s.deficit.Load(), "step %d", i)
		require.Equal(t, s.deficit.Load() != 0, rs.owing.Load() == 1, "step %d: owing", i)
	}
}

// TestRouteSharesAreBounded: a host keeps at most maxRouteShares shares;
// a route beyond them is governed by the host's bucket alone.
func TestRouteSharesAreBounded(t *testing.T) {
	var rs routeShares
	for i := range maxRouteShares + 10 {
		s, ok := rs.take(Route{method: "POST", prefix: "/v1/r" + strconv.Itoa(i)}, TokenUnit)
		assert.True(t, ok)
		assert.Equal(t, i < maxRouteShares, s != nil, "route %d", i)
	}
	assert.EqualValues(t, maxRouteShares, rs.n.Load())
	_, ok := rs.take(Route{method: "POST", prefix: "/v1/r0"}, TokenUnit)
	assert.False(t, ok, "a share that took the whole capacity takes no more")
	rs.earn(Route{method: "POST", prefix: "/v1/r0"}, TokenUnit)
	_, ok = rs.take(Route{method: "POST", prefix: "/v1/r0"}, TokenUnit)
	assert.True(t, ok, "its own healthy answer earned it back")
}
