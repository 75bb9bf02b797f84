package resilient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules by which the Transport recognises an outer retry loop without
// marks (loopsite.go). A call site is the caller's frames, so a test that
// means "the same call site" sends every call from one line of code (a
// loop over steps); calls from two lines are two sites.

// loopTransport is a Transport over s whose POSTs the server dedupes, so
// that the Transport retries them, without retry control: the rules, not
// the unsafe-retry guard or the host's retry tokens, decide how many
// attempts a call sends.
func loopTransport(s http.RoundTripper, opts ...resilient.Option) *resilient.Transport {
	return resilient.NewTransport(s, fast(append([]resilient.Option{resilient.WithDedupingServer("api.test"), resilient.WithRetryControl()}, opts...)...)...)
}

// try is what one RoundTrip of a loop sent and got.
type try struct {
	attempts []stubtest.Sent
	deferred string
	key      string
	status   int
}

// sendOnce sends req through tr and reports what went on the wire for it
// (s records every attempt) and the Report's rule. rep is the Report
// req's context carries.
func sendOnce(t *testing.T, tr http.RoundTripper, s *stubtest.Stub, req *http.Request, rep *resilient.Report) try {
	t.Helper()
	before := len(s.Attempts())
	*rep = resilient.Report{}
	resp, err := tr.RoundTrip(req)
	var tr0 try
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tr0.status = resp.StatusCode
	}
	tr0.attempts = s.Attempts()[before:]
	tr0.deferred, tr0.key = rep.Deferred, rep.Key
	return tr0
}

// rewound sets req's body to a new reader of its GetBody, as
// go-retryablehttp does before each try.
func rewound(t *testing.T, req *http.Request) *http.Request {
	t.Helper()
	b, err := req.GetBody()
	require.NoError(t, err)
	req.Body = b
	return req
}

// The same *http.Request re-sent after its call failed retryably (as
// go-retryablehttp and a search client do) continues that call: one
// attempt per RoundTrip, the same key, the loop's count in Retry-Attempt.
func TestLoopSameRequestAfterFailureContinuesTheCall(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := loopTransport(s)
	rep := new(resilient.Report)
	req := stubtest.Post(resilient.ContextWithReport(context.Background(), rep), `{"amount":1}`)
	var tries []try
	for range 3 {
		tries = append(tries, sendOnce(t, tr, s, rewound(t, req), rep))
	}
	require.Len(t, tries[0].attempts, 4, "the first call: the Transport's retries, the loop not yet seen")
	assert.Empty(t, tries[0].deferred)
	for i, tt := range tries[1:] {
		require.Len(t, tt.attempts, 1, "re-send %d: one attempt, the loop drives", i+1)
		assert.Equal(t, "request", tt.deferred)
		assert.Equal(t, tries[0].key, tt.key, "the failed call's key")
		assert.Equal(t, tries[0].key, tt.attempts[0].Header.Get("Idempotency-Key"))
		assert.Equal(t, []string{"4", "5"}[i], tt.attempts[0].Header.Get("Retry-Attempt"), "numbered after the call it continues")
		assert.Equal(t, 503, tt.status, "the server's answer reaches the loop")
	}
}

// A poller that re-sends one request after a success is no loop: the call
// after the success is a call of its own, retried by the Transport.
func TestLoopSameRequestAfterSuccessIsANewCall(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(201), stubtest.ReplyDeduping(503))
	tr := loopTransport(s)
	rep := new(resilient.Report)
	req := stubtest.Post(resilient.ContextWithReport(context.Background(), rep), `{"poll":1}`)
	var tries []try
	for range 2 {
		tries = append(tries, sendOnce(t, tr, s, rewound(t, req), rep))
	}
	assert.Len(t, tries[0].attempts, 1)
	assert.Len(t, tries[1].attempts, 4, "no deferral: the Transport retries")
	assert.Empty(t, tries[1].deferred)
	assert.NotEqual(t, tries[0].key, tries[1].key, "a key of its own")
}

// Two goroutines that each loop over identical requests are two calls:
// neither's re-send is taken for the other's, no key is sent by both.
func TestLoopTwoGoroutinesIdenticalRequestsNeverShareAKey(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := loopTransport(s)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for range 3 {
				req := stubtest.Post(context.Background(), `{"amount":1}`)
				req.Header.Set("X-Goroutine", string(rune('a'+g)))
				resp, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	owner := map[string]string{}
	per := map[string]int{}
	for _, a := range s.Attempts() {
		k, g := a.Header.Get("Idempotency-Key"), a.Header.Get("X-Goroutine")
		require.NotEmpty(t, k)
		if o, ok := owner[k]; ok {
			assert.Equal(t, o, g, "key %s sent by two goroutines", k)
		}
		owner[k] = g
		per[g]++
	}
	// Each goroutine's loop: its first call retried (4) — or, once the
	// other's re-send taught the Transport that this place loops, one
	// attempt — and its two re-sends one attempt each, under keys of
	// their own (identical requests only defer).
	for g, n := range per {
		assert.Contains(t, []int{3, 6}, n, "goroutine %s", g)
	}
	assert.Len(t, owner, 6, "a key per call")
}

// One Header map given to two different POSTs: the second defers (it may
// be the first's retry) but never takes its key (it may be another
// payment).
func TestLoopSharedHeaderMapNeverSharesAKey(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := loopTransport(s)
	rep := new(resilient.Report)
	ctx := resilient.ContextWithReport(context.Background(), rep)
	h := http.Header{"Content-Type": {"application/json"}}
	var tries []try
	for _, body := range []string{`{"pay":1}`, `{"pay":2}`} {
		req := stubtest.Post(ctx, body)
		req.Header = h
		tries = append(tries, sendOnce(t, tr, s, req, rep))
	}
	assert.Len(t, tries[0].attempts, 4)
	require.Len(t, tries[1].attempts, 1, "deferred to the loop it may be")
	assert.Equal(t, "header", tries[1].deferred)
	assert.NotEqual(t, tries[0].key, tries[1].key, "no key for two payments")
	assert.Empty(t, tries[1].attempts[0].Header.Get("Retry-Attempt"), "a first attempt of its own")
}

// A call site learns that it loops when a re-send from it is recognised;
// later calls from it send no retry of the Transport's once they fail. It
// unlearns when a call's first failure is not sent again within five
// minutes. Another call site is not affected.
func TestLoopSiteLearnsAndUnlearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503))
		tr := loopTransport(s)
		rep := new(resilient.Report)
		ctx := resilient.ContextWithReport(context.Background(), rep)
		steps := []struct {
			body  string
			pause time.Duration // before the call
			want  int           // attempts
			rule  string
		}{
			{`{"op":1}`, 0, 4, ""},                               // first call: not yet seen
			{`{"op":1}`, 100 * time.Millisecond, 1, "identical"}, // its loop's re-send: the site loops
			{`{"op":2}`, time.Second, 1, "site"},                 // a new call from the site: the loop retries it
			{`{"op":3}`, 6 * time.Minute, 4, ""},                 // op 2 was never sent again: unlearned
		}
		for i, st := range steps {
			time.Sleep(st.pause)
			got := sendOnce(t, tr, s, stubtest.Post(ctx, st.body), rep) // one line: one call site
			assert.Len(t, got.attempts, st.want, "step %d", i)
			assert.Equal(t, st.rule, got.deferred, "step %d", i)
		}
		// Another site, the same request as op 3: retried as any call.
		other := sendOnce(t, tr, s, stubtest.Post(ctx, `{"op":3}`), rep)
		assert.Len(t, other.attempts, 4)
		assert.Empty(t, other.deferred)
	})
}

// A plain client.Get from a place that never loops keeps every retry, even
// while another place's loop is learned against the same URL.
func TestLoopPlainGetKeepsItsRetries(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503))
	client := &http.Client{Transport: loopTransport(s)}
	get := func() {
		resp, err := client.Get("http://api.test/v1/items")
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	}
	for range 2 { // a loop elsewhere: two tries of one GET
		get()
	}
	require.Len(t, s.Attempts(), 4+1, "the loop's re-send defers")
	var wg sync.WaitGroup
	for range 3 { // handlers, each sending once
		wg.Go(func() {
			resp, err := client.Get("http://api.test/v1/items")
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	assert.Len(t, s.Attempts(), 5+3*4, "every handler's call retried by the Transport")
	resp, err := client.Get("http://api.test/v1/items") // and a plain call from here
	require.NoError(t, err)
	resp.Body.Close()
	assert.Len(t, s.Attempts(), 5+4*4)
}

// A request re-sent after its body was consumed (the loop did not rewind
// it) carries a body from GetBody, as net/http re-sends it bare on a
// kept-alive connection (never the spent one: TestPairedBodiesReused), and
// is not taken to continue the failed call: a key of its own.
func TestLoopReusedConsumedBodyGetsNoSharedKey(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := loopTransport(s)
	rep := new(resilient.Report)
	req := stubtest.Post(resilient.ContextWithReport(context.Background(), rep), `{"amount":1}`)
	var tries []try
	for range 2 { // the second: req.Body as the first call left it
		tries = append(tries, sendOnce(t, tr, s, req, rep))
	}
	first, again := tries[0], tries[1]
	require.Len(t, again.attempts, 1, "deferred to the loop")
	assert.Equal(t, "request", again.deferred)
	assert.NotEqual(t, first.key, again.key)
	assert.Equal(t, `{"amount":1}`, string(again.attempts[0].Body), "a body from GetBody, as net/http re-sends it")
}

// A loop that changes the body between tries of one request: each try is a
// call of its own (a key each), deferred to the loop.
func TestLoopChangedBodyGetsNoSharedKey(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	tr := loopTransport(s)
	rep := new(resilient.Report)
	req := stubtest.Post(resilient.ContextWithReport(context.Background(), rep), `{"try":0}`)
	var tries []try
	for i := range 3 {
		if i > 0 {
			body := `{"try":` + string(rune('0'+i)) + `}`
			req.Body = io.NopCloser(strings.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
			req.ContentLength = int64(len(body))
		}
		tries = append(tries, sendOnce(t, tr, s, req, rep))
	}
	keys := map[string]bool{}
	for i, tt := range tries {
		keys[tt.key] = true
		if i > 0 {
			assert.Len(t, tt.attempts, 1)
			assert.Equal(t, "request", tt.deferred)
		}
	}
	assert.Len(t, keys, 3, "a key per body")
}

// The same request sent at once from two goroutines after its call failed:
// the failed call's key goes to at most one of them, the one in the
// failed call's goroutine.
func TestLoopSameRequestConcurrentlyNeverSharesAKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(req *http.Request) (*http.Response, error) {
			time.Sleep(time.Second) // both in flight at once
			return stubtest.ReplyDeduping(503)(req)
		}
		s := stubtest.New(slow)
		tr := loopTransport(s)
		req, err := http.NewRequest(http.MethodPost, target, http.NoBody)
		require.NoError(t, err)
		send := func() string {
			resp, err := tr.RoundTrip(req)
			if !assert.NoError(t, err) {
				return ""
			}
			resp.Body.Close()
			return stubtest.Wire(resp.Request.Header).Get("Idempotency-Key")
		}
		keys := make([]string, 3)
		var wg sync.WaitGroup
		for i := range 2 {
			if i == 1 {
				wg.Go(func() { keys[2] = send() }) // another goroutine, at once
			}
			keys[i] = send() // one line, one goroutine: the loop
		}
		wg.Wait()
		firstKey := keys[0]
		keys = keys[1:]
		assert.Equal(t, firstKey, keys[0], "the loop's re-send continues its call")
		assert.NotEqual(t, firstKey, keys[1], "another goroutine's call is its own")
		assert.NotEqual(t, keys[0], keys[1])
	})
}

// The outcome Event says which rule deferred the call, as the Report does.
func TestLoopEventsNameTheRule(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503))
	var mu sync.Mutex
	var rules []string
	tr := loopTransport(s, resilient.WithObserver(func(_ context.Context, e resilient.Event) {
		if e.Kind == resilient.EventOutcome {
			mu.Lock()
			rules = append(rules, e.Summary.Deferred)
			mu.Unlock()
		}
	}))
	req := stubtest.Post(context.Background(), `{"amount":1}`)
	for range 2 {
		resp, err := tr.RoundTrip(rewound(t, req))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []string{"", "request"}, rules)
}

// WithOuterRetries' scopes: false for a host keeps the Transport's retries
// for a loop's re-send to it; ContextWithOuterRetries(true) gives one call
// one attempt whatever the options say.
func TestLoopScopes(t *testing.T) {
	t.Run("WithOuterRetries(false, host)", func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503))
		tr := loopTransport(s, resilient.WithOuterRetries(false, "api.test"))
		rep := new(resilient.Report)
		req := stubtest.Post(resilient.ContextWithReport(context.Background(), rep), `{"amount":1}`)
		for range 2 {
			got := sendOnce(t, tr, s, rewound(t, req), rep)
			assert.Len(t, got.attempts, 4)
			assert.Empty(t, got.deferred)
		}
	})
	t.Run("WithOuterRetries(true, other host)", func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503))
		tr := loopTransport(s, resilient.WithOuterRetries(true, "other.test:443"))
		rep := new(resilient.Report)
		got := sendOnce(t, tr, s, stubtest.Post(resilient.ContextWithReport(context.Background(), rep), `{}`), rep)
		assert.Len(t, got.attempts, 4, "the declaration is for another host")
	})
	t.Run("ContextWithOuterRetries(true)", func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503))
		tr := loopTransport(s)
		rep := new(resilient.Report)
		ctx := resilient.ContextWithOuterRetries(resilient.ContextWithReport(context.Background(), rep), true)
		got := sendOnce(t, tr, s, stubtest.Post(ctx, `{}`), rep)
		assert.Len(t, got.attempts, 1)
		assert.Equal(t, "option", got.deferred)
	})
	t.Run("ContextWithOuterRetries(false) over WithOuterRetries(true)", func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503))
		tr := loopTransport(s, resilient.WithOuterRetries(true))
		rep := new(resilient.Report)
		ctx := resilient.ContextWithOuterRetries(resilient.ContextWithReport(context.Background(), rep), false)
		got := sendOnce(t, tr, s, stubtest.Post(ctx, `{}`), rep)
		assert.Len(t, got.attempts, 4)
	})
}
