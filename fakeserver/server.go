package fakeserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient/pushback"
)

// Server is a fake HTTP API with server-side idempotency and fault injection.
// Start it on a loopback socket with New (or NewUnstarted and Start), mount
// Handler in a server of your own, or call it with no socket through
// Transport. Close it when done.
//
// A Server is safe for concurrent use by multiple goroutines.
type Server struct {
	// URL is the base URL of a started server, "http://127.0.0.1:PORT", with no
	// trailing slash. It is empty until Start.
	URL string

	now     func() time.Time
	handler http.Handler
	rt      *transport
	ts      *httptest.Server

	closing  context.Context    // done once Close is called
	closeNow context.CancelFunc // cancels closing
	inflight sync.RWMutex       // read-held by each request in service; Close write-locks it to wait for them

	cfgMu sync.Mutex             // serialises scenario writers (SetScenario, Enqueue, Reset)
	cfg   atomic.Pointer[config] // the scenario in force
	epoch atomic.Int64           // when the scenario started, in Unix nanoseconds (outages count from it)
	seq   atomic.Int64           // the last object id number handed out
	led   *ledger                // effects
	stats stats                  // counters
	ops   opCounts               // attempts per operation, for DrawOperation

	pushbackCfg *pushback.Config              // nil: no middleware (WithPushback)
	pushback    atomic.Pointer[pushbackMount] // the middleware in front of the API; nil without one
}

// New starts and returns a Server on 127.0.0.1 with a free port. It panics if
// an option is invalid (see Scenario.Validate) or no port can be had, as
// httptest.NewServer does.
func New(opts ...Option) *Server {
	s := NewUnstarted(opts...)
	s.Start()
	return s
}

// NewUnstarted returns a Server that is not listening yet: call Start, or use
// Handler or Transport with no socket. It panics if an option is invalid.
func NewUnstarted(opts ...Option) *Server {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := compile(o.sc)
	if err != nil {
		panic(err.Error())
	}
	s := &Server{now: o.now, led: newLedger(), pushbackCfg: o.pushback}
	s.mount(cfg, newStore(cfg.maxRecords))
	s.closing, s.closeNow = context.WithCancel(context.Background())
	s.handler = http.HandlerFunc(s.serveHTTP)
	s.rt = &transport{s: s}
	s.cfg.Store(cfg)
	s.restart(s.now())
	s.mountPushback()
	return s
}

// Start starts a server created with NewUnstarted on 127.0.0.1 with a free
// port, sets URL, and restarts the scenario's clock (outage windows count from
// here). It panics if the server was already started.
func (s *Server) Start() {
	if s.ts != nil {
		panic("fakeserver: Server already started")
	}
	s.ts = httptest.NewUnstartedServer(s.handler)
	s.ts.Start()
	s.URL = s.ts.URL
	s.restart(s.now())
}

// Close shuts the server down and blocks until every request in service has
// returned, socket or in-process. Requests that hang, wait for capacity or
// sleep are released at once (their connections are dropped); later in-process
// requests fail as if the connection were refused. Close may be called more
// than once.
func (s *Server) Close() {
	s.closeNow()
	if s.ts != nil {
		s.ts.Close()
	}
	s.inflight.Lock()
	defer s.inflight.Unlock()
}

// Client returns an *http.Client for the server: for a started server, one
// that reaches it over loopback and whose idle connections Close closes; for
// an unstarted one, a client whose Transport is s.Transport().
func (s *Server) Client() *http.Client {
	if s.ts != nil {
		return s.ts.Client()
	}
	return &http.Client{Transport: s.rt}
}

// Handler returns the server's HTTP handler: the API under /v1/ and the admin
// endpoints under /_fake/ (see the package documentation). It can be mounted in
// any http.Server or called directly; faults that drop the connection panic
// with http.ErrAbortHandler, which net/http turns into an abrupt close.
func (s *Server) Handler() http.Handler { return s.handler }

// Transport returns an http.RoundTripper that serves requests in-process: it
// calls the handler in the caller's goroutine, with no socket and no goroutine
// of its own, and ignores the URL's scheme and host. It is cheap enough for
// storms of many thousands of requests per second. Like a socket transport it
// closes the request body on every path, never modifies the request, and
// returns a response or an error, never both:
//
//   - the request's context done, before or while serving (a hang, a queue,
//     a latency): exactly ctx.Err();
//   - FaultReset: an error wrapping a *net.OpError and syscall.ECONNRESET;
//   - FaultLostResponse, or a hang ended by Close: an error wrapping a
//     *net.OpError and io.ErrUnexpectedEOF;
//   - the server closed: an error wrapping a *net.OpError (Op "dial") and
//     syscall.ECONNREFUSED;
//   - FaultTruncatedBody: a response whose body reads half, then fails with
//     io.ErrUnexpectedEOF;
//   - FaultSlowBody: a response whose body sleeps between chunks, honouring
//     the request's context.
func (s *Server) Transport() http.RoundTripper { return s.rt }

// Scenario returns a copy of the scenario in force (as set, defaults not
// filled in; outcomes added with Enqueue are not included).
func (s *Server) Scenario() Scenario { return s.cfg.Load().sc.clone() }

// SetScenario replaces the scenario: scripts and random draws start over, and
// outage windows count from now. Idempotency records, the ledger and the
// counters are kept (call Reset to clear them). It returns the validation
// error of sc, if any, and then changes nothing.
func (s *Server) SetScenario(sc Scenario) error {
	cfg, err := compile(sc)
	if err != nil {
		return err
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.mount(cfg, s.cfg.Load().store) // the records are kept
	s.cfg.Store(cfg)
	s.epoch.Store(s.now().UnixNano())
	return nil
}

// Enqueue appends outcomes to the script of the route whose Match is exactly
// match (after trimming spaces; "" and "*" are the same), adding such a route
// in front of the others if there is none. Enqueued outcomes are run-time state: SetScenario and Reset
// drop them. It returns an error if match or a fault is invalid.
func (s *Server) Enqueue(match string, faults ...Fault) error {
	for i, f := range faults {
		if err := f.validate(); err != nil {
			return errorf("enqueue: faults[%d]: %v", i, err)
		}
	}
	match = normalMatch(match)
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	cfg := s.cfg.Load()
	for _, p := range cfg.routes {
		if p.source == match {
			p.enqueue(faults)
			next := *cfg
			s.mount(&next, cfg.store, faults...) // the records keep the faults' headers
			s.cfg.Store(&next)
			return nil
		}
	}
	p, err := newRoutePlan(Route{Match: match}, cfg.sc.Seed)
	if err != nil {
		return errorf("enqueue: %v", err)
	}
	p.enqueue(faults)
	next := *cfg
	next.routes = append([]*routePlan{p}, cfg.routes...)
	s.mount(&next, cfg.store, faults...)
	s.cfg.Store(&next)
	return nil
}

// Reset forgets every idempotency record, the ledger, the counters and the
// pushback budget (WithPushback), and
// restarts the scenario (scripts, random draws, outage windows) as if it had
// just been set. Call it between tests that share a server.
func (s *Server) Reset() {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	cfg, err := compile(s.cfg.Load().sc)
	if err != nil { // cannot happen: it compiled before
		panic(err.Error())
	}
	s.mount(cfg, newStore(cfg.maxRecords))
	s.cfg.Store(cfg)
	s.led.reset()
	s.ops.reset()
	s.seq.Store(0)
	s.restart(s.now())
	s.mountPushback()
}

// restart sets the scenario's and the counters' start to now.
func (s *Server) restart(now time.Time) {
	s.epoch.Store(now.UnixNano())
	s.stats.reset(now)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	st := s.stats.snapshot()
	st.Effects, st.DuplicateEffects = s.led.counts()
	st.Records = s.cfg.Load().store.Len()
	if pb, ok := s.PushbackStats(); ok {
		st.PushbackRefused = int64(pb.RetriesShed + pb.FirstAttemptsShed)
		st.PushbackHinted = int64(pb.Hinted)
	}
	return st
}

// Effects returns how many objects were created by requests carrying the
// Idempotency-Key key (whatever their principal and route).
func (s *Server) Effects(key string) int { return s.led.effects(key) }

// TotalEffects returns how many objects were created.
func (s *Server) TotalEffects() int {
	n, _ := s.led.counts()
	return n
}

// Ledger returns a copy of the effects, oldest first.
func (s *Server) Ledger() []Entry { return s.led.snapshot() }

// serveHTTP is the root handler: admin endpoints, else the API, behind the
// pushback middleware if there is one. Requests are counted as they arrive,
// before the middleware, so that Stats.Requests includes the ones it
// refuses.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, adminPrefix) {
		s.serveAdmin(w, r)
		return
	}
	s.inflight.RLock()
	defer s.inflight.RUnlock()
	if s.closing.Err() != nil {
		abortConn(w, abortRefused)
	}
	// A server that dedupes by key says so on every answer, its faults,
	// sheds and pushback included, as Stripe's does: it echoes the
	// request's key. That is the evidence a client needs before it
	// re-sends an unsafe request.
	if k := r.Header.Values("Idempotency-Key"); len(k) == 1 {
		w.Header().Set("Idempotency-Key", k[0])
	}
	s.stats.arrive(s.now(), r.Header.Get("Retry-Attempt"))
	s.serveAPIThrough(w, r)
}
