package resilient

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/internal/wire"
)

// The policy this file carries out is in doc.go, under "Outer retry
// loops". The marks are read in sdkmarks.go, a loop's retry is admitted by
// reserveOuterRetry, and a retry finds the call it continues in
// pendingCalls. A loop without marks is recognised in loopsite.go; none of
// that is on the path of a request without marks until a call fails.

// outerMode is WithOuterRetries' setting.
type outerMode int8

const (
	outerAuto   outerMode = iota // by the request's marks
	outerAlways                  // WithOuterRetries(true)
	outerNever                   // WithOuterRetries(false)
)

// WithOuterRetries declares whether requests come from a loop that retries
// them on its own. Such a loop may be an SDK with its retries on, or the
// application's loop. The Transport then does not retry them as well.
//
// With hosts, it declares it only for requests to those hosts. A host is a
// URL's host, with or without its port. One Transport often serves an SDK
// and plain calls. ContextWithOuterRetries declares it for one call, and
// wins over this option.
//
// With true, every RoundTrip sends one attempt, and the loop decides whether
// and when to retry. A try sent sooner than a server's delay asked (a
// 429's or a shedding host's Retry-After) waits what is left of it. A call that repeats a key of the application's seen
// within a minute is a retry. The host's gate admits it as one, and may
// refuse it (see WithRefusalResponses). Use true with a hand-written loop.
// Use it with an SDK that sends its own idempotency key but no retry count.
// stripe-go with MaxNetworkRetries above 0 is one: its first attempt says
// nothing of its retries.
//
// With false, the Transport retries within each call, as for any request,
// and looks for no loop. An SDK's marks still give each call one key and the
// attempt count. Use false with an SDK whose retries are turned off.
//
// Without this option the Transport looks for a loop and defers to the loop
// it finds. The package documentation, under "Outer retry loops" and "Loops
// without marks", says how it finds one.
func WithOuterRetries(will bool, hosts ...string) Option {
	return func(c *config) {
		m := outerNever
		if will {
			m = outerAlways
		}
		if len(hosts) == 0 {
			c.outer = m
			return
		}
		if c.outerHosts == nil {
			c.outerHosts = make(map[string]outerMode, len(hosts))
		}
		for _, h := range hosts {
			c.outerHosts[strings.ToLower(h)] = m
		}
	}
}

// outerMode returns WithOuterRetries' setting for c's request.
func (c *call) outerMode() outerMode {
	cfg := c.cfg
	if cfg.outerHosts == nil && !outerContexts.Load() {
		return cfg.outer
	}
	return cfg.scopedOuterMode(c.Ctx, c.Req)
}

// scopedOuterMode returns WithOuterRetries' setting for req, made in ctx,
// when hosts or contexts declare it (else it is cfg.outer: call.resolve).
func (cfg *config) scopedOuterMode(ctx context.Context, req *http.Request) outerMode {
	m := cfg.outer
	if cfg.outerHosts != nil && req.URL != nil {
		if hm, ok := cfg.outerHosts[strings.ToLower(req.URL.Host)]; ok {
			m = hm
		} else if hm, ok := cfg.outerHosts[strings.ToLower(req.URL.Hostname())]; ok {
			m = hm
		}
	}
	if outerContexts.Load() {
		if cm, ok := outerFromContext(ctx); ok {
			m = cm
		}
	}
	return m
}

// deferredBy names the rule by which c, a call that sends one attempt,
// defers to its loop (Report.Deferred).
func (c *call) deferredBy() string {
	switch {
	case c.loop != nil && c.loop.rule != "":
		return c.loop.rule
	case c.outer.marked:
		return ruleMark
	}
	return ruleOption
}

// outerCall is the part of a call that an outer retry loop concerns.
type outerCall struct {
	mark   wire.Mark
	marked bool // mark was read from the request
	// single: this call sends one attempt; the loop retries. Its retries
	// are admitted by the gate as retries, which it may refuse.
	single bool
	// print is the request's fingerprint when the call is in pendingCalls.
	print string
	// lax: a loop's re-send recognised on evidence that another call may
	// show too (loopsite.go): its attempt is admitted as a first
	// attempt, never refused.
	lax bool
}

// outerKey reads the marks of req; checkHeader found a field that may carry
// one. It returns the SDK's call (nil without marks) and the operation's
// key. Where the Transport chooses the key, it is the SDK's call id or the
// key of the pending call this one continues. outerKey is called once the
// body is ready, before anything is sent.
func (op *operation) outerKey(cfg *config, req *http.Request, pending *pendingCalls) (*outerCall, string) {
	m, ok := wire.ReadMark(req.Header)
	if !ok || op.hop {
		return nil, op.key
	}
	o := &outerCall{mark: m, marked: true}
	if op.own || op.key == "" {
		return o, op.key // the application's key, or a request that takes none
	}
	if m.Count < 0 {
		return o, op.key // no count: nothing to match a retry by
	}
	if m.Id != "" && wire.ValidateKey(m.Id) == nil {
		return o, m.Id
	}
	if op.body.Stream != nil {
		return o, op.key // a streamed body has no fingerprint before it is sent: the minted key stands
	}
	fp, err := op.body.Fingerprint(req)
	if err != nil {
		return o, op.key // no match possible: the minted key stands
	}
	o.print = fp
	return o, pending.key(fp, m.Count, op.key, cfg.nanos())
}

// outerStart decides whether a call sends one attempt for an outer loop. It
// decides before the first attempt, from o (the call's outer loop's part,
// nil without marks) and WithOuterRetries' mode. It returns the call's part:
// o, or a new one with WithOuterRetries(true). It returns the number of the
// loop's attempts before this call. For a key of the application's, base is
// the key's recent attempts. outerStart is called only for a marked call, a
// repeated key of the application's, or with WithOuterRetries(true).
func outerStart(o *outerCall, mode outerMode, base int) (*outerCall, int) {
	if o == nil {
		if mode != outerAlways {
			return nil, base
		}
		o = &outerCall{}
	}
	if o.marked && o.mark.Count >= 0 {
		base = o.mark.Count
	}
	switch mode {
	case outerAlways:
		o.single = true
	case outerAuto:
		switch {
		case !o.marked:
			// A repeated key of the application's without marks is left
			// as it was (recent.go): it may be a loop's retry, or the
			// application resolving an unknown outcome, which the
			// Transport retries.
		case o.mark.Count < 0:
			// stripe-go: a retry loop once its key repeats. Its first
			// attempt is retried by the Transport: with stripe-go's
			// retries off, that is how the Transport retries its calls
			// (under stripe-go's key, which makes a re-sent POST safe).
			o.single = base > 0
		default:
			o.single = o.mark.WillRetry()
		}
	}
	return o, base
}

// sendsOne reports whether o's call sends one attempt, an outer loop
// retrying; o is nil for a call without one.
func (o *outerCall) sendsOne() bool { return o != nil && o.single }

// refuses reports whether the gate's refusal of o's call is answered with a
// refusal response (see WithRefusalResponses). It is when the call is an
// outer loop's attempt whose SDK honours a do-not-retry answer (the marks'
// table).
func (o *outerCall) refuses() bool { return o.sendsOne() && o.mark.Respond }

// pendingWindow is how long a pending call is remembered after its last
// attempt. It is longer than the longest wait of the SDKs that send no call
// id. A Stainless SDK honours Retry-After up to 60 s, openai-go up to 2 min.
const pendingWindow = 3 * time.Minute

// maxPendingCalls bounds the calls remembered.
const maxPendingCalls = 4096

// pendingCalls remembers the recent calls of outer loops that send a retry
// count but no call id (Stainless SDKs). It keys them by request
// fingerprint, so that a retry takes its call's key. Only marked requests
// touch it.
//
// A call is forgotten with every other call of the same fingerprint. It is
// never forgotten alone, but when its success ends it. A fingerprint
// forgotten to make room is remembered as gone for the window. Retries of
// it get new keys meanwhile. So a retry finds either its own call among the
// others, or none of them. It never takes another call's key because its
// own was forgotten. A streamed body is not matched at all.
type pendingCalls struct {
	mu    sync.Mutex
	calls map[string]*pendingSet // by fingerprint
	n     int                    // calls in all sets
	// gone holds, for a window, the fingerprints whose sets evict dropped
	// (Unix ns until when). A retry of a forgotten call must not match a
	// later call of the same fingerprint. So retries of them get new keys
	// while it lasts. maxPendingCalls bounds it. When full, it is emptied
	// and every retry gets a new key until lossyUntil.
	gone       map[string]int64
	lossyUntil int64
}

// pendingSet is the calls of one fingerprint.
type pendingSet struct {
	last  int64 // Unix ns of the latest attempt of any of them
	calls []pendingCall
}

type pendingCall struct {
	key   string
	count int // the mark of its latest attempt
}

// key returns the key for an attempt with fingerprint fp and mark count.
// It is the key of the one pending call of fp whose latest mark is
// count-1. Otherwise it is minted, the key of a new call, which key
// records.
func (p *pendingCalls) key(fp string, count int, minted string, ns int64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.calls[fp]
	if s != nil && ns-s.last > int64(pendingWindow) {
		p.drop(fp, s)
		s = nil
	}
	if s != nil && count > 0 && ns >= p.lossyUntil && p.gone[fp] <= ns {
		match := -1
		for i, pc := range s.calls {
			if pc.count != count-1 {
				continue
			}
			if match >= 0 {
				match = -2 // several: none is taken
				break
			}
			match = i
		}
		if match >= 0 {
			s.calls[match].count = count
			s.last = ns
			return s.calls[match].key
		}
	}
	if p.calls == nil {
		p.calls = make(map[string]*pendingSet)
	}
	if p.n >= maxPendingCalls {
		p.evict(ns)
		s = p.calls[fp] // evict may have dropped it
	}
	if s == nil {
		s = &pendingSet{}
		p.calls[fp] = s
	}
	p.resize(s, append(s.calls, pendingCall{key: minted, count: count}))
	s.last = ns
	return minted
}

// forget removes the call with key from fp's set.
func (p *pendingCalls) forget(fp, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.calls[fp]
	if s == nil {
		return
	}
	for i, pc := range s.calls {
		if pc.key == key {
			p.resize(s, append(s.calls[:i], s.calls[i+1:]...))
			break
		}
	}
	if len(s.calls) == 0 {
		delete(p.calls, fp)
	}
}

// evict makes room. It drops the sets idle past the window. If none was,
// it drops the set idle longest and every set last used within a quarter
// of its idle time after it. So a full table does not scan all sets on
// every new call.
func (p *pendingCalls) evict(ns int64) {
	oldest := ns
	dropped := false
	for fp, s := range p.calls {
		if ns-s.last > int64(pendingWindow) {
			p.drop(fp, s)
			dropped = true
			continue
		}
		oldest = min(oldest, s.last)
	}
	if dropped {
		return
	}
	cut := oldest + (ns-oldest)/4
	for fp, s := range p.calls {
		if s.last <= cut {
			p.drop(fp, s)
			p.tomb(fp, ns)
		}
	}
}

// tomb records that fp's calls were forgotten at ns with a retry still
// possible (see gone).
func (p *pendingCalls) tomb(fp string, ns int64) {
	if p.gone == nil {
		p.gone = make(map[string]int64)
	}
	if len(p.gone) >= maxPendingCalls {
		for g, until := range p.gone {
			if until <= ns {
				delete(p.gone, g)
			}
		}
		if len(p.gone) >= maxPendingCalls {
			clear(p.gone)
			p.lossyUntil = ns + int64(pendingWindow)
		}
	}
	p.gone[fp] = ns + int64(pendingWindow)
}

// drop forgets fp's set s.
func (p *pendingCalls) drop(fp string, s *pendingSet) {
	p.resize(s, nil)
	delete(p.calls, fp)
}

// resize makes calls the calls of set s, keeping the count of all calls.
func (p *pendingCalls) resize(s *pendingSet, calls []pendingCall) {
	p.n += len(calls) - len(s.calls)
	s.calls = calls
}

// An SDK that retries on its own (stripe-go, say) calls RoundTrip again
// with the same key after a failure. Each of those calls is a retry of the
// same operation, not a new one: the Transport numbers its attempts after
// the earlier calls' (Retry-Attempt, Report, Events), and the gate admits
// its first attempt as a retry (a retry token, not a first attempt's free
// pass). Attempts are not capped across calls: re-sending a key is also how
// a caller resolves an unknown outcome. When the SDK's marks, or
// WithOuterRetries(true), say a loop retries, each call sends one attempt
// and the loop drives (outerloop.go).

// recentWindow is how long a key is remembered after its last attempt: an
// outer retry loop comes back within seconds.
const recentWindow = time.Minute

// maxRecentKeys bounds the keys remembered.
const maxRecentKeys = 4096

// recentKeys remembers how many attempts were sent under each key in recent
// calls. It holds the application's own keys only: a key the Transport
// minted is never seen again. It is not on the path of requests with
// minted keys.
type recentKeys struct {
	mu   sync.Mutex
	keys map[string]recentKey
}

type recentKey struct {
	attempts int   // attempts sent under the key so far
	last     int64 // Unix ns of the last call's end
}

// attempts returns the number of attempts already sent under key in calls
// that ended within recentWindow of now.
func (r *recentKeys) attempts(key string, now int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if !ok || now-e.last > int64(recentWindow) {
		return 0
	}
	return e.attempts
}

// record notes that attempts attempts have now been sent under key.
func (r *recentKeys) record(key string, attempts int, ns int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[string]recentKey)
	}
	if _, ok := r.keys[key]; !ok && len(r.keys) >= maxRecentKeys {
		for k, e := range r.keys {
			if ns-e.last > int64(recentWindow) {
				delete(r.keys, k)
			}
		}
		if len(r.keys) >= maxRecentKeys {
			return // forget this one rather than grow
		}
	}
	r.keys[key] = recentKey{attempts: attempts, last: ns}
}
