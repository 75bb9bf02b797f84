package resilient_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression: a caller's key under a non-canonical header name
// (req.Header["idempotency-key"], which net/http writes as is) is the key;
// no second key field is added.
func TestNonCanonicalCallerKey(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503), stubtest.Reply(201))
	req := stubtest.Post(context.Background(), "{}")
	req.Header["idempotency-key"] = []string{"caller-key"}
	resp, err := do(t, resilient.NewTransport(s, fast()...), req)
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)
	for _, a := range s.Attempts() {
		// As the server reads it (names canonicalized): one field, the
		// caller's key; a second field would be a second value.
		assert.Equal(t, []string{"caller-key"}, a.Header["Idempotency-Key"], "no second key field")
	}
	assert.Len(t, s.Attempts(), 2, "the caller's own key is trusted: retried")
}

// Regression: a Store record whose key net/http would refuse (CR/LF) is
// refused before sending, with ErrInvalidKey, not sent 4 times and
// reported unknown; the key is not echoed.
func TestStoredKeyIsValidated(t *testing.T) {
	bg := context.Background()
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Reply(201))
	tr := resilient.NewTransport(s, fast(resilient.WithStore(store))...)
	// One operation, to learn the request's fingerprint.
	resp, err := do(t, tr, stubtest.Post(resilient.ContextWithOperation(bg, "probe"), "{}"))
	require.NoError(t, err)
	resp.Body.Close()
	probe, _, err := store.Claim(bg, persist.Record{Operation: "probe", Key: "unused"})
	require.NoError(t, err)
	// A record whose key net/http would refuse, for the same request.
	_, _, err = store.Claim(bg, persist.Record{Operation: "op", Key: "bad\r\nkey", Fingerprint: probe.Fingerprint, Created: time.Now()})
	require.NoError(t, err)

	_, err = do(t, tr, stubtest.Post(resilient.ContextWithOperation(bg, "op"), "{}"))
	require.ErrorIs(t, err, resilient.ErrInvalidKey)
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.False(t, re.Unknown)
	assert.Zero(t, re.Attempts)
	assert.NotContains(t, err.Error(), "bad")
	assert.Len(t, s.Attempts(), 1, "only the probe was sent")
}

// Regression: a done operation past key retention is not re-sent blindly
// (the server may have forgotten its key): ErrKeyExpired.
func TestDoneOperationPastRetention(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Reply(201))
	ctx := resilient.ContextWithOperation(context.Background(), "op")
	tr := resilient.NewTransport(s, fast(resilient.WithStore(store), resilient.WithKeyRetention(time.Nanosecond))...)
	resp, err := do(t, tr, stubtest.Post(ctx, "{}"))
	require.NoError(t, err)
	resp.Body.Close()
	time.Sleep(time.Millisecond)
	_, err = do(t, tr, stubtest.Post(ctx, "{}"))
	require.ErrorIs(t, err, resilient.ErrKeyExpired)
	assert.Len(t, s.Attempts(), 1, "not sent again")
}

// Regression: a request net/http would refuse locally (an invalid method)
// is refused before sending, not reported unknown after 4 attempts.
func TestInvalidMethodIsRefusedBeforeSending(t *testing.T) {
	s := stubtest.New(stubtest.Reply(201))
	req := stubtest.Post(context.Background(), "{}")
	req.Method = "BAD METHOD"
	_, err := do(t, resilient.NewTransport(s, fast()...), req)
	require.ErrorIs(t, err, resilient.ErrInvalidRequest)
	var re *resilient.Error
	require.ErrorAs(t, err, &re)
	assert.False(t, re.Unknown)
	assert.Empty(t, s.Attempts())
}

// frozenStore never answers, whatever its context says.
type frozenStore struct {
	persist.Store
	release chan struct{}
}

func (f frozenStore) Claim(context.Context, persist.Record) (persist.Record, bool, error) {
	<-f.release
	return persist.Record{}, false, context.Canceled
}

func (f frozenStore) Finish(context.Context, string, persist.State, int) error {
	<-f.release
	return nil
}

// Regression: a Store that does not answer holds the caller no longer than
// its context: ErrStore (and the context's error), nothing sent.
func TestFrozenStoreIsBoundedByTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := frozenStore{Store: persist.NewMemory(), release: make(chan struct{})}
		defer close(store.release)
		s := stubtest.New(stubtest.Reply(201))
		tr := resilient.NewTransport(s, fast(resilient.WithStore(store))...)
		ctx, cancel := context.WithTimeout(resilient.ContextWithOperation(context.Background(), "op"), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := do(t, tr, stubtest.Post(ctx, "{}"))
		require.ErrorIs(t, err, resilient.ErrStore)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "returned at the deadline")
		assert.Empty(t, s.Attempts(), "nothing sent without a durable key")
	})
}

// resender plays net/http's own re-send on a dead keep-alive connection:
// the first write may or may not happen, then it rewinds the body with
// GetBody and sends again.
type resender struct{ wroteFirst bool }

func (r resender) RoundTrip(req *http.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(req.Context())
	io.Copy(io.Discard, req.Body)
	if r.wroteFirst {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	body, err := req.GetBody() // the connection died: re-send
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, body)
	trace.WroteRequest(httptrace.WroteRequestInfo{})
	return &http.Response{StatusCode: 201, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// Every send is visible: a re-send by the base transport when nothing was
// written is allowed and counted (it costs no retry token); one after a
// write is refused, and the outcome is unknown.
func TestBaseTransportResends(t *testing.T) {
	t.Run("nothing written: allowed and counted", func(t *testing.T) {
		rep := new(resilient.Report)
		resp, err := do(t, resilient.NewTransport(resender{}), stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, rep.Resends)
		require.Len(t, rep.Attempts, 1)
		assert.Equal(t, 1, rep.Attempts[0].Resends)
	})
}

// Regression: net/http re-sends on its own a request that carries the
// canonical Idempotency-Key once a reused keep-alive connection dies after
// the request was written (Request.isReplayable), a second effect on a
// server that applied it and ignores keys. A bare client's POST is not
// re-sent, so the wrapped one must not be either, with a body or without
// one (net/http never asks a bodyless request's GetBody, so only the key's
// spelling can keep it from re-sending). The server below applies every
// request, and drops the connection without answering the second request
// sent on it.
func TestNoResendAfterAppliedOnADeadConnection(t *testing.T) {
	for _, body := range []string{"", "{}"} {
		for _, wrapped := range []bool{false, true} {
			name := map[bool]string{false: "bare", true: "wrapped"}[wrapped] + map[bool]string{false: "/body", true: "/no body"}[body == ""]
			t.Run(name, func(t *testing.T) {
				var effects atomic.Int32
				type connKey struct{}
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					effects.Add(1)
					n := r.Context().Value(connKey{}).(*atomic.Int32)
					if n.Add(1) == 2 {
						c, _, err := http.NewResponseController(w).Hijack()
						if err == nil {
							c.Close() // applied, then the connection dies
						}
						return
					}
					w.WriteHeader(http.StatusCreated)
				}))
				srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
					return context.WithValue(ctx, connKey{}, new(atomic.Int32))
				}
				srv.Start()
				defer srv.Close()
				base := &http.Transport{}
				defer base.CloseIdleConnections()
				var rt http.RoundTripper = base
				if wrapped {
					rt = resilient.NewTransport(base, resilient.WithBackoff(nil))
				}
				client := &http.Client{Transport: rt}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				post := func() (*http.Response, error) {
					var rb io.Reader
					if body != "" {
						rb = strings.NewReader(body)
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges", rb)
					return client.Do(req)
				}
				resp, err := post() // the first request on the connection: answered
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Equal(t, int32(1), effects.Load())
				resp, err = post() // the second: applied, then no answer
				if err == nil {
					resp.Body.Close()
				}
				require.Error(t, err, "the connection died without an answer")
				assert.Equal(t, int32(2), effects.Load(), "the lost request applied once, never re-sent")
				if wrapped {
					var re *resilient.Error
					require.ErrorAs(t, err, &re)
					assert.True(t, re.Unknown, "the effect may exist")
					assert.NotEmpty(t, re.Key, "the key to resolve it with")
				}
			})
		}
	}
}

// Regression (outer retry loops): an SDK that retries on its own calls
// RoundTrip again with the same key. Its calls continue the operation's
// numbering, and the first attempt of each is a retry for the tokens, so
// the retries inside are held to the budget: 3 outer calls against a host
// that always fails send 6 attempts, numbered 0–5, not 12 numbered 0–3
// three times. No call is refused.
func TestOuterRetryLoopIsAccounted(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503))
	tr := resilient.NewTransport(s, resilient.WithBackoff(nil))
	for range 3 {
		req := stubtest.Post(context.Background(), "{}")
		req.Header.Set("Idempotency-Key", "outer-key")
		resp, err := do(t, tr, req)
		require.NoError(t, err, "never refused: the call is sent")
		assert.Equal(t, 503, resp.StatusCode)
	}
	var got []string
	for _, a := range s.Attempts() {
		got = append(got, a.Header.Get("Retry-Attempt"))
	}
	assert.Equal(t, []string{"", "1", "2", "3", "4", "5"}, got, "the first attempt has no attempt header")
}

// Regression (outer SDKs): with WithRefusalResponses, a request refused
// without being sent (an open breaker) ends with a 503 that says not to
// retry, which stripe-go and others honour, instead of an error they retry.
func TestRefusalResponses(t *testing.T) {
	s := stubtest.New(stubtest.Reply(503))
	tr := resilient.NewTransport(s, resilient.WithMaxAttempts(1), resilient.WithRefusalResponses(),
		resilient.WithRetryControl(resilient.RetryTokens{}, resilient.CircuitBreaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Minute}))
	resp, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	assert.Empty(t, resp.Header.Get("Resilient-Refused"), "a real answer is not a refusal")
	resp, err = tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "circuit_open", resp.Header.Get("Resilient-Refused"))
	assert.Equal(t, "false", resp.Header.Get("Stripe-Should-Retry"))
	assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	assert.Equal(t, "60", resp.Header.Get("Retry-After"))
	assert.Len(t, s.Attempts(), 1, "the refused request was not sent")
	b, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(b), resilient.ProblemTypeRefused)
}
