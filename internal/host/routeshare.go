package host

import (
	"sync"
	"sync/atomic"
)

// A host's retry tokens are shared by its routes (a method and the first
// two segments of the path, as routeOf has it). Without more, a dead route
// — one endpoint failing every request while the others work — would spend
// the tokens that its neighbours' healthy answers earn, and starve their
// retries. So each route also keeps a share: a count of the tokens it took
// and has not earned back with healthy answers of its own. A retry takes a
// token from its route's share and from the host's bucket; the share holds
// at most what the host's bucket holds. A route can thus take the host's
// whole bucket once, and after that only what its own healthy answers
// earn back: a dead route stops retrying, and the live ones keep the
// tokens they earn.
//
// On a host with one route the share sees what the host's bucket sees (the
// same takes, earnings and refunds, with the same capacity), so it refuses
// nothing the bucket would not: the outage bound and the do-no-harm
// sweep are the bucket's. A route beyond the first maxRouteShares of a
// host has no share: the host's bucket alone governs it.

// maxRouteShares bounds the routes of a host that keep a share.
const maxRouteShares = 64

// routeShares are the shares of a host's routes. owing counts the routes
// whose share is not full: while none is, a healthy answer earns nothing
// for its route and looks nothing up.
type routeShares struct {
	owing atomic.Int32
	n     atomic.Int32 // entries in m
	m     sync.Map     // route → *routeShare
}

// routeShare is a route's count of tokens taken and not earned back, in
// millitokens (see RetryTokens.deficit), ≥ 0.
type routeShare struct {
	deficit atomic.Int64
}

// take takes a token from r's share if the share holds one when its route
// may hold capacity millitokens. It returns the share to give the token
// back to (nil for a route without a share, which is never refused).
func (rs *routeShares) take(r Route, capacity int64) (*routeShare, bool) {
	s := rs.get(r)
	if s == nil {
		return nil, true
	}
	for {
		d := s.deficit.Load()
		if d+TokenUnit > capacity {
			return nil, false
		}
		if s.deficit.CompareAndSwap(d, d+TokenUnit) {
			if d == 0 {
				rs.owing.Add(1)
			}
			return s, true
		}
	}
}

// get returns r's share, creating it unless the host has maxRouteShares.
func (rs *routeShares) get(r Route) *routeShare {
	if v, ok := rs.m.Load(r); ok {
		return v.(*routeShare)
	}
	if rs.n.Load() >= maxRouteShares {
		return nil
	}
	v, loaded := rs.m.LoadOrStore(r, &routeShare{})
	if !loaded {
		rs.n.Add(1)
	}
	return v.(*routeShare)
}

// earn gives n millitokens back to r's share, for a healthy answer on r.
func (rs *routeShares) earn(r Route, n int64) {
	if rs.owing.Load() == 0 {
		return
	}
	if v, ok := rs.m.Load(r); ok {
		rs.give(v.(*routeShare), n)
	}
}

// give gives n millitokens back to s, up to a full share.
func (rs *routeShares) give(s *routeShare, n int64) {
	for {
		d := s.deficit.Load()
		if d == 0 {
			return
		}
		nd := max(d-n, 0)
		if s.deficit.CompareAndSwap(d, nd) {
			if nd == 0 {
				rs.owing.Add(-1)
			}
			return
		}
	}
}
