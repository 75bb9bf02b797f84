package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
)

// The unmarked matrix (issue 33): SDKs whose retry loops send no mark the
// Transport knew, against an in-process server that answers any method and
// path by a script, inside a synctest bubble (every SDK's sleeps and the
// Transport's waits run in virtual time). The server counts what reaches
// it (attempts) and what it applied (effects: a success, or a response
// lost after the request was applied), and checks each request's
// signature where the SDK signs (checker).

// ustep is one scripted answer.
type ustep struct {
	status     int
	retryAfter string
	header     string // another delay field, "Name: value"
	lost       bool   // applied, then the connection drops before the answer
}

// uscenario is a server's behaviour for the call measured.
type uscenario struct {
	name   string
	script []ustep // answers in order, then always (or success)
	always *ustep
}

var (
	s503   = ustep{status: 503}
	s503RA = ustep{status: 503, retryAfter: "1"}
	s500   = ustep{status: 500}
	s429RA = ustep{status: 429, retryAfter: "1"}
	s503MS = ustep{status: 503, header: "X-Ms-Retry-After-Ms: 700"}
	s503RM = ustep{status: 503, header: "Retry-After-Ms: 300"}
)

// uscenarios are the matrix's rows for each client.
var uscenarios = []uscenario{
	{name: "503 twice, then success", script: []ustep{s503, s503}},
	{name: "503 + Retry-After: 1 twice, then success", script: []ustep{s503RA, s503RA}},
	{name: "always 503", always: &s503},
	{name: "always 500", always: &s500},
	{name: "always 429 + Retry-After: 1", always: &s429RA},
	{name: "503 + x-ms-retry-after-ms: 700 twice, then success", script: []ustep{s503MS, s503MS}},
	{name: "503 + Retry-After-Ms: 300 twice, then success", script: []ustep{s503RM, s503RM}},
	{name: "response lost once", script: []ustep{{lost: true}}},
	{name: "success at once"},
}

// uclient is one SDK call. loops: the SDK retries on its own (the warmed
// bound "attempts ≤ alone" is about a loop; a client that retries nothing
// is held to "never worse than a bare client": effects and successes).
type uclient struct {
	name  string
	loops bool
	// ok is the server's answer to a request that succeeds.
	ok func(req *http.Request) *http.Response
	// call tells the call's requests from the SDK's own housekeeping
	// (answered 404, not counted); nil: every request is the call's.
	call func(req *http.Request) bool
	// check verifies a request's signature; nil: unsigned.
	check func(req *http.Request, body []byte) error
	do    func(ctx context.Context, hc *http.Client, base string) error
}

// userver is the in-process server: an http.RoundTripper that answers as
// the script says.
type userver struct {
	c        *uclient
	mu       sync.Mutex
	script   []ustep
	always   *ustep
	attempts int
	effects  int
	badSigs  []string
	// prev: when the last request of the call came, and the delay its
	// answer asked; asked: those delays added up, over the answers a try
	// followed; early: tries sooner than asked.
	prev  time.Time
	delay time.Duration
	asked time.Duration
	early []string
}

func (s *userver) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	// As a socket's transport does: the request was written.
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil {
		if tr.WroteHeaders != nil {
			tr.WroteHeaders()
		}
		if tr.WroteRequest != nil {
			tr.WroteRequest(httptrace.WroteRequestInfo{})
		}
	}
	if s.c.call != nil && !s.c.call(req) {
		return &http.Response{StatusCode: 404, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	s.mu.Lock()
	s.attempts++
	if now := time.Now(); s.delay > 0 {
		s.asked += s.delay
		if gap := now.Sub(s.prev); gap < s.delay {
			s.early = append(s.early, fmt.Sprintf("try %d: %v after an answer that asked %v", s.attempts, gap, s.delay))
		}
	}
	s.prev, s.delay = time.Now(), 0
	if err := checkBody(req, body); err != nil {
		s.badSigs = append(s.badSigs, err.Error())
	}
	if s.c.check != nil {
		if err := s.c.check(req, body); err != nil {
			s.badSigs = append(s.badSigs, err.Error())
		}
	}
	var st *ustep
	switch {
	case len(s.script) > 0:
		st = &s.script[0]
		s.script = s.script[1:]
	case s.always != nil:
		st = s.always
	}
	if st == nil || st.lost {
		s.effects++
	}
	s.mu.Unlock()
	switch {
	case st == nil:
		resp := s.c.ok(req)
		resp.Request = req
		return resp, nil
	case st.lost:
		return nil, io.ErrUnexpectedEOF // applied; the answer never came
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if st.retryAfter != "" {
		h.Set("Retry-After", st.retryAfter)
	}
	if k, v, ok := strings.Cut(st.header, ":"); ok {
		h.Set(k, strings.TrimSpace(v))
	}
	s.mu.Lock()
	s.delay = resilient.ServerDelay(h, time.Now())
	s.mu.Unlock()
	b := `{"errors":["` + http.StatusText(st.status) + `"]}`
	return &http.Response{StatusCode: st.status, Header: h, Body: io.NopCloser(strings.NewReader(b)),
		ContentLength: int64(len(b)), Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// set makes the server answer the next requests by sc.
func (s *userver) set(sc uscenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.always = append([]ustep(nil), sc.script...), sc.always
	s.attempts, s.effects = 0, 0
	s.delay, s.asked, s.early = 0, 0, nil
}

// uresult is what one run showed of the call measured.
type uresult struct {
	attempts, effects int
	ok                bool
	took              time.Duration // virtual
	inTransport       time.Duration // virtual time spent in the client's RoundTrip
	badSigs           []string
	asked             time.Duration // the server's delays a try followed, added up
	early             []string      // tries sooner than the server asked
}

// urun runs c's call over st against sc in a bubble. With warm, the same
// call from the same place first fails once against a server that answers
// 503 always (the Transport may learn that the place loops), then the call
// measured runs.
func urun(t *testing.T, c uclient, st setup, sc uscenario, warm bool) uresult {
	t.Helper()
	var res uresult
	synctest.Test(t, func(t *testing.T) {
		srv := &userver{c: &c}
		hc := st.make(srv)
		tt := &timedRT{next: hc.Transport}
		hc.Transport = tt
		phases := []uscenario{sc}
		if warm {
			phases = []uscenario{{name: "warm-up", always: &s503}, sc}
		}
		var err error
		var start time.Time
		for i, ph := range phases {
			srv.set(ph)
			tt.total.Store(0)
			start = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			err = c.do(ctx, hc, "http://svc.test") // one line: one call site
			cancel()
			if i < len(phases)-1 {
				time.Sleep(time.Second) // between calls
			}
		}
		res.took = time.Since(start)
		res.inTransport = time.Duration(tt.total.Load())
		res.ok = err == nil
		srv.mu.Lock()
		res.attempts, res.effects, res.badSigs = srv.attempts, srv.effects, srv.badSigs
		res.asked, res.early = srv.asked, srv.early
		srv.mu.Unlock()
		hc.CloseIdleConnections()
	})
	return res
}

// errStatus is a hand-written loop's error for a status it gives up on.
var errStatus = errors.New("status")
