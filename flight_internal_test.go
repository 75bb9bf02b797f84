package resilient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/loops"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flightCallers is how many goroutines call one operation at once.
const flightCallers = 64

// slowFirst is a deduping fake server whose first request on
// POST /v1/charges takes d before it executes; the others are served at once.
func slowFirst(d time.Duration, opts ...fakeserver.Option) *fakeserver.Server {
	opts = append(opts, fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/charges",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(d)}},
	}))
	return fakeserver.NewUnstarted(opts...)
}

// slowAll is a deduping fake server whose every request on
// POST /v1/charges takes d.
func slowAll(d time.Duration) *fakeserver.Server {
	return fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{
		Match: "POST /v1/charges",
		Mix:   []fakeserver.Fault{{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(d), Probability: 1}},
	}))
}

// keyedBy is how a test's callers name their one operation.
type keyedBy struct {
	name string
	opts []Option
	req  func(ctx context.Context) *http.Request
}

func keyedWays() []keyedBy {
	post := func(ctx context.Context) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/charges", strings.NewReader(`{"amount":42}`))
		return req
	}
	return []keyedBy{
		{name: "header", req: func(ctx context.Context) *http.Request {
			req := post(ctx)
			req.Header.Set("Idempotency-Key", "order-42")
			return req
		}},
		{name: "context", req: func(ctx context.Context) *http.Request {
			return post(ContextWithKey(ctx, "order-42"))
		}},
		{name: "store operation", opts: []Option{WithStore(persist.NewMemory())}, req: func(ctx context.Context) *http.Request {
			return post(ContextWithOperation(ctx, "charge-order-42"))
		}},
	}
}

// flightResult is what one caller got.
type flightResult struct {
	status int
	body   string
	err    error
	at     time.Time // when RoundTrip returned
}

// callAll runs flightCallers calls of one operation at once, each with
// its own context from ctxOf, and returns what each got.
func callAll(tr *Transport, way keyedBy, ctxOf func() (context.Context, context.CancelFunc)) []flightResult {
	out := make([]flightResult, flightCallers)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			ctx, cancel := ctxOf()
			defer cancel()
			resp, err := tr.RoundTrip(way.req(ctx))
			out[i].at, out[i].err = time.Now(), err
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				out[i].status, out[i].body = resp.StatusCode, string(b)
			}
		})
	}
	wg.Wait()
	return out
}

// TestCallersOfOneOperationTakeTurns: 64 goroutines run one operation (one
// key of the application's) on one Transport against a server that
// dedupes. Each gets the committed answer (the first call's, then the
// server's replays of it); the server executes it once and never sees two
// attempts of the key at once, so no 409 "in progress" is answered.
func TestCallersOfOneOperationTakeTurns(t *testing.T) {
	for _, way := range keyedWays() {
		t.Run(way.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := slowFirst(200 * time.Millisecond)
				defer srv.Close()
				tr := NewTransport(srv.Transport(), way.opts...)
				got := callAll(tr, way, func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(context.Background(), 10*time.Second)
				})
				for i, r := range got {
					require.NoError(t, r.err, "caller %d", i)
					assert.Equal(t, http.StatusCreated, r.status, "caller %d", i)
					assert.Equal(t, got[0].body, r.body, "caller %d: the committed answer", i)
				}
				st := srv.Stats()
				assert.Equal(t, 1, srv.TotalEffects(), "one effect")
				assert.Zero(t, st.InProgressConflicts, "no 409 in progress")
				assert.EqualValues(t, flightCallers, st.Requests, "one attempt per caller")
				assert.EqualValues(t, flightCallers-1, st.Replays, "the others are replays")
				assert.Zero(t, tr.flights.Size(), "no entry outlives its calls")
				h, ok := tr.hosts.M.Load("api.test")
				require.True(t, ok)
				assert.EqualValues(t, 3, h.(*host.State).Tokens.AvailableAt(time.Now()), "a caller that waited retries nothing: no token taken")
			})
		})
	}
}

// TestCallerWaitingForItsOperationEndsByItsDeadline: when every attempt
// takes longer than the callers' deadline, every caller returns by its
// deadline with an *Error whose outcome is unknown (the operation is in
// flight in this process, its effect may exist) and that names the key.
// When the callers that wait have an earlier deadline than the first, they
// all sent nothing, and the server saw one attempt; with one deadline for
// all, a caller whose turn comes as it ends may send one.
func TestCallerWaitingForItsOperationEndsByItsDeadline(t *testing.T) {
	for _, way := range keyedWays() {
		for _, earlier := range []time.Duration{0, 50 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/earlier=%v", way.name, earlier), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := slowAll(time.Second)
					defer srv.Close()
					tr := NewTransport(srv.Transport(), way.opts...)
					deadline := time.Now().Add(300 * time.Millisecond)
					ctx, cancel := context.WithDeadline(context.Background(), deadline)
					defer cancel()
					first := make(chan flightResult, 1)
					go func() {
						_, err := tr.RoundTrip(way.req(ctx))
						first <- flightResult{err: err, at: time.Now()}
					}()
					synctest.Wait() // the first call is in flight
					got := callAll(tr, way, func() (context.Context, context.CancelFunc) {
						return context.WithDeadline(context.Background(), deadline.Add(-earlier))
					})
					got = append(got, <-first)
					key := ""
					inFlight, lateTurn := 0, 0
					for i, r := range got {
						dl := deadline.Add(-earlier)
						if i == len(got)-1 {
							dl = deadline
						}
						var re *Error
						require.ErrorAs(t, r.err, &re, "caller %d", i)
						assert.True(t, re.Unknown, "caller %d: the effect may exist", i)
						assert.ErrorIs(t, r.err, context.DeadlineExceeded, "caller %d", i)
						assert.False(t, r.at.After(dl), "caller %d returned %v after its deadline", i, r.at.Sub(dl))
						require.NotEmpty(t, re.Key, "caller %d", i)
						if key == "" {
							key = re.Key
						}
						assert.Equal(t, key, re.Key, "caller %d: the operation's key", i)
						if errors.Is(r.err, loops.ErrInFlight) {
							inFlight++
							assert.Zero(t, re.Attempts, "caller %d", i)
						} else if i < len(got)-1 {
							// Its turn came as its deadline passed: it
							// took the turn, and sent nothing (the gate
							// saw the context end) or one attempt.
							lateTurn++
							assert.LessOrEqual(t, re.Attempts, 1, "caller %d", i)
						}
					}
					st := srv.Stats()
					if earlier > 0 {
						assert.Equal(t, flightCallers, inFlight, "every caller but the first waited and sent nothing")
						assert.Zero(t, lateTurn)
						assert.EqualValues(t, 1, st.Requests, "one attempt reached the server")
					}
					assert.Zero(t, st.InProgressConflicts)
					assert.Zero(t, tr.flights.Size())
				})
			})
		}
	}
}

// TestCallerWaitingSendsOnceTheFlightFails: a waiting caller is not
// answered by the flight it waited for: when that one ends without the
// committed answer (its own deadline passed), the next caller sends its
// own attempt, and gets the operation done.
func TestCallerWaitingSendsOnceTheFlightFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := slowFirst(time.Second)
		defer srv.Close()
		tr := NewTransport(srv.Transport())
		way := keyedWays()[1]
		ctx1, cancel1 := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel1()
		first := make(chan error, 1)
		go func() {
			_, err := tr.RoundTrip(way.req(ctx1))
			first <- err
		}()
		synctest.Wait() // the first call is in flight
		resp, err := tr.RoundTrip(way.req(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		var re *Error
		require.ErrorAs(t, <-first, &re)
		assert.True(t, re.Unknown)
		assert.Equal(t, 1, srv.TotalEffects())
		assert.Zero(t, srv.Stats().InProgressConflicts)
	})
}

// TestInProgressRetryTakesNoToken: across processes (two Transports, one
// key) the server's 409 "in progress" answers the second; its retries poll
// at the pace of the server's Retry-After and take none of the host's retry
// tokens, so a bucket of one token does not end the polling before the
// first process's call completes.
func TestInProgressRetryTakesNoToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := slowFirst(2500*time.Millisecond, fakeserver.WithInProgressRetryAfter(time.Second))
		defer srv.Close()
		one := WithRetryControl(RetryTokens{MinTokens: 1, CapRatio: -1})
		a, b := NewTransport(srv.Transport(), one), NewTransport(srv.Transport(), one)
		way := keyedWays()[0]
		done := make(chan *http.Response, 1)
		go func() {
			resp, err := a.RoundTrip(way.req(context.Background()))
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		synctest.Wait() // a's call is in flight
		start := time.Now()
		resp, err := b.RoundTrip(way.req(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode, "b got the committed answer")
		assert.Equal(t, "replayed", resp.Header.Get("Idempotency-Status"))
		assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "paced by Retry-After")
		if ra := <-done; ra != nil {
			ra.Body.Close()
		}
		st := srv.Stats()
		assert.EqualValues(t, 3, st.InProgressConflicts, "b polled three times, a second apart")
		assert.Equal(t, 1, srv.TotalEffects())
		h, ok := b.hosts.M.Load("api.test")
		require.True(t, ok)
		assert.EqualValues(t, 1, h.(*host.State).Tokens.AvailableAt(time.Now()), "b's token is untouched")
	})
}
