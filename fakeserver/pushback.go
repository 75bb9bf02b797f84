package fakeserver

import (
	"net/http"

	"github.com/resilienthttp/resilient/pushback"
)

// WithPushback mounts the retry-budget middleware of package pushback,
// configured by c, in front of the API (/v1/; the admin endpoints under
// /_fake/ are not behind it). Every fault the server injects — scripted
// statuses, outages, capacity sheds, dropped connections — comes from behind
// it, so the middleware counts them as failures. The budget survives
// SetScenario and starts over on Reset; its window follows real time (or a
// synctest bubble's), not WithClock. Default: no middleware.
func WithPushback(c pushback.Config) Option {
	return func(o *options) { o.pushback = &c }
}

// pushbackMount is a Budget and the API handler mounted behind it.
type pushbackMount struct {
	budget *pushback.Budget
	h      http.Handler
}

// mountPushback (re)creates the middleware, if the server has one, with a
// fresh budget.
func (s *Server) mountPushback() {
	if s.pushbackCfg == nil {
		return
	}
	b := pushback.New(*s.pushbackCfg)
	s.pushback.Store(&pushbackMount{budget: b, h: b.Middleware(http.HandlerFunc(s.serveAPI))})
}

// serveAPIThrough serves an API request, behind the middleware if there is
// one.
func (s *Server) serveAPIThrough(w http.ResponseWriter, r *http.Request) {
	if m := s.pushback.Load(); m != nil {
		m.h.ServeHTTP(w, r)
		return
	}
	s.serveAPI(w, r)
}

// PushbackStats returns the counters of the pushback middleware since the
// server started or was last Reset, and false if the server has none (see
// WithPushback).
func (s *Server) PushbackStats() (pushback.Stats, bool) {
	m := s.pushback.Load()
	if m == nil {
		return pushback.Stats{}, false
	}
	return m.budget.Stats(), true
}
