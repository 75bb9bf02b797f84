package fakeserver

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
)

// Defaults resolved by compile.
const (
	defaultTTL                  = 24 * time.Hour
	defaultMaxRecords           = 1_000_000
	defaultInProgressRetryAfter = time.Second
	defaultBodyDuration         = time.Second
)

// config is a compiled Scenario with every default resolved. It is immutable
// once published, except for the routes' scripts and random sources, which
// routePlan guards with its own mutex.
type config struct {
	sc                   Scenario // as given, defaults not filled in
	stripe               bool
	mismatchStatus       int
	ttl                  time.Duration
	maxRecords           int
	requireKey           bool
	inProgressRetryAfter time.Duration
	outages              []Outage
	capacity             *capacity
	routes               []*routePlan
	store                *idempotency.MemoryStore // the records, shared by the configs until Reset
	idem                 http.Handler             // package idempotency over store, configured as the scenario says
	headers              []string                 // the response headers idem stores (see mount)
}

func compile(sc Scenario) (*config, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	sc = sc.clone()
	c := &config{
		sc:                   sc,
		stripe:               sc.Mode == ModeStripe,
		mismatchStatus:       orInt(sc.MismatchStatus, http.StatusUnprocessableEntity),
		ttl:                  orDuration(time.Duration(sc.TTL), defaultTTL),
		maxRecords:           orInt(sc.MaxRecords, defaultMaxRecords),
		requireKey:           sc.RequireKey,
		inProgressRetryAfter: orDuration(time.Duration(sc.InProgressRetryAfter), defaultInProgressRetryAfter),
	}
	for _, o := range sc.Outages {
		o.Status = orInt(o.Status, http.StatusServiceUnavailable)
		c.outages = append(c.outages, o)
	}
	if sc.Capacity != nil {
		c.capacity = newCapacity(*sc.Capacity)
	}
	for _, r := range sc.Routes {
		p, err := newRoutePlan(r, sc.Seed)
		if err != nil {
			return nil, err
		}
		c.routes = append(c.routes, p)
	}
	return c, nil
}

// outageAt returns the outage covering elapsed (time since the scenario's start),
// or nil.
func (c *config) outageAt(elapsed time.Duration) *Outage {
	for i := range c.outages {
		o := &c.outages[i]
		if elapsed >= time.Duration(o.Start) && elapsed < time.Duration(o.End) {
			return o
		}
	}
	return nil
}

// route returns the first route matching the request, or nil.
func (c *config) route(method, path string) *routePlan {
	for _, p := range c.routes {
		if p.match.matches(method, path) {
			return p
		}
	}
	return nil
}

// routePlan is the run-time state of one Route: what remains of its script and
// its random source.
type routePlan struct {
	source        string // normalMatch(Route.Match)
	match         matcher
	requireKey    bool
	failureRate   float64
	failureStatus int
	mix           []Fault
	latency       *LatencyDist // nil: no drawn latency

	draw      Draw
	opHeader  string
	seed      uint64 // Scenario.Seed
	matchHash uint64 // FNV-1a of normalMatch(Route.Match), for DrawOperation

	mu     sync.Mutex
	script []Fault    // guarded by mu; script[0] is next
	used   int        // guarded by mu; how many times script[0] was used
	rng    *rand.Rand // guarded by mu
}

func newRoutePlan(r Route, seed uint64) (*routePlan, error) {
	m, err := parseMatch(r.Match)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(r.Match))
	draw := r.Draw
	if draw == "" {
		draw = DrawStream
	}
	source := normalMatch(r.Match)
	return &routePlan{
		draw:          draw,
		opHeader:      orString(r.OperationHeader, DefaultOperationHeader),
		seed:          seed,
		matchHash:     fnv1a(source),
		source:        source,
		match:         m,
		requireKey:    r.RequireKey,
		failureRate:   r.FailureRate,
		failureStatus: orInt(r.FailureStatus, http.StatusServiceUnavailable),
		mix:           cloneFaults(r.Mix),
		latency:       r.clone().Latency,
		script:        cloneFaults(r.Script),
		rng:           rand.New(rand.NewPCG(seed, h.Sum64())),
	}, nil
}

// next consumes the outcome of one arriving request whose operation identity
// is op ("" if it has none; see Route.Draw), counting the attempt in ops,
// and adds the route's drawn latency to it. A nil plan (no route matched)
// gives no fault.
func (p *routePlan) next(op string, ops *opCounts) Fault {
	if p == nil {
		return Fault{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latency == nil {
		return p.fault(op, 0, ops)
	}
	var n uint64
	if p.draw == DrawOperation && op != "" {
		n = ops.next(p.matchHash, op)
	}
	f := p.fault(op, n, ops)
	f.Latency += Duration(p.latencyOf(op, n))
	return f
}

// fault draws the fault of a request; n is its attempt number when it was
// counted already (0: fault counts it if it needs it). It requires that
// p.mu is held.
func (p *routePlan) fault(op string, n uint64, ops *opCounts) Fault {
	if len(p.script) > 0 {
		f := p.script[0]
		p.used++
		if p.used >= max(f.Count, 1) {
			p.script[0] = Fault{} // let the headers map go
			p.script = p.script[1:]
			p.used = 0
		}
		return f
	}
	if p.failureRate == 0 && len(p.mix) == 0 {
		return Fault{}
	}
	var u float64
	if p.draw == DrawOperation && op != "" {
		if n == 0 {
			n = ops.next(p.matchHash, op)
		}
		u = fate(p.seed, p.matchHash, op, n)
	} else {
		u = p.rng.Float64()
	}
	if u < p.failureRate {
		return Fault{Kind: FaultStatus, Status: p.failureStatus}
	}
	u -= p.failureRate
	for _, f := range p.mix {
		if u < f.Probability {
			return f
		}
		u -= f.Probability
	}
	return Fault{}
}

// enqueue appends faults to the script.
func (p *routePlan) enqueue(faults []Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script = append(p.script, cloneFaults(faults)...)
}

// normalMatch is the form of a Route.Match that Enqueue compares: trimmed,
// with "" spelt "*".
func normalMatch(m string) string {
	if m = strings.TrimSpace(m); m == "" {
		return "*"
	}
	return m
}

// matcher is a parsed Route.Match.
type matcher struct {
	method string   // "" matches any method
	segs   []string // nil matches any path; "*" matches one segment
}

func parseMatch(s string) (matcher, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return matcher{}, nil
	}
	var m matcher
	path := s
	if i := strings.IndexByte(s, ' '); i >= 0 {
		m.method, path = strings.ToUpper(s[:i]), strings.TrimSpace(s[i+1:])
		if m.method == "*" {
			m.method = ""
		}
	}
	if path == "*" {
		return m, nil
	}
	if !strings.HasPrefix(path, "/") {
		return matcher{}, fmt.Errorf("match %q: want \"METHOD /path\", \"/path\" or \"*\"", s)
	}
	m.segs = strings.Split(strings.Trim(path, "/"), "/")
	for i, seg := range m.segs {
		if seg == "" {
			return matcher{}, errors.New("match " + s + ": empty path segment")
		}
		if seg == "*" || (strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}")) {
			m.segs[i] = "*"
		}
	}
	return m, nil
}

func (m matcher) matches(method, path string) bool {
	if m.method != "" && m.method != method {
		return false
	}
	if m.segs == nil {
		return true
	}
	path = strings.Trim(path, "/")
	for i, want := range m.segs {
		seg, rest, _ := strings.Cut(path, "/")
		if want != "*" && want != seg {
			return false
		}
		if i == len(m.segs)-1 {
			return rest == ""
		}
		if rest == "" {
			return false
		}
		path = rest
	}
	return true
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orDuration(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}
