package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keySeq is a key func minting "order-1", "order-2", … and counting its
// calls.
type keySeq struct{ n atomic.Int32 }

func (s *keySeq) next() (string, error) {
	return fmt.Sprintf("order-%d", s.n.Add(1)), nil
}

// closeBody is a request body that records that it was closed.
type closeBody struct {
	*strings.Reader
	closed bool
}

func (b *closeBody) Close() error { b.closed = true; return nil }

// TestWithKeyFuncMintsEveryKey: the key func mints the key of every
// operation that gets one, once per operation, and each attempt of the
// operation carries it unchanged.
func TestWithKeyFuncMintsEveryKey(t *testing.T) {
	tests := []struct {
		name     string
		steps    []stubtest.Step
		ops      int
		wantKeys []string // the key of each attempt sent, in order
	}{
		{"one operation, retried", []stubtest.Step{stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(500), stubtest.ReplyDeduping(201)}, 1,
			[]string{"order-1", "order-1", "order-1"}},
		{"three operations, one attempt each", []stubtest.Step{stubtest.Reply(201)}, 3,
			[]string{"order-1", "order-2", "order-3"}},
		{"two operations, each retried", []stubtest.Step{stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201), stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201)}, 2,
			[]string{"order-1", "order-1", "order-2", "order-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seq keySeq
			s := stubtest.New(tc.steps...)
			tr := resilient.NewTransport(s, fast(resilient.WithKeyFunc(seq.next))...)
			for i := range tc.ops {
				rep := new(resilient.Report)
				resp, err := do(t, tr, stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
				require.NoError(t, err)
				assert.Equal(t, 201, resp.StatusCode)
				assert.Equal(t, fmt.Sprintf("order-%d", i+1), rep.Key)
			}
			var got []string
			for _, a := range s.Attempts() {
				assert.Len(t, a.Header.Values("Idempotency-Key"), 1, "one key field per attempt")
				got = append(got, a.Header.Get("Idempotency-Key"))
			}
			assert.Equal(t, tc.wantKeys, got)
			assert.Equal(t, int32(tc.ops), seq.n.Load(), "called once per operation, never per attempt")
		})
	}
}

// TestWithKeyFuncMintsStoredKeys: the key a Store claims for a named
// operation is the key func's; a second call of the operation sends the
// stored key. (Today the func is called again for the second call's
// candidate key, which the Store's claim then replaces.)
func TestWithKeyFuncMintsStoredKeys(t *testing.T) {
	var seq keySeq
	s := stubtest.New(stubtest.Reply(201))
	tr := resilient.NewTransport(s, resilient.WithKeyFunc(seq.next), resilient.WithStore(persist.NewMemory()))
	for range 2 {
		req := stubtest.Post(resilient.ContextWithOperation(context.Background(), "refund:ch_1"), "{}")
		_, err := do(t, tr, req)
		require.NoError(t, err)
	}
	at := s.Attempts()
	require.Len(t, at, 2)
	for i, a := range at {
		assert.Equal(t, []string{"order-1"}, a.Header.Values("Idempotency-Key"), "call %d", i)
	}
}

// TestWithKeyFuncRejects: a key func that fails or mints an invalid key
// fails the call before anything is sent, with an *Error that says why and
// never echoes the key.
func TestWithKeyFuncRejects(t *testing.T) {
	boom := errors.New("key service down")
	tests := []struct {
		name    string
		f       func() (string, error)
		wantErr error // besides ErrInvalidKey
	}{
		{"the func fails", func() (string, error) { return "", boom }, boom},
		{"the func fails with a key", func() (string, error) { return "order-1", boom }, boom},
		{"empty key", func() (string, error) { return "", nil }, nil},
		{"trailing space", func() (string, error) { return "order-1 ", nil }, nil},
		{"not printable ASCII", func() (string, error) { return "order-ü", nil }, nil},
		{"control byte", func() (string, error) { return "order\n1", nil }, nil},
		{"too long (256 bytes; the limit is 255)", func() (string, error) { return strings.Repeat("k", 256), nil }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(201))
			tr := resilient.NewTransport(s, resilient.WithKeyFunc(tc.f))
			body := &closeBody{Reader: strings.NewReader("{}")}
			req, err := http.NewRequest(http.MethodPost, target, body)
			require.NoError(t, err)
			rep := new(resilient.Report)
			resp, err := tr.RoundTrip(req.WithContext(resilient.ContextWithReport(context.Background(), rep)))
			require.Nil(t, resp)
			var re *resilient.Error
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, resilient.ErrInvalidKey)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr, "the func's own error is kept")
			}
			assert.Empty(t, re.Key, "an invalid or unminted key is never echoed")
			assert.Zero(t, re.Attempts)
			assert.False(t, re.Unknown, "nothing was sent")
			assert.Empty(t, s.Attempts(), "nothing was sent")
			assert.True(t, body.closed, "RoundTrip closes the body it does not send")
			assert.ErrorIs(t, rep.Stopped, resilient.ErrInvalidKey)
		})
	}
}

// TestWithKeyFuncLeavesOtherKeysAlone: the key func mints only the keys
// the Transport would mint; the application's key is sent as it is, and a
// nil func restores the default UUIDv7s.
func TestWithKeyFuncLeavesOtherKeysAlone(t *testing.T) {
	tests := []struct {
		name      string
		opts      []resilient.Option
		req       func(t *testing.T) *http.Request
		wantKey   string // "" for a UUIDv7
		wantCalls int32
	}{
		{"the caller's header", nil, func(t *testing.T) *http.Request {
			r := stubtest.Post(context.Background(), "{}")
			r.Header.Set("Idempotency-Key", "mine")
			return r
		}, "mine", 0},
		{"the caller's header, not canonically spelled", nil, func(t *testing.T) *http.Request {
			r := stubtest.Post(context.Background(), "{}")
			r.Header["idempotency-key"] = []string{"mine"}
			return r
		}, "mine", 0},
		{"the context's key", nil, func(t *testing.T) *http.Request {
			return stubtest.Post(resilient.ContextWithKey(context.Background(), "mine"), "{}")
		}, "mine", 0},
		{"a nil func restores the default", []resilient.Option{resilient.WithKeyFunc(nil)}, func(t *testing.T) *http.Request {
			return stubtest.Post(context.Background(), "{}")
		}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seq keySeq
			s := stubtest.New(stubtest.Reply(503), stubtest.Reply(201)) // a server that shows nothing
			opts := append([]resilient.Option{resilient.WithKeyFunc(seq.next)}, tc.opts...)
			_, err := do(t, resilient.NewTransport(s, fast(opts...)...), tc.req(t))
			require.NoError(t, err)
			assert.Equal(t, tc.wantCalls, seq.n.Load())
			at := s.Attempts()
			require.NotEmpty(t, at)
			key := at[0].Header.Get("Idempotency-Key")
			for i, a := range at {
				assert.Equal(t, []string{key}, a.Header.Values("Idempotency-Key"), "attempt %d", i)
			}
			if tc.wantKey != "" {
				assert.Equal(t, tc.wantKey, key)
				assert.Len(t, at, 2, "the application's key vouches for the server: the 503 is retried")
				return
			}
			u, err := uuid.Parse(key)
			require.NoError(t, err)
			assert.Equal(t, uuid.Version(7), u.Version())
		})
	}
}

// TestWithKeyFuncOnlyForKeyedMethods: a request the Transport mints no key
// for (by default, a GET) does not call the key func.
func TestWithKeyFuncOnlyForKeyedMethods(t *testing.T) {
	var seq keySeq
	s := stubtest.New(stubtest.Reply(200))
	req, err := http.NewRequest(http.MethodGet, target, nil)
	require.NoError(t, err)
	_, err = do(t, resilient.NewTransport(s, resilient.WithKeyFunc(seq.next)), req)
	require.NoError(t, err)
	assert.Zero(t, seq.n.Load())
	require.Len(t, s.Attempts(), 1)
	assert.Empty(t, s.Attempts()[0].Header.Values("Idempotency-Key"))
}

// echoUnder returns a step from a server that dedupes by the key in header
// name and shows it by echoing that header.
func echoUnder(name string, code int) stubtest.Step {
	return func(req *http.Request) (*http.Response, error) {
		resp, err := stubtest.Reply(code)(req)
		if k := stubtest.Wire(req.Header).Get(name); k != "" {
			resp.Header.Set(name, k)
		}
		return resp, err
	}
}

// TestWithKeyHeader: the key travels under the configured header, in its
// canonical spelling, and only there; a caller's key under that header is
// the application's own; dedupe evidence is read from that header.
func TestWithKeyHeader(t *testing.T) {
	tests := []struct {
		name         string
		header       string
		callerHeader string // the header the caller sets its key under; "" for none
		steps        []stubtest.Step
		wantAttempts int
		wantKey      string // "" for a minted key
	}{
		{"a minted key under the custom header", "X-Request-Key", "", []stubtest.Step{stubtest.Reply(201)}, 1, ""},
		{"the name is canonicalised", "x-request-key", "", []stubtest.Step{stubtest.Reply(201)}, 1, ""},
		{"the caller's key under the custom header is kept, and vouches", "X-Request-Key", "X-Request-Key",
			[]stubtest.Step{stubtest.Reply(503), stubtest.Reply(201)}, 2, "mine"},
		{"the caller's key, spelled otherwise, is kept", "X-Request-Key", "x-request-KEY",
			[]stubtest.Step{stubtest.Reply(503), stubtest.Reply(201)}, 2, "mine"},
		{"a server that shows nothing: the unsafe retry is not sent", "X-Request-Key", "",
			[]stubtest.Step{stubtest.Reply(503), stubtest.Reply(201)}, 1, ""},
		{"an echo under the custom header is dedupe evidence", "X-Request-Key", "",
			[]stubtest.Step{echoUnder("X-Request-Key", 503), echoUnder("X-Request-Key", 201)}, 2, ""},
		{"an echo under the default header is not", "X-Request-Key", "",
			[]stubtest.Step{echoUnder("Idempotency-Key", 503), stubtest.Reply(201)}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(tc.steps...)
			tr := resilient.NewTransport(s, fast(resilient.WithKeyHeader(tc.header))...)
			req := stubtest.Post(context.Background(), "{}")
			if tc.callerHeader != "" {
				req.Header[tc.callerHeader] = []string{"mine"}
			}
			rep := new(resilient.Report)
			_, err := do(t, tr, req.WithContext(resilient.ContextWithReport(req.Context(), rep)))
			require.NoError(t, err)
			at := s.Attempts()
			require.Len(t, at, tc.wantAttempts)
			key := at[0].Header.Get("X-Request-Key")
			require.NotEmpty(t, key)
			if tc.wantKey != "" {
				assert.Equal(t, tc.wantKey, key)
			} else {
				_, err := uuid.Parse(key)
				assert.NoError(t, err, "a minted key")
			}
			assert.Equal(t, key, rep.Key)
			for i, a := range at {
				assert.Equal(t, []string{key}, a.Header.Values("X-Request-Key"), "attempt %d: one field, one key", i)
				assert.Empty(t, a.Header.Values("Idempotency-Key"), "attempt %d: not under the default name", i)
			}
		})
	}
}

// TestWithKeyHeaderEmptyNameSetsNothing: WithKeyHeader("") leaves the name
// in force (the default, or an earlier name), as its doc says: keys are
// never turned off by an empty setting.
func TestWithKeyHeaderEmptyNameSetsNothing(t *testing.T) {
	tests := []struct {
		name string
		opts []resilient.Option
		want string
	}{
		{"alone: the default", []resilient.Option{resilient.WithKeyHeader("")}, "Idempotency-Key"},
		{"after a name: that name", []resilient.Option{resilient.WithKeyHeader("X-Request-Key"), resilient.WithKeyHeader("")}, "X-Request-Key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(201))
			_, err := do(t, resilient.NewTransport(s, tc.opts...), stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
			require.Len(t, s.Attempts(), 1)
			h := s.Attempts()[0].Header
			key := h.Get(tc.want)
			require.NotEmpty(t, key)
			for name, vs := range h {
				if name != tc.want {
					assert.NotContains(t, vs, key, "the key is sent under %s only", tc.want)
				}
			}
		})
	}
}

// Regression: a negative WithRetryAfterMax disables every retry (0 > negative).
func TestNegativeRetryAfterMax(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(500), stubtest.ReplyDeduping(200))
	rep := new(resilient.Report)
	resp, err := do(t, resilient.NewTransport(s, fast(resilient.WithRetryAfterMax(-1))...),
		stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode, "stopped: %v", rep.Stopped)
}
