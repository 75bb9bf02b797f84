package loops

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/resilienthttp/resilient/internal/wire"
)

// loopWindow is how long after a call's retryable failure a re-send of it
// is recognised. Most loops come back within seconds: go-retryablehttp
// waits at most 30 s by default, Azure's pipeline 60 s. Backoff libraries
// cap near a minute plus jitter (cenkalti's ExponentialBackOff: up to 90 s).
// A loop past the window has each try retried as a new call.
const loopWindow = 5 * time.Minute

// loopWindowFull is the age past which a failure is forgotten to make room
// when loops is full. It keeps a storm's recent failures, as before the
// window grew.
const loopWindowFull = time.Minute

// maxLoopFailures and maxLoopSites bound what loops remembers.
const (
	maxLoopFailures = 4096
	maxLoopSites    = 4096
)

// Sites remembers the recent retryable failures of calls without marks,
// by which a loop's re-send is recognised, and the call sites that have
// shown a loop. Only the failure path writes it.
type Sites struct {
	// N is the failures remembered: with none, a call reads nothing else.
	N        atomic.Int32
	Mu       sync.Mutex
	byReq    map[*http.Request]*Failure
	byHeader map[unsafe.Pointer]*Failure
	bySig    map[string]*Failure // by method and URL
	Hosts    map[string]int      // failures per host
	sites    map[uint64]*loopSite
}

// Failure is a call that ended with a retryable failure.
type Failure struct {
	Req    *http.Request
	Header unsafe.Pointer // the Header map, nil if none
	Body   io.ReadCloser  // the caller's body that call sent
	Sig    string         // method and URL
	Host   string
	Print  BodyPrint
	From   origin
	// Key is the Transport's key of that call, which the request rule
	// gives to the re-send; "" for none or the application's.
	Key      string
	Attempts int   // the attempts sent under the call's key so far
	At       int64 // Unix ns of the call's end
	// Claimed: a re-send of it is in flight; live: it is remembered.
	Claimed, live bool
}

// BodyPrint identifies a body: its SHA-256, when known, and its length.
type BodyPrint struct {
	sum    [sha256.Size]byte
	known  bool
	Length int64
}

// origin is where a call comes from: its call site (callSite) and its
// goroutine. A loop sends its attempts from one goroutine; calls from
// other goroutines are other calls, however alike.
type origin struct{ Site, g uint64 }

// loopSite is what a call site has shown.
type loopSite struct {
	learned bool
	// awaiting is the Unix ns of a call's first failure from the site,
	// deferred to its loop, not yet sent again (0: none).
	awaiting int64
	seen     int64 // Unix ns of its latest failure or re-send
}

// Call is what a call without marks holds of a loop: made once the
// call fails, or when it is recognised as a re-send.
type Call struct {
	at    origin
	sited bool // at is computed
	// From: the failure this call sends again (nil if none); base: the
	// attempts before it the call continues (0: a new operation).
	From *Failure
	Base int
	Rule string
	// Asked: deferToSite read the site once.
	Asked bool
}

// match returns, under lp.mu, the failure at ns that req sends again. req
// comes from at, and its body is bp. match also returns the rule that found
// it, and whether the request rule holds (the key may be shared).
func (lp *Sites) match(req *http.Request, at origin, bp BodyPrint, ns int64) (*Failure, string, bool) {
	fresh := func(f *Failure) bool { return f != nil && f.From == at && ns-f.At <= int64(loopWindow) }
	if f := lp.byReq[req]; fresh(f) {
		strong := !f.Claimed && bp.known && f.Print.known && bp.sum == f.Print.sum && !sameBody(req.Body, f.Body)
		return f, ruleRequest, strong
	}
	if h := headerPtr(req.Header); h != nil {
		if f := lp.byHeader[h]; fresh(f) {
			return f, ruleHeader, false
		}
	}
	if f := lp.bySig[sigOf(req)]; fresh(f) && bp.Length == f.Print.Length &&
		(!bp.known || !f.Print.known || bp.sum == f.Print.sum) {
		return f, ruleIdentical, false
	}
	return nil, "", false
}

// Ended forgets, when c, a re-send, ends, the failure it sent again:
// another re-send of it now continues c's failure, if c failed.
func (lc *Call) Ended(lp *Sites) {
	if lc == nil || lc.From == nil {
		return
	}
	lp.Mu.Lock()
	lp.forget(lc.From)
	lp.Mu.Unlock()
}

// Origin returns where lc's call comes from, computed once.
func (lc *Call) Origin() origin {
	if !lc.sited {
		lc.at, lc.sited = origin{Site: callSite(), g: goid()}, true
	}
	return lc.at
}

// record remembers f; first says that f's call was no re-send: its site,
// if learned, awaits the loop's re-send of it.
func (lp *Sites) record(f *Failure, first bool) {
	lp.Mu.Lock()
	defer lp.Mu.Unlock()
	if lp.byReq == nil {
		lp.byReq = make(map[*http.Request]*Failure)
		lp.byHeader = make(map[unsafe.Pointer]*Failure)
		lp.bySig = make(map[string]*Failure)
		lp.Hosts = make(map[string]int)
	}
	if int(lp.N.Load()) >= maxLoopFailures {
		lp.sweep(f.At)
		if int(lp.N.Load()) >= maxLoopFailures {
			return // forget this one rather than grow: its re-send is a new call
		}
	}
	for _, old := range [...]*Failure{lp.byReq[f.Req], lp.byHeader[f.Header], lp.bySig[f.Sig]} {
		if old != nil {
			lp.forget(old)
		}
	}
	f.live = true
	lp.byReq[f.Req] = f
	if f.Header != nil {
		lp.byHeader[f.Header] = f
	}
	lp.bySig[f.Sig] = f
	lp.Hosts[f.Host]++
	lp.N.Add(1)
	if s := lp.site(f.From.Site, f.At); first && s.learned && s.awaiting == 0 {
		s.set(true, f.At) // awaits the loop's re-send
	}
}

// forget removes f, under lp.mu, wherever it is still indexed.
func (lp *Sites) forget(f *Failure) {
	if !f.live {
		return
	}
	f.live = false
	if lp.byReq[f.Req] == f {
		delete(lp.byReq, f.Req)
	}
	if f.Header != nil && lp.byHeader[f.Header] == f {
		delete(lp.byHeader, f.Header)
	}
	if lp.bySig[f.Sig] == f {
		delete(lp.bySig, f.Sig)
	}
	if lp.Hosts[f.Host]--; lp.Hosts[f.Host] <= 0 {
		delete(lp.Hosts, f.Host)
	}
	lp.N.Add(-1)
}

// sweep forgets, under lp.mu, the failures older than loopWindowFull at ns.
func (lp *Sites) sweep(ns int64) {
	for _, f := range lp.byReq {
		if ns-f.At > int64(loopWindowFull) {
			lp.forget(f)
		}
	}
}

// site returns, under lp.mu, the state of site id, made at ns if new.
func (lp *Sites) site(id uint64, ns int64) *loopSite {
	if lp.sites == nil {
		lp.sites = make(map[uint64]*loopSite)
	}
	s := lp.sites[id]
	if s == nil {
		if len(lp.sites) >= maxLoopSites {
			for k, o := range lp.sites {
				if !o.learned || ns-o.seen > int64(10*loopWindow) {
					delete(lp.sites, k)
				}
			}
		}
		s = &loopSite{}
		if len(lp.sites) < maxLoopSites {
			lp.sites[id] = s
		}
	}
	s.seen = ns
	return s
}

// learned reports, under lp.mu, whether site id has shown a loop at ns,
// and unlearns it when a call's first failure from it was not sent again
// within the window.
func (lp *Sites) learned(id uint64, ns int64) bool {
	s := lp.sites[id]
	if s == nil || !s.learned {
		return false
	}
	if s.awaiting != 0 && ns-s.awaiting > int64(loopWindow) {
		s.set(false, 0)
		return false
	}
	return true
}

// set records what s has shown: whether it loops, and since when a call's
// first failure from it awaits a re-send (0: none).
func (s *loopSite) set(learned bool, awaiting int64) {
	s.learned, s.awaiting = learned, awaiting
}

// rtFunc is the Transport's RoundTrip as runtime names it: the frames
// below it are the Transport's own.
const rtFunc = "github.com/resilienthttp/resilient.(*Transport).RoundTrip"

// callSite returns a hash of the caller's frames above net/http: the
// place a request comes from, the same for every attempt of a loop.
// Costly (a stack walk): on the failure path only.
func callSite() uint64 {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	h := uint64(14695981039346656037)
	inside, below := true, true
	for {
		f, more := frames.Next()
		switch {
		case inside:
			inside = f.Function != rtFunc
		case below && strings.HasPrefix(f.Function, "net/http."):
		default:
			below = false
			h = (h ^ uint64(f.PC)) * 1099511628211
		}
		if !more {
			break
		}
	}
	return h
}

// goid returns the id of the calling goroutine, read from its stack's
// header ("goroutine 7 [running]:"). Costly: on the failure path only.
func goid() uint64 {
	var buf [40]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var id uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			break
		}
		id = id*10 + uint64(ch-'0')
	}
	return id
}

// bodyPrintOf returns the fingerprint of the body rb sends, of length length
// (the request's ContentLength). It is only the length for a body rb
// cannot hold (wire.ReplayBody.Hold): over the replay buffer, or streamed,
// which is read only as it is sent.
func bodyPrintOf(rb *wire.ReplayBody, length int64) BodyPrint {
	if !rb.Hold() {
		return BodyPrint{Length: length}
	}
	return BodyPrint{sum: sha256.Sum256(rb.Buf), Length: int64(len(rb.Buf)), known: true}
}

// headerPtr identifies a Header map; nil for none.
func headerPtr(h http.Header) unsafe.Pointer {
	if h == nil {
		return nil
	}
	return reflect.ValueOf(h).UnsafePointer()
}

// sigOf is req's method, URL and header fields but those a loop changes
// on each try (perTry): what makes two requests identical.
func sigOf(req *http.Request) string {
	names := make([]string, 0, len(req.Header))
	for k := range req.Header {
		if !perTry[strings.ToLower(k)] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	h := sha256.New()
	for _, k := range names {
		io.WriteString(h, strings.ToLower(k))
		for _, v := range req.Header[k] {
			h.Write([]byte{0})
			io.WriteString(h, v)
		}
		h.Write([]byte{'\n'})
	}
	return req.Method + " " + req.URL.String() + "\x00" + string(h.Sum(nil))
}

// perTry are the header fields (lower case) that a loop may set anew on
// each try of one call. They are a signature and its time (AWS SigV4, Azure
// Shared Key), trace context, a request id, and the attempt field. The key
// field stays: a loop sends one key again, two operations two keys.
var perTry = map[string]bool{
	"authorization": true, "date": true, "x-amz-date": true, "x-ms-date": true,
	"x-amz-content-sha256": true, "x-amz-security-token": true,
	"traceparent": true, "tracestate": true, "x-request-id": true, "x-ms-client-request-id": true,
	"retry-attempt": true,
}

// sameBody reports whether a and b are the same body, a request's body
// read by an earlier call. A body that cannot be compared is taken to be
// the same; the request rule then does not hold.
func sameBody(a, b io.ReadCloser) (same bool) {
	if a == nil || a == http.NoBody {
		return false
	}
	defer func() {
		if recover() != nil {
			same = true
		}
	}()
	return a == b
}

// The rules, as Report.Deferred and Summary.Deferred name them.
const (
	RuleMark      = "mark"   // an SDK's marks (internal/wire/sdkmarks.go)
	RuleOption    = "option" // WithOuterRetries(true), ContextWithOuterRetries
	ruleRequest   = "request"
	ruleHeader    = "header"
	ruleIdentical = "identical"
	RuleSite      = "site"
)
