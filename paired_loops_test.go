package resilient_test

// Paired tests of "never worse inside any retry loop": a hand-written loop
// over a bare client and the same loop over a wrapped one. The wrapped side
// must send no more requests, wait no longer (the bubble's fake clock), give
// each logical call of an unsafe method one key (or keep the caller's), and
// end with the same status or error class. Every case runs in a synctest
// bubble over an in-memory network (pnPipeNet, paired_nethttp_cancel_test.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failKind is how the server fails a request.
type failKind int

const (
	fail503   failKind = iota // 503
	fail500                   // 500
	fail429                   // 429 with Retry-After: 2
	failReset                 // the connection closes with no response

	errOnlySkip failKind = 100 // lpErrOnly skips every failure with a response
)

// loopScript is the server's behaviour: the first fails requests of each
// logical call (X-Call) fail by kind, the rest succeed.
type loopScript struct {
	kind  failKind
	fails int
}

// loopObs is one side's observation.
type loopObs struct {
	requests int
	keys     map[string]map[string]bool // logical call -> keys seen
	appKeys  int                        // requests whose key is the app's (app-…)
	outcomes []string
	perCall  []int           // requests per logical call
	took     []time.Duration // each logical call's time
	elapsed  time.Duration
}

// loopShape is a hand-written retry loop: it makes logical call n on c.
type loopShape func(ctx context.Context, c *http.Client, url string, n int) (*http.Response, error)

const loopTries = 4

// lpRetryable is what most loops retry: an error, a 5xx or a 429.
func lpRetryable(resp *http.Response, err error) bool {
	return err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
}

func lpDrain(resp *http.Response) {
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// lpBackoffOf is the loop's wait before try i+1.
func lpBackoffOf(i int) time.Duration { return 100 * time.Millisecond << i }

// loopOutcome is a response's status or an error's class.
func loopOutcome(resp *http.Response, err error) string {
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return "deadline"
		case errors.Is(err, context.Canceled):
			return "canceled"
		}
		return "error"
	}
	lpDrain(resp)
	return strconv.Itoa(resp.StatusCode)
}

// loopBody is logical call n's body.
func loopBody(n int, same bool) string {
	if same {
		return `{"amount":100}`
	}
	return fmt.Sprintf(`{"amount":%d}`, 100+n)
}

// Shapes.

// lpNewEachTry builds a new request each try, with a body from newBody.
func lpNewEachTry(method string, newBody func(n int) io.Reader, sleep bool, retry func(*http.Response, error) bool) loopShape {
	return func(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
		for i := range loopTries {
			req, rerr := http.NewRequestWithContext(ctx, method, url, newBody(n))
			if rerr != nil {
				return nil, rerr
			}
			req.Header.Set("X-Call", strconv.Itoa(n))
			resp, err = c.Do(req)
			if !retry(resp, err) || i == loopTries-1 {
				return resp, err
			}
			lpDrain(resp)
			if sleep {
				time.Sleep(lpBackoffOf(i))
			}
		}
		return resp, err
	}
}

func lpBytesBody(same bool) func(int) io.Reader {
	return func(n int) io.Reader { return bytes.NewReader([]byte(loopBody(n, same))) }
}

// lpNoGetBody builds each try's request with a body net/http cannot rewind.
func lpNoGetBody(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
	for i := range loopTries {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(loopBody(n, true)))
		req.GetBody = nil
		req.Header.Set("X-Call", strconv.Itoa(n))
		resp, err = c.Do(req)
		if !lpRetryable(resp, err) || i == loopTries-1 {
			return resp, err
		}
		lpDrain(resp)
		time.Sleep(lpBackoffOf(i))
	}
	return resp, err
}

// lpReuseEachTry builds one request and sends it again each try, through
// next: the same request rewound, a Clone, or WithContext (perTry: a fresh
// context.WithTimeout per try).
func lpReuseEachTry(next func(ctx context.Context, req *http.Request) *http.Request, perTry bool) loopShape {
	return func(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(loopBody(n, true))))
		req.Header.Set("X-Call", strconv.Itoa(n))
		for i := range loopTries {
			tctx, cancel := ctx, context.CancelFunc(func() {})
			if perTry {
				tctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			}
			r := next(tctx, req)
			if i > 0 {
				b, _ := req.GetBody()
				r.Body = b
			}
			resp, err = c.Do(r)
			if !lpRetryable(resp, err) || i == loopTries-1 {
				if perTry && resp != nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					resp.Body = io.NopCloser(bytes.NewReader(b))
				}
				cancel()
				return resp, err
			}
			lpDrain(resp)
			cancel()
			time.Sleep(lpBackoffOf(i))
		}
		return resp, err
	}
}

// lpAttemptHeader adds the loop's own attempt count, and, with key, its own
// idempotency key: "per" a new one each try, "same" one per call.
func lpAttemptHeader(header, key string) loopShape {
	return func(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
		for i := range loopTries {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(loopBody(n, true)))
			req.Header.Set("X-Call", strconv.Itoa(n))
			if header != "" {
				req.Header.Set(header, strconv.Itoa(i))
			}
			switch key {
			case "per":
				req.Header.Set("Idempotency-Key", fmt.Sprintf("app-%d-%d", n, i))
			case "same":
				req.Header.Set("Idempotency-Key", fmt.Sprintf("app-%d", n))
			}
			resp, err = c.Do(req)
			if !lpRetryable(resp, err) || i == loopTries-1 {
				return resp, err
			}
			lpDrain(resp)
			time.Sleep(lpBackoffOf(i))
		}
		return resp, err
	}
}

// retryAfterLoop retries 429 and 503 only, waiting what Retry-After says
// (else its backoff), with a timer and the context.
func retryAfterLoop(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
	for i := range loopTries {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(loopBody(n, true)))
		req.Header.Set("X-Call", strconv.Itoa(n))
		resp, err = c.Do(req)
		if err != nil || (resp.StatusCode != 429 && resp.StatusCode != 503) || i == loopTries-1 {
			return resp, err
		}
		wait := lpBackoffOf(i)
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
			wait = time.Duration(s) * time.Second
		}
		lpDrain(resp)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	return resp, err
}

// roundTripLoop calls RoundTrip directly, the same request each try.
func roundTripLoop(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(loopBody(n, true))))
	req.Header.Set("X-Call", strconv.Itoa(n))
	for i := range loopTries {
		if i > 0 {
			req.Body, _ = req.GetBody()
		}
		resp, err = c.Transport.RoundTrip(req)
		if !lpRetryable(resp, err) || i == loopTries-1 {
			return resp, err
		}
		lpDrain(resp)
		time.Sleep(lpBackoffOf(i))
	}
	return resp, err
}

func lpErrOnly(resp *http.Response, err error) bool { return err != nil }
func lpOnly5xx(resp *http.Response, err error) bool { return err == nil && resp.StatusCode >= 500 }

// loopCase is one shape against one script.
type loopCase struct {
	name   string
	shape  loopShape
	script loopScript
	calls  int  // logical calls
	conc   bool // the calls run at once, one goroutine each
	keyed  bool // an unsafe method: one key per logical call expected
	appKey bool // the loop sets its own key: every request must carry it
	// sameReq: the loop sends one *http.Request again (the request rule).
	sameReq bool
	// plain: the loop does not retry the script's failure.
	plain bool
}

// runLoopSide runs tc on one side in a bubble and returns what it saw.
func runLoopSide(t *testing.T, tc loopCase, wrap bool) loopObs {
	var obs loopObs
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		obs.keys = map[string]map[string]bool{}
		obs.perCall = make([]int, tc.calls)
		obs.took = make([]time.Duration, tc.calls)
		n := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			call := r.Header.Get("X-Call")
			key := r.Header.Get("Idempotency-Key")
			mu.Lock()
			obs.requests++
			if c, err := strconv.Atoi(call); err == nil && c < len(obs.perCall) {
				obs.perCall[c]++
			}
			seen[call]++
			i := seen[call]
			if obs.keys[call] == nil {
				obs.keys[call] = map[string]bool{}
			}
			if key != "" {
				obs.keys[call][key] = true
			}
			if strings.HasPrefix(key, "app-") {
				obs.appKeys++
			}
			mu.Unlock()
			if i > tc.script.fails {
				w.WriteHeader(http.StatusOK)
				return
			}
			switch tc.script.kind {
			case fail503:
				w.WriteHeader(http.StatusServiceUnavailable)
			case fail500:
				w.WriteHeader(http.StatusInternalServerError)
			case fail429:
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
			case failReset:
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					c.Close()
				}
			}
		})
		defer n.close()
		c := &http.Client{Transport: n.tr}
		if wrap {
			c = resilient.Wrap(c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		obs.outcomes = make([]string, tc.calls)
		var wg sync.WaitGroup
		for i := range tc.calls {
			run := func() {
				t0 := time.Now()
				obs.outcomes[i] = loopOutcome(tc.shape(ctx, c, "http://api.test/v1/charges", i))
				obs.took[i] = time.Since(t0)
			}
			if tc.conc {
				wg.Go(run)
			} else {
				run()
			}
		}
		wg.Wait()
		obs.elapsed = time.Since(start)
	})
	return obs
}

func loopCases() []loopCase {
	post := func(sleep bool) loopShape {
		return lpNewEachTry(http.MethodPost, lpBytesBody(true), sleep, lpRetryable)
	}
	rewind := func(_ context.Context, req *http.Request) *http.Request { return req }
	clone := func(ctx context.Context, req *http.Request) *http.Request { return req.Clone(ctx) }
	withCtx := func(ctx context.Context, req *http.Request) *http.Request { return req.WithContext(ctx) }
	var cs []loopCase
	scripts := []struct {
		name string
		s    loopScript
	}{
		{"503 once", loopScript{fail503, 1}},
		{"503 always", loopScript{fail503, 100}},
		{"500 twice", loopScript{fail500, 2}},
		{"429 once", loopScript{fail429, 1}},
		{"reset once", loopScript{failReset, 1}},
		{"ok", loopScript{fail503, 0}},
	}
	shapes := []struct {
		name    string
		shape   loopShape
		keyed   bool
		appKey  bool
		sameReq bool
		skip    failKind // a failure the loop does not retry (-1: none)
	}{
		{"new request each try, sleeps", post(true), true, false, false, -1},
		{"new request each try, no sleep", post(false), true, false, false, -1},
		{"new GET each try", lpNewEachTry(http.MethodGet, func(int) io.Reader { return nil }, true, lpRetryable), false, false, false, -1},
		{"new PUT each try", lpNewEachTry(http.MethodPut, lpBytesBody(true), true, lpRetryable), false, false, false, -1},
		{"new request, GetBody nil", lpNoGetBody, true, false, false, -1},
		{"same request rewound", lpReuseEachTry(rewind, false), true, false, true, -1},
		{"req.Clone each try", lpReuseEachTry(clone, false), true, false, false, -1},
		{"req.Clone, WithTimeout per try", lpReuseEachTry(clone, true), true, false, false, -1},
		{"req.WithContext, WithTimeout per try", lpReuseEachTry(withCtx, true), true, false, false, -1},
		{"retries on err only", lpNewEachTry(http.MethodPost, lpBytesBody(true), true, lpErrOnly), true, false, false, errOnlySkip},
		{"retries on 5xx only", lpNewEachTry(http.MethodPost, lpBytesBody(true), true, lpOnly5xx), true, false, false, fail429},
		{"Retry-After with a timer", retryAfterLoop, true, false, false, -1},
		{"own X-Retry-Count", lpAttemptHeader("X-Retry-Count", ""), true, false, false, -1},
		{"own Retry-Attempt", lpAttemptHeader("Retry-Attempt", ""), true, false, false, -1},
		{"own key per try", lpAttemptHeader("", "per"), false, true, false, -1},
		{"own key per call", lpAttemptHeader("Retry-Attempt", "same"), true, true, false, -1},
		{"RoundTrip directly", roundTripLoop, true, false, true, -1},
	}
	for _, sh := range shapes {
		for _, sc := range scripts {
			plain := sh.skip == sc.s.kind && sc.s.fails > 0
			if sh.skip == errOnlySkip {
				plain = sc.s.kind != failReset && sc.s.fails > 0
			}
			cs = append(cs, loopCase{name: sh.name + "/" + sc.name, shape: sh.shape, script: sc.s, calls: 2,
				keyed: sh.keyed, appKey: sh.appKey, sameReq: sh.sameReq, plain: plain})
		}
	}
	for _, same := range []bool{true, false} {
		for _, sc := range scripts[:3] {
			cs = append(cs, loopCase{
				name:  fmt.Sprintf("3 goroutines, same body %v/%s", same, sc.name),
				shape: lpNewEachTry(http.MethodPost, lpBytesBody(same), true, lpRetryable), script: sc.s, calls: 3, conc: true, keyed: true,
			})
		}
	}
	get := lpNewEachTry(http.MethodGet, func(int) io.Reader { return nil }, true, lpRetryable)
	for _, n := range []int{3, 6} {
		cs = append(cs, loopCase{name: fmt.Sprintf("%d goroutines, GET/503 always", n), shape: get,
			script: loopScript{fail503, 100}, calls: n, conc: true})
	}
	return cs
}

// firstCallExtra is what doc.go ("Loops without marks") allows a loop not
// yet seen: its first call is retried by the Transport until its re-send is
// recognised, at most the Transport's retries of one call.
const firstCallExtra = 3 // the default 4 attempts, less the first

// TestPairedLoopsNeverWorse holds each loop shape to the principle, less
// the first call's documented cost: that call may send firstCallExtra more
// and wait the Transport's backoff. Every later call of a sequential loop
// sends no more and waits no longer than the loop alone. Keys: the loop's
// own is on every request; no key is ever on two logical calls; a loop that
// sends one *http.Request again gets one key per call.
func TestPairedLoopsNeverWorse(t *testing.T) {
	for _, tc := range loopCases() {
		t.Run(tc.name, func(t *testing.T) {
			bare := runLoopSide(t, tc, false)
			wrapped := runLoopSide(t, tc, true)
			if tc.plain {
				// The loop does not retry this failure: to the Transport it
				// is a plain call, retried as any; never a worse outcome.
				for i, o := range wrapped.outcomes {
					assert.Contains(t, []string{bare.outcomes[i], "200"}, o, "call %d", i)
				}
				assert.LessOrEqual(t, wrapped.requests, bare.requests+firstCallExtra*tc.calls, "requests on the wire")
			} else {
				assert.Equal(t, bare.outcomes, wrapped.outcomes, "final status or error class")
				if tc.conc {
					assert.LessOrEqual(t, wrapped.requests, bare.requests+firstCallExtra, "requests on the wire")
				} else {
					assert.LessOrEqual(t, wrapped.perCall[0], bare.perCall[0]+firstCallExtra, "requests of the first call")
					for i := 1; i < tc.calls; i++ {
						if tc.script.fails <= firstCallExtra {
							// The Transport's retries end each call before the
							// loop re-sends: the loop is never seen, every call
							// is a first.
							assert.LessOrEqual(t, wrapped.perCall[i], bare.perCall[i]+firstCallExtra, "requests of call %d", i)
							continue
						}
						assert.LessOrEqual(t, wrapped.perCall[i], bare.perCall[i], "requests of call %d", i)
						assert.LessOrEqual(t, wrapped.took[i], bare.took[i], "time of call %d in the bubble", i)
					}
				}
			}
			if tc.appKey {
				assert.Equal(t, wrapped.requests, wrapped.appKeys, "no request without the app's key")
			}
			owner := map[string]string{}
			for call, keys := range wrapped.keys {
				for k := range keys {
					if o, ok := owner[k]; ok {
						t.Errorf("key %s on calls %s and %s", k, o, call)
					}
					owner[k] = call
				}
				if tc.keyed && tc.sameReq {
					assert.LessOrEqual(t, len(keys), 1, "keys of call %s: %v", call, keys)
				}
			}
			require.Len(t, wrapped.keys, tc.calls)
		})
	}
}

// lpSlowLoop waits wait between tries, longer than a minute: backoff
// libraries cap their interval near a minute and add jitter (cenkalti's
// ExponentialBackOff: MaxInterval 60 s, RandomizationFactor 0.5).
func lpSlowLoop(method, key string, wait time.Duration) loopShape {
	return func(ctx context.Context, c *http.Client, url string, n int) (resp *http.Response, err error) {
		for i := range loopTries {
			var body io.Reader
			if method != http.MethodGet {
				body = strings.NewReader(loopBody(n, true))
			}
			req, _ := http.NewRequestWithContext(ctx, method, url, body)
			req.Header.Set("X-Call", strconv.Itoa(n))
			if key != "" {
				req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", key, n))
			}
			resp, err = c.Do(req)
			if !lpRetryable(resp, err) || i == loopTries-1 {
				return resp, err
			}
			lpDrain(resp)
			time.Sleep(wait)
		}
		return resp, err
	}
}

// A loop that waits more than a minute between tries is still one loop:
// each of its tries must not become a new call the Transport retries.
func TestPairedLoopsSlowLoop(t *testing.T) {
	for _, tc := range []loopCase{
		{name: "GET, 65 s between tries", shape: lpSlowLoop(http.MethodGet, "", 65*time.Second), script: loopScript{fail503, 100}, calls: 2},
		{name: "GET, 90 s between tries", shape: lpSlowLoop(http.MethodGet, "", 90*time.Second), script: loopScript{fail500, 100}, calls: 2},
		{name: "keyed POST, 90 s between tries", shape: lpSlowLoop(http.MethodPost, "app", 90*time.Second), script: loopScript{fail503, 100}, calls: 2, appKey: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bare := runLoopSide(t, tc, false)
			wrapped := runLoopSide(t, tc, true)
			assert.Equal(t, bare.outcomes, wrapped.outcomes, "final status or error class")
			assert.LessOrEqual(t, wrapped.perCall[0], bare.perCall[0]+firstCallExtra, "requests of the first call")
			assert.LessOrEqual(t, wrapped.perCall[1], bare.perCall[1], "requests of the second call")
			assert.LessOrEqual(t, wrapped.took[1], bare.took[1], "time of the second call in the bubble")
			if tc.appKey {
				assert.Equal(t, wrapped.requests, wrapped.appKeys, "no request without the app's key")
			}
		})
	}
}
