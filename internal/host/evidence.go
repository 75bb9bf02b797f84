package host

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
)

// dedupeEvidenceTTL is how long a server's showing that it dedupes a route
// is trusted: long enough to cover every retry of an operation, short
// enough that a deployment that stops honouring keys is noticed.
const dedupeEvidenceTTL = time.Hour

// maxEvidenceRoutes bounds the routes remembered per host.
const maxEvidenceRoutes = 256

// Evidence remembers the routes of a host whose server showed it dedupes
// by key. Touched only when a response shows it and when an unsafe retry is
// considered. A server that dedupes shows it on every keyed answer: the
// route noted last is also kept in fresh, so that noting it again while its
// evidence is fresh, the common case, takes no lock.
type Evidence struct {
	fresh  atomic.Pointer[notedRoute] // the route last written to routes
	mu     sync.Mutex
	routes map[Route]int64 // → expiry, Unix ns
}

// notedRoute is a route and the expiry it was noted with (Unix ns).
type notedRoute struct {
	r   Route
	exp int64
}

// Route is the scope of evidence: the method and the first two segments of
// the path ("POST", "/v1/charges" for /v1/charges/ch_1/refunds). Both are
// substrings of the request's, so building one does not allocate.
type Route struct{ method, prefix string }

// Note records at now that route r's server showed it dedupes by key, for
// an hour (dedupeEvidenceTTL).
func (ev *Evidence) Note(r Route, now int64) {
	if ev.recent(r, now) {
		return // fresh enough, and known without the lock
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if exp, ok := ev.routes[r]; ok && exp-now > int64(dedupeEvidenceTTL/2) {
		return // fresh enough
	}
	if ev.routes == nil {
		ev.routes = make(map[Route]int64)
	}
	if len(ev.routes) >= maxEvidenceRoutes {
		for k, exp := range ev.routes {
			if exp <= now {
				delete(ev.routes, k)
			}
		}
		if len(ev.routes) >= maxEvidenceRoutes {
			return // keep what is known; an unknown route is simply not trusted
		}
	}
	exp := clock.Later(now, dedupeEvidenceTTL)
	ev.routes[r] = exp
	ev.fresh.Store(&notedRoute{r, exp})
}

// Has reports whether route r's server showed at now, within the last
// hour, that it dedupes by key.
func (ev *Evidence) Has(r Route, now int64) bool {
	if f := ev.fresh.Load(); f != nil && f.r == r && f.exp > now {
		return true
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	exp, ok := ev.routes[r]
	return ok && exp > now
}

// recent reports whether r is the route noted last, with evidence fresh
// enough at now that noting it again does nothing (note).
func (ev *Evidence) recent(r Route, now int64) bool {
	f := ev.fresh.Load()
	return f != nil && f.r == r && f.exp-now > int64(dedupeEvidenceTTL/2)
}

// Renews reports whether noting req's route at now could change ev: false
// when note would do nothing (recent). Then an answer need not be looked
// at for evidence. No route is built while nothing was noted.
func (ev *Evidence) Renews(req *http.Request, now int64) bool {
	return ev.fresh.Load() == nil || !ev.recent(RouteOf(req), now)
}

// RouteOf returns req's route.
func RouteOf(req *http.Request) Route {
	p := req.URL.Path
	end := len(p)
	seg := 0
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			if seg++; seg == 2 {
				end = i
				break
			}
		}
	}
	return Route{req.Method, p[:end]}
}
