package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

// The harness runs a client (a vendor SDK, or a hand-written loop) against
// an in-process fakeserver, inside a synctest bubble: every SDK's sleeps,
// resilient's and the server's Retry-After run in virtual time, so a
// scenario with Retry-After: 1 takes no wall time and its duration is
// exact. Nothing listens on a socket.

// callID marks a request's context with the index of the SDK call it
// belongs to, so that the wire can tell two identical calls apart.
type callID struct{}

// seen is one request that reached the server.
type seen struct {
	call    int
	key     string // Idempotency-Key
	attempt string // Retry-Attempt
	at      time.Time
	// asked: the delay the server named in its answer (resilient.ServerDelay).
	asked time.Duration
}

// wire stands between the client (resilient, or the SDK alone) and the
// fakeserver and records every request that reaches the server. It also
// adapts three things the fakeserver does not model, server side: a
// form-encoded body (stripe-go) is read as the equivalent JSON object, and
// an AWS signature (new on every attempt) is reduced to its access key, the
// principal the server dedupes under; and a failure answered to stripe-go
// carries the error body Stripe's API sends (stripeBody), which stripe-go
// reads to decide whether to retry.
type wire struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []seen
	// bad: what the server would reject of a request's body or signature
	// (checkBody; checkSigV4 for AWS).
	bad []string
}

// awsCheck verifies the DynamoDB client's signatures.
var awsCheck = checkSigV4("AKIDEXAMPLE", "secret")

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	n, _ := req.Context().Value(callID{}).(int)
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	bad := checkBody(req, body)
	if bad == nil && strings.HasPrefix(req.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
		bad = awsCheck(req, body)
	}
	w.mu.Lock()
	if bad != nil {
		w.bad = append(w.bad, bad.Error())
	}
	// As a server reads them: names are case-insensitive (resilient sends
	// its key as "idempotency-key").
	h := make(http.Header, len(req.Header))
	for k, v := range req.Header {
		h[http.CanonicalHeaderKey(k)] = v
	}
	w.reqs = append(w.reqs, seen{call: n, key: h.Get("Idempotency-Key"), attempt: h.Get("Retry-Attempt"), at: time.Now()})
	i := len(w.reqs) - 1
	w.mu.Unlock()
	// The in-process transport tells the request's trace it wrote the
	// request, as a socket's does.
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "AWS4-HMAC-SHA256") {
		cred, _, _ := strings.Cut(auth, ",")
		r.Header.Set("Authorization", cred)
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") && r.Body != nil {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		for k, vs := range form {
			if i, err := strconv.ParseInt(vs[0], 10, 64); err == nil {
				obj[k] = i
			} else {
				obj[k] = vs[0]
			}
		}
		j, _ := json.Marshal(obj)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(j)), int64(len(j))
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.next.RoundTrip(r)
	if err == nil {
		w.mu.Lock()
		w.reqs[i].asked = resilient.ServerDelay(resp.Header, time.Now())
		w.mu.Unlock()
	}
	if err == nil && resp.StatusCode >= 400 && req.Header.Get("X-Stripe-Client-User-Agent") != "" {
		stripeBody(resp)
	}
	return resp, err
}

// stripeCodeHeader, on a scripted 429, is the Stripe error code its body
// carries (rate_limit by default).
const stripeCodeHeader = "X-Test-Stripe-Code"

// stripeBody replaces the fakeserver's problem+json body of a failure with
// the one Stripe's API sends: an api_error for a 5xx, a rate_limit error
// for a 429. stripe-go retries neither (its Error.canRetry is false but
// for a lock timeout); it retries network errors, 409s and what
// Stripe-Should-Retry: true says.
func stripeBody(resp *http.Response) {
	b := `{"error":{"type":"api_error","message":"An unknown error occurred."}}`
	if resp.StatusCode == http.StatusTooManyRequests {
		code := resp.Header.Get(stripeCodeHeader)
		if code == "" {
			code = "rate_limit"
		}
		b = `{"error":{"type":"invalid_request_error","code":"` + code + `","message":"Too many requests."}}`
	}
	resp.Header.Del(stripeCodeHeader)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
}

// scenario is a server's behaviour on the API route.
type scenario struct {
	name   string
	script []fakeserver.Fault
	calls  int // SDK calls at once (default 1)
}

// always is a status on every request, with extra headers.
func always(status int, retryAfter time.Duration, headers map[string]string) []fakeserver.Fault {
	return []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: status, RetryAfter: fakeserver.Duration(retryAfter), Headers: headers, Count: 1000}}
}

// scenarios are the rows of the matrix (issue 24).
var scenarios = []scenario{
	{name: "always 429, Retry-After: 1", script: always(429, time.Second, nil)},
	{name: "always 429, Retry-After-Ms: 200", script: always(429, 0, map[string]string{"Retry-After-Ms": "200"})},
	{name: "always 500", script: always(500, 0, nil)},
	{name: "always 503, X-Amz-Retry-After: 1500", script: always(503, 0, map[string]string{"X-Amz-Retry-After": "1500"})},
	{name: "always 503, Retry-After: 1", script: always(503, time.Second, nil)},
	{name: "429 twice, Retry-After-Ms: 300, then 201", script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 429, Headers: map[string]string{"Retry-After-Ms": "300"}, Count: 2}}},
	{name: "500 twice, then 201", script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 500, Count: 2}}},
	{name: "response lost once, server dedupes", script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}}},
	{name: "plain success"},
	{name: "two identical calls at once, each 500 once", calls: 2, script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 500, Count: 2}}},
}

// client is one way to make the SDK call: do makes call i over hc against
// base (the server's URL).
type client struct {
	name string
	do   func(ctx context.Context, hc *http.Client, base string) error
}

// setup is how the client's *http.Client is made from the wire.
type setup struct {
	name string
	make func(rt http.RoundTripper) *http.Client
}

// alone is the SDK over a bare client.
var alone = setup{"alone", func(rt http.RoundTripper) *http.Client { return &http.Client{Transport: rt} }}

// wrapped returns a setup that wraps a bare client with resilient.
func wrapped(name string, opts ...resilient.Option) setup {
	return setup{name, func(rt http.RoundTripper) *http.Client {
		return resilient.Wrap(&http.Client{Transport: rt}, opts...)
	}}
}

// result is what one run of a scenario showed.
type result struct {
	attempts int      // requests that reached the server
	bad      []string // requests the server would reject (wire.bad)
	// asked: the delays the server named, added up over the answers a
	// try of the same call followed; early: the tries sent sooner after
	// an answer than it asked.
	asked     time.Duration
	early     []string
	keys      []int    // distinct Idempotency-Key values per call ("" counts as none)
	sharedKey bool     // two calls sent a same key
	attempt   []string // Retry-Attempt values, in order
	effects   int      // effects the server applied
	ok        int      // calls that returned no error
	took      time.Duration
	// inTransport is the (virtual) time spent in the client's Transport:
	// its own waits, the server answering at once.
	inTransport time.Duration
}

// timedRT adds up the time spent in RoundTrip.
type timedRT struct {
	next  http.RoundTripper
	total atomic.Int64
}

func (t *timedRT) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	t.total.Add(int64(time.Since(start)))
	return resp, err
}

// run runs sc with c over st in a fresh server, in a synctest bubble.
func run(t *testing.T, c client, st setup, sc scenario) result {
	t.Helper()
	var res result
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/{c}", Script: sc.script}))
		defer srv.Close()
		w := &wire{next: srv.Transport()}
		hc := st.make(w)
		tt := &timedRT{next: hc.Transport}
		hc.Transport = tt
		calls := max(sc.calls, 1)
		errs := make([]error, calls)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callID{}, i), 5*time.Minute)
				defer cancel()
				errs[i] = c.do(ctx, hc, "http://fake.test")
			})
		}
		wg.Wait()
		res.took = time.Since(start)
		res.inTransport = time.Duration(tt.total.Load())
		for _, err := range errs {
			if err == nil {
				res.ok++
			}
		}
		res.effects = srv.TotalEffects()
		res.attempts = len(w.reqs)
		res.bad = w.bad
		res.asked, res.early = delays(w.reqs)
		owner := map[string]int{}
		for i := range calls {
			var keys []string
			for _, r := range w.reqs {
				res.attempt = append(res.attempt, r.attempt)
				if r.call != i || r.key == "" {
					continue
				}
				if o, ok := owner[r.key]; ok && o != i {
					res.sharedKey = true
				}
				owner[r.key] = i
				if !slices.Contains(keys, r.key) {
					keys = append(keys, r.key)
				}
			}
			res.keys = append(res.keys, len(keys))
		}
		res.attempt = res.attempt[:len(w.reqs)]
	})
	return res
}

// retryAfterMax is the Transport's default WithRetryAfterMax: a longer
// delay is not waited.
const retryAfterMax = 30 * time.Second

// delays returns, over the requests of each call in order, the delays the
// server asked for before a next try (added up), and the tries sent
// sooner than the answer before them asked.
func delays(reqs []seen) (asked time.Duration, early []string) {
	last := map[int]seen{}
	for i, r := range reqs {
		if p, ok := last[r.call]; ok && p.asked > 0 && p.asked <= retryAfterMax {
			asked += p.asked
			if gap := r.at.Sub(p.at); gap < p.asked {
				early = append(early, fmt.Sprintf("request %d of call %d: %v after an answer that asked %v", i, r.call, gap, p.asked))
			}
		}
		last[r.call] = r
	}
	return asked, early
}
