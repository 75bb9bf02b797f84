package e2e

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnknownOutcomeIsNotLost scripts, over loopback, the sequences behind
// the fault matrix's "told failed but its effect exists" violations: an
// attempt commits the effect and its response is lost, and what the client
// sees last is an answer that says nothing about the effect (a 429, or the
// caller's own cancellation). The oracle of the package doc holds for one
// operation: since the effect exists, the caller must be told success or
// unknown — an *Error with Unknown, or a final response whose Report says
// Unknown — and the Store must keep the operation Pending, so that it is
// resolved (resumed with its key) rather than forgotten.
func TestUnknownOutcomeIsNotLost(t *testing.T) {
	lost := fakeserver.Fault{Kind: fakeserver.FaultLostResponse}
	tooMany := fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: http.StatusTooManyRequests, Headers: map[string]string{"Retry-After": "0"}}
	cases := []struct {
		name string
		// warm sends one healthy request first, so that the operation's
		// first attempt goes out on a reused keep-alive connection.
		warm        bool
		script      []fakeserver.Fault
		maxAttempts int
		// cancelInWait cancels the caller's context as the Transport starts
		// its wait after the 429 (from its EventRetry), so that the
		// cancellation lands in the wait however slow the machine is.
		cancelInWait bool
	}{
		{
			// The 429s are answered before the idempotency layer, as a rate
			// limiter in front of an API does; the commit of attempt 0 stays.
			name:        "lost response, then 429 until the attempts run out",
			script:      []fakeserver.Fault{lost, tooMany, tooMany, tooMany},
			maxAttempts: 4,
		},
		{
			name: "lost response, then 429 Retry-After 1, caller cancels during the wait",
			script: []fakeserver.Fault{lost, {Kind: fakeserver.FaultStatus, Status: http.StatusTooManyRequests,
				RetryAfter: fakeserver.Duration(time.Second)}},
			maxAttempts:  4,
			cancelInWait: true,
		},
		{
			// net/http re-sends a keyed request by itself when a reused
			// connection dies before the response; the SDK sees one attempt,
			// answered 429, the server saw two, the first one committed.
			name:        "lost response on a reused connection, silently re-sent by net/http, then 429",
			warm:        true,
			script:      []fakeserver.Fault{{Kind: fakeserver.FaultNone}, lost, tooMany},
			maxAttempts: 1,
		},
		{
			name:        "same, with attempts left: 429 on every later attempt",
			warm:        true,
			script:      []fakeserver.Fault{{Kind: fakeserver.FaultNone}, lost, tooMany, tooMany, tooMany, tooMany},
			maxAttempts: 4,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, url := startAPI(t, fakeserver.Scenario{}, nil)
			require.NoError(t, srv.Enqueue("POST /v1/charges", c.script...))
			store := persist.NewMemory()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			observe := func(_ context.Context, e resilient.Event) {
				if c.cancelInWait && e.Kind == resilient.EventRetry && e.Attempt.StatusCode == http.StatusTooManyRequests {
					cancel()
				}
			}
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: resilient.NewTransport(base, append(retrying(),
				resilient.WithMaxAttempts(c.maxAttempts), resilient.WithStore(store), resilient.WithObserver(observe))...)}
			if c.warm {
				resp, err := client.Post(url+"/v1/charges", "application/json", strings.NewReader(`{"warm":true}`))
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Equal(t, http.StatusCreated, resp.StatusCode)
			}

			var rep resilient.Report
			ctx = resilient.ContextWithReport(resilient.ContextWithOperation(ctx, "charge:1"), &rep)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/charges", strings.NewReader(chargeBody(1)))
			require.NoError(t, err)
			resp, doErr := client.Do(req)
			r := result{op: 1, key: rep.Key, err: doErr, report: rep}
			if resp != nil {
				r.status = resp.StatusCode
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			t.Logf("caller saw: %s; server saw %d requests", describe(r), srv.Stats().Requests)
			require.Equal(t, 1, srv.Effects(rep.Key), "precondition: the first attempt committed the effect")

			told := "a final response"
			if doErr != nil {
				told = "an error"
				var re *resilient.Error
				require.ErrorAs(t, doErr, &re)
				assert.True(t, re.Unknown, "the effect exists but the error says it was not applied (Error.Unknown false)")
			} else if resp.StatusCode >= 300 {
				assert.True(t, rep.Unknown, "the effect exists, the final status %d says nothing about it, and Report.Unknown is false", resp.StatusCode)
			}
			if doErr == nil && resp.StatusCode < 300 {
				return // told success: nothing left to resolve
			}
			pending, err := store.Pending(context.Background())
			require.NoError(t, err)
			if assert.Len(t, pending, 1, "the effect exists and the caller got %s that does not say so: the operation must stay Pending in the Store, not be marked Done", told) {
				assert.Equal(t, rep.Key, pending[0].Key)
			}
		})
	}
}

// TestResentAttemptRefusedIsUnknown: the operation's first attempt goes out
// on a reused keep-alive connection; the server commits the effect, closes
// its listener and drops the connection. net/http re-sends the keyed request
// by itself, its dial is refused, and the SDK sees only "connection refused",
// which it takes for proof that nothing was sent. The effect exists, so the
// caller must be told Unknown.
func TestResentAttemptRefusedIsUnknown(t *testing.T) {
	fs := fakeserver.NewUnstarted()
	defer fs.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var requests atomic.Int32
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) != 2 {
			fs.Handler().ServeHTTP(w, r)
			return
		}
		fs.Handler().ServeHTTP(httptest.NewRecorder(), r) // the effect is committed
		ln.Close()                                        // the server goes away…
		conn, _, err := w.(http.Hijacker).Hijack()        // …and its answer with it
		if err == nil {
			conn.Close()
		}
	})}
	var serving sync.WaitGroup
	serving.Go(func() { _ = srv.Serve(ln) })
	defer serving.Wait()
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	base := &http.Transport{}
	defer base.CloseIdleConnections()
	store := persist.NewMemory()
	client := &http.Client{Transport: resilient.NewTransport(base, append(retrying(),
		resilient.WithMaxAttempts(1), resilient.WithStore(store))...)}
	warm, err := client.Post(url+"/v1/charges", "application/json", strings.NewReader(`{"warm":true}`))
	require.NoError(t, err)
	io.Copy(io.Discard, warm.Body)
	warm.Body.Close()

	var rep resilient.Report
	ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), "charge:1"), &rep)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/charges", strings.NewReader(chargeBody(1)))
	require.NoError(t, err)
	resp, err := client.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	t.Logf("caller saw: %s; server saw %d requests", describe(result{key: rep.Key, err: err, report: rep}), requests.Load())
	require.Equal(t, 1, fs.Effects(rep.Key), "precondition: the attempt committed the effect")
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.True(t, re.Unknown, "the effect exists but the error says nothing was sent (Error.Unknown false, category %s)", re.Category)
	pending, err := store.Pending(context.Background())
	require.NoError(t, err)
	assert.Len(t, pending, 1, "the operation must stay Pending in the Store")
}
