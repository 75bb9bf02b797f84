package resilient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/jarcoal/httpmock"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const target = stubtest.Target

// fast is the option set for tests that need retries but no real waiting.
func fast(extra ...resilient.Option) []resilient.Option {
	return append([]resilient.Option{
		resilient.WithBackoff(resilient.Exponential(time.Microsecond, time.Microsecond)),
	}, extra...)
}

func do(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func TestSameKeyOnEveryAttempt(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(500), stubtest.ReplyDeduping(201))
	tr := resilient.NewTransport(s, fast()...)
	resp, err := do(t, tr, stubtest.Post(context.Background(), `{"amount":100}`))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)

	at := s.Attempts()
	require.Len(t, at, 3)
	key := at[0].Header.Get("Idempotency-Key")
	for i, a := range at {
		assert.Equal(t, key, a.Header.Get("Idempotency-Key"), "attempt %d", i)
		if i == 0 {
			assert.Empty(t, a.Header.Values("Retry-Attempt"), "a first attempt has none")
		} else {
			assert.Equal(t, []string{string(rune('0' + i))}, a.Header.Values("Retry-Attempt"), "attempt %d", i)
		}
	}
	u, err := uuid.Parse(key)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(7), u.Version())
	assert.Equal(t, uuid.RFC4122, u.Variant(), "RFC 9562 variant bits 10xx")
	assert.Equal(t, byte(0x80), u[8]&0xc0)
}

func TestDifferentOperationsGetDifferentKeysInTimeOrder(t *testing.T) {
	s := stubtest.New(stubtest.Reply(201))
	tr := resilient.NewTransport(s, fast()...)
	const n = 200
	for range n {
		_, err := do(t, tr, stubtest.Post(context.Background(), `{}`))
		require.NoError(t, err)
	}
	at := s.Attempts()
	seen := map[string]bool{}
	prev := ""
	for _, a := range at {
		k := a.Header.Get("Idempotency-Key")
		assert.False(t, seen[k], "duplicate key %s", k)
		seen[k] = true
		assert.Greater(t, k, prev, "UUIDv7 keys minted in sequence sort in time order")
		prev = k
	}
}

// TestConcurrentOperationsGetDistinctValidKeys: the Transport's key source
// (a buffer of crypto/rand bytes shared by its requests) gives concurrent
// operations distinct UUIDv7 keys, more of them than one buffer holds.
func TestConcurrentOperationsGetDistinctValidKeys(t *testing.T) {
	s := stubtest.New(stubtest.Reply(201))
	tr := resilient.NewTransport(s, fast()...)
	const goroutines, each = 8, 40
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				resp, err := tr.RoundTrip(stubtest.Post(context.Background(), `{}`))
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, a := range s.Attempts() {
		k := a.Header.Get("Idempotency-Key")
		assert.False(t, seen[k], "duplicate key %s", k)
		seen[k] = true
		u, err := uuid.Parse(k)
		if assert.NoError(t, err) {
			assert.Equal(t, uuid.Version(7), u.Version())
			assert.Equal(t, uuid.RFC4122, u.Variant())
		}
		assert.NoError(t, resilient.ValidateKey(k))
	}
	assert.Len(t, seen, goroutines*each)
}

func TestCallerKeyPreserved(t *testing.T) {
	tests := []struct {
		name   string
		method string
		setup  func(*http.Request) *http.Request
		want   string
	}{
		{"header on POST", http.MethodPost, func(r *http.Request) *http.Request { r.Header.Set("Idempotency-Key", "order-42"); return r }, "order-42"},
		{"context on POST", http.MethodPost, func(r *http.Request) *http.Request {
			return r.WithContext(resilient.ContextWithKey(r.Context(), "ctx-key"))
		}, "ctx-key"},
		{"context on PUT", http.MethodPut, func(r *http.Request) *http.Request {
			return r.WithContext(resilient.ContextWithKey(r.Context(), "put-key"))
		}, "put-key"},
		{"header wins over context", http.MethodPost, func(r *http.Request) *http.Request {
			r.Header.Set("Idempotency-Key", "hdr")
			return r.WithContext(resilient.ContextWithKey(r.Context(), "ctx"))
		}, "hdr"},
		{"GET gets no key", http.MethodGet, func(r *http.Request) *http.Request { return r }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(503), stubtest.Reply(200))
			tr := resilient.NewTransport(s, fast()...)
			req, err := http.NewRequest(tc.method, target, strings.NewReader("x"))
			require.NoError(t, err)
			req = tc.setup(req)
			before := req.Header.Clone()
			_, err = do(t, tr, req)
			require.NoError(t, err)
			for _, a := range s.Attempts() {
				assert.Equal(t, tc.want, a.Header.Get("Idempotency-Key"))
			}
			assert.Equal(t, before, req.Header, "the caller's request is not modified")
		})
	}
}

// TestAttemptHeaderNeverWritesTheCallersArrays: an attempt's header shares
// the caller's value slices, clipped, so that a base transport that appends
// to a field (Header.Add) copies it instead of writing into the caller's
// spare capacity, on every attempt sent on a copy (a keyed request's).
func TestAttemptHeaderNeverWritesTheCallersArrays(t *testing.T) {
	adds := func(req *http.Request) (*http.Response, error) {
		req.Header.Add("X-Trace", "added by the base transport")
		req.Header.Set("X-Other", "set by the base transport")
		return nil, nil
	}
	s := stubtest.New(func(req *http.Request) (*http.Response, error) { adds(req); return stubtest.Reply(503)(req) },
		func(req *http.Request) (*http.Response, error) { adds(req); return stubtest.Reply(200)(req) })
	tr := resilient.NewTransport(s, fast()...)
	req, err := http.NewRequestWithContext(resilient.ContextWithKey(context.Background(), "k1"), http.MethodGet, target, nil)
	require.NoError(t, err)
	trace := make([]string, 1, 4) // spare capacity an append would write into
	trace[0] = "caller"
	req.Header["X-Trace"] = trace
	resp, err := do(t, tr, req)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	require.Len(t, s.Attempts(), 2)
	assert.Equal(t, http.Header{"X-Trace": {"caller"}}, req.Header, "the caller's map")
	assert.Equal(t, []string{"caller", ""}, trace[:2], "the caller's array")

	// Slices without spare capacity (Header.Set's): the first attempt's
	// header is a runtime copy of the map, as clipped as the caller's.
	req, err = http.NewRequestWithContext(resilient.ContextWithKey(context.Background(), "k2"), http.MethodGet, target, nil)
	require.NoError(t, err)
	req.Header.Set("X-Trace", "caller")
	s = stubtest.New(func(req *http.Request) (*http.Response, error) { adds(req); return stubtest.Reply(503)(req) },
		func(req *http.Request) (*http.Response, error) { adds(req); return stubtest.Reply(200)(req) })
	tr = resilient.NewTransport(s, fast()...)
	resp, err = do(t, tr, req)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	for i, a := range s.Attempts() {
		assert.Equal(t, []string{"caller"}, a.Header["X-Trace"], "attempt %d was sent with the caller's field only", i)
	}
	assert.Equal(t, http.Header{"X-Trace": {"caller"}}, req.Header, "the caller's map")
}

// TestUnkeyedFirstAttemptIsTheCallersRequest: with nothing to add (no key,
// no attempt timeout, the caller's own body), the first attempt is the
// caller's request itself, without an attempt header, as a bare client
// sends it; a retry is a copy numbered 1. An attempt header the caller set
// is still overwritten on a copy, and a body the Transport buffered is sent
// on a copy.
func TestUnkeyedFirstAttemptIsTheCallersRequest(t *testing.T) {
	var got []*http.Request
	var mu sync.Mutex
	base := func(status int) stubtest.Step {
		return func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			got = append(got, req)
			mu.Unlock()
			return stubtest.Reply(status)(req)
		}
	}
	cases := []struct {
		name   string
		req    func() *http.Request
		opts   []resilient.Option
		asIs   bool
		header string // Retry-Attempt of the first attempt
	}{
		{"GET", func() *http.Request { r, _ := http.NewRequest(http.MethodGet, target, nil); return r }, nil, true, ""},
		{"PUT with GetBody", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, target, strings.NewReader("{}"))
			return r
		}, nil, true, ""},
		{"PUT buffered", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, target, io.NopCloser(strings.NewReader("{}")))
			return r
		}, nil, false, ""},
		{"caller's attempt header", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, target, nil)
			r.Header.Set("Retry-Attempt", "7")
			return r
		}, nil, false, "0"},
		{"attempt timeout", func() *http.Request { r, _ := http.NewRequest(http.MethodGet, target, nil); return r },
			[]resilient.Option{resilient.WithAttemptTimeout(time.Minute)}, false, ""},
		{"POST (keyed)", func() *http.Request { return stubtest.Post(context.Background(), "{}") }, nil, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			s := stubtest.New(base(503), base(200))
			tr := resilient.NewTransport(s, fast(append(tc.opts, resilient.WithDedupingServer("api.test"))...)...)
			req := tc.req()
			before := req.Header.Clone()
			resp, err := do(t, tr, req)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			require.Len(t, got, 2)
			assert.Equal(t, tc.asIs, got[0] == req, "first attempt sent as is")
			assert.NotSame(t, req, got[1], "a retry is a copy")
			at := s.Attempts()
			assert.Equal(t, tc.header, at[0].Header.Get("Retry-Attempt"))
			assert.Equal(t, "1", at[1].Header.Get("Retry-Attempt"))
			assert.Equal(t, string(at[0].Body), string(at[1].Body), "same body on both attempts")
			assert.Equal(t, before, req.Header, "the caller's request is not modified")
		})
	}
}

func TestInvalidCallerKeyFailsBeforeSending(t *testing.T) {
	for name, key := range map[string]string{
		"empty":     "",
		"too long":  strings.Repeat("k", 256),
		"non-ASCII": "clé",
		"control":   "a\tb",
	} {
		t.Run(name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(201))
			client := &http.Client{Transport: resilient.NewTransport(s, fast()...)}
			req := stubtest.Post(resilient.ContextWithKey(context.Background(), key), "{}")
			_, err := client.Do(req)
			require.ErrorIs(t, err, resilient.ErrInvalidKey)
			if key != "" {
				assert.NotContains(t, err.Error(), key, "the key is not echoed")
			}
			assert.Empty(t, s.Attempts())
		})
	}
	t.Run("max length accepted", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(201))
		req := stubtest.Post(resilient.ContextWithKey(context.Background(), strings.Repeat("k", 255)), "{}")
		_, err := do(t, resilient.NewTransport(s, fast()...), req)
		require.NoError(t, err)
	})
}

type noGetBody struct{ io.Reader }

func TestBodyIdenticalOnEveryAttempt(t *testing.T) {
	payload := bytes.Repeat([]byte(`{"amount":1000,"currency":"eur"}`), 100)
	tests := []struct {
		name string
		req  func() *http.Request
	}{
		{"with GetBody", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(payload))
			return r
		}},
		{"without GetBody", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, target, noGetBody{bytes.NewReader(payload)})
			require.Nil(t, r.GetBody)
			return r
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(stubtest.ReplyDeduping(502), stubtest.Fail(syscall.ECONNRESET), stubtest.ReplyDeduping(200))
			_, err := do(t, resilient.NewTransport(s, fast()...), tc.req())
			require.NoError(t, err)
			at := s.Attempts()
			require.Len(t, at, 3)
			for i, a := range at {
				assert.Equal(t, payload, a.Body, "attempt %d", i)
			}
		})
	}
}

func TestOverLimitBodyIsSentOnce(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 2048)
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(200))
	tr := resilient.NewTransport(s, fast(resilient.WithMaxBodyBuffer(1024))...)
	req, _ := http.NewRequest(http.MethodPost, target, noGetBody{bytes.NewReader(payload)})
	rep := new(resilient.Report)
	req = req.WithContext(resilient.ContextWithReport(req.Context(), rep))
	resp, err := do(t, tr, req)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode, "the real last status is returned")
	require.Len(t, s.Attempts(), 1)
	assert.Equal(t, payload, s.Attempts()[0].Body)
	assert.True(t, rep.SingleAttempt)
	assert.ErrorIs(t, rep.Stopped, resilient.ErrBodyNotReplayable)
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestBodyReadErrorIsClearAndSendsNothing(t *testing.T) {
	s := stubtest.New(stubtest.Reply(200))
	req, _ := http.NewRequest(http.MethodPost, target, failingReader{})
	_, err := (&http.Client{Transport: resilient.NewTransport(s, fast()...)}).Do(req)
	require.ErrorIs(t, err, resilient.ErrBodyNotReplayable)
	assert.Contains(t, err.Error(), "disk on fire")
	assert.Empty(t, s.Attempts())
}

func TestStatusClassification(t *testing.T) {
	tests := []struct {
		code  int
		retry bool
	}{
		{400, false}, {401, false}, {403, false}, {404, false}, {422, false}, {501, false}, {505, false},
		{500, true}, {502, true}, {503, true}, {504, true}, {408, true}, {429, true}, {425, true},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			mock := httpmock.NewMockTransport()
			mock.RegisterResponder(http.MethodPost, target, httpmock.NewStringResponder(tc.code, `{"error":"x"}`))
			resp, err := do(t, resilient.NewTransport(mock, fast(resilient.WithDedupingServer("api.test"))...), stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err, "a final HTTP status is a response, not an error")
			assert.Equal(t, tc.code, resp.StatusCode)
			want := 1
			if tc.retry {
				want = 4 // WithMaxAttempts' default
			}
			assert.Equal(t, want, mock.GetTotalCallCount())
		})
	}
}

func dialErr() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Op: "connect", Err: syscall.ECONNREFUSED}}
}

func readErr() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

func TestNetworkErrorClassification(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		keyed    bool
		method   string
		attempts int
		unknown  bool
	}{
		{"dial error, POST without key", dialErr(), false, http.MethodPost, 4, false},
		{"dial error, POST keyed", dialErr(), true, http.MethodPost, 4, false},
		{"reset after send, POST keyed", readErr(), true, http.MethodPost, 4, true},
		{"reset after send, POST without key", readErr(), false, http.MethodPost, 1, true},
		{"reset after send, PUT without key", readErr(), false, http.MethodPut, 4, true},
		{"EOF after send, POST keyed", io.ErrUnexpectedEOF, true, http.MethodPost, 4, true},
		{"DNS not found", &net.DNSError{Err: "no such host", Name: "api.test", IsNotFound: true}, true, http.MethodPost, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Fail(tc.err))
			opts := fast()
			if !tc.keyed {
				opts = append(opts, resilient.WithKeyMethods())
			}
			req, _ := http.NewRequest(tc.method, target, strings.NewReader("{}"))
			client := &http.Client{Transport: resilient.NewTransport(s, opts...)}
			_, err := client.Do(req)
			require.Error(t, err)
			var re *resilient.Error
			require.ErrorAs(t, err, &re, "errors.As sees through *url.Error")
			assert.Len(t, s.Attempts(), tc.attempts)
			assert.Equal(t, tc.attempts, re.Attempts)
			assert.Equal(t, tc.unknown, re.Unknown)
			assert.ErrorIs(t, err, tc.err, "the cause is kept")
			if tc.attempts > 1 {
				assert.ErrorIs(t, err, resilient.ErrRetriesExhausted)
			}
		})
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	tests := []struct {
		name   string
		header func(now time.Time) string
		want   time.Duration
	}{
		{"seconds", func(time.Time) string { return "2" }, 2 * time.Second},
		{"HTTP-date", func(now time.Time) string { return now.Add(3 * time.Second).UTC().Format(http.TimeFormat) }, 3 * time.Second},
		{"RFC 850 date", func(now time.Time) string { return now.Add(3 * time.Second).UTC().Format(time.RFC850) }, 3 * time.Second},
		{"garbage ignored", func(time.Time) string { return "soon" }, 0},
		{"negative ignored", func(time.Time) string { return "-5" }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now().Truncate(time.Second)
				time.Sleep(time.Until(now.Add(time.Second))) // align to a whole second for HTTP-dates
				s := stubtest.New(stubtest.Reply(429, "Retry-After: "+tc.header(time.Now())), stubtest.Reply(200))
				tr := resilient.NewTransport(s, resilient.WithBackoff(nil))
				start := time.Now()
				resp, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, tc.want, time.Since(start))
			})
		})
	}
}

func TestJitterNeverShortensRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Healthy first attempts first (20, the rule's minimum): the 503's
		// delay then pauses its operation only (a host without them would
		// be shedding).
		steps := make([]stubtest.Step, 0, 22)
		for range 20 {
			steps = append(steps, stubtest.ReplyDeduping(200))
		}
		s := stubtest.New(append(steps, stubtest.ReplyDeduping(503, "Retry-After: 1"), stubtest.ReplyDeduping(200))...)
		tr := resilient.NewTransport(s, resilient.WithBackoff(resilient.FullJitter(time.Millisecond, 10*time.Millisecond)))
		for range 20 {
			_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
		}
		start := time.Now()
		_, err := do(t, tr, stubtest.Post(context.Background(), "{}"))
		require.NoError(t, err)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

func TestOverCapRetryAfterReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503, "Retry-After: 3600"), stubtest.ReplyDeduping(200))
		tr := resilient.NewTransport(s, fast()...)
		rep := new(resilient.Report)
		start := time.Now()
		resp, err := do(t, tr, stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Zero(t, time.Since(start))
		assert.Len(t, s.Attempts(), 1)
		assert.ErrorIs(t, rep.Stopped, resilient.ErrDelayTooLong)
	})
}

func TestCancelDuringBackoffReturnsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503))
		tr := resilient.NewTransport(s, resilient.WithBackoff(resilient.Exponential(time.Hour, time.Hour)))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := do(t, tr, stubtest.Post(ctx, "{}"))
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 20*time.Millisecond, time.Since(start), "returned when the caller gave up, not after the backoff")
		var re *resilient.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Attempts)
	})
}

func TestDeadlineShorterThanDelayReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.ReplyDeduping(503, "Retry-After: 10"))
		tr := resilient.NewTransport(s, fast()...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := do(t, tr, stubtest.Post(ctx, "{}"))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the real cause, not a deadline error")
		assert.Zero(t, time.Since(start))
		assert.Len(t, s.Attempts(), 1)

		s2 := stubtest.New(stubtest.Fail(readErr()))
		tr2 := resilient.NewTransport(s2, resilient.WithBackoff(resilient.Exponential(10*time.Second, 10*time.Second)))
		_, err = do(t, tr2, stubtest.Post(ctx, "{}"))
		require.ErrorIs(t, err, resilient.ErrDelayTooLong)
		require.ErrorIs(t, err, syscall.ECONNRESET, "the real cause is kept")
		assert.Zero(t, time.Since(start))
	})
}

func TestDiscardedBodiesAreClosed(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(500), stubtest.ReplyDeduping(502), stubtest.ReplyDeduping(200))
	resp, err := resilient.NewTransport(s, fast()...).RoundTrip(stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	assert.Equal(t, int32(4), s.Opened.Load())
	assert.Equal(t, int32(3), s.Closed.Load(), "the three discarded responses are closed")
	resp.Body.Close()
	assert.Equal(t, int32(4), s.Closed.Load())
}

func TestAttemptTimeoutIsSeparateFromCallerContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		s := stubtest.New(hang, hang, stubtest.Reply(201))
		tr := resilient.NewTransport(s, fast(resilient.WithAttemptTimeout(time.Second))...)
		rep := new(resilient.Report)
		start := time.Now()
		resp, err := tr.RoundTrip(stubtest.Post(resilient.ContextWithReport(context.Background(), rep), "{}"))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err, "the returned body is readable after RoundTrip returns")
		assert.Equal(t, "Created", string(body))
		resp.Body.Close()
		assert.Equal(t, 201, resp.StatusCode)
		assert.Len(t, s.Attempts(), 3)
		assert.GreaterOrEqual(t, time.Since(start), 2*time.Second)
		assert.Equal(t, resilient.CategoryTimeout, rep.Attempts[0].Category)
	})
}

func TestBaseReturningResponseAndError(t *testing.T) {
	both := func(req *http.Request) (*http.Response, error) {
		resp, _ := stubtest.Reply(200)(req)
		return resp, readErr()
	}
	s := stubtest.New(both, stubtest.Reply(200))
	resp, err := do(t, resilient.NewTransport(s, fast()...), stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Len(t, s.Attempts(), 2, "the contract breach is treated as the error it carries")
	assert.Equal(t, s.Opened.Load(), s.Closed.Load())
}

func TestReportRecordsWhatHappened(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201, "Idempotency-Status: replayed"))
	rep := new(resilient.Report)
	ctx := resilient.ContextWithReport(context.Background(), rep)
	_, err := do(t, resilient.NewTransport(s, fast()...), stubtest.Post(ctx, "{}"))
	require.NoError(t, err)
	assert.Equal(t, s.Attempts()[0].Header.Get("Idempotency-Key"), rep.Key)
	require.Len(t, rep.Attempts, 2)
	assert.Equal(t, 503, rep.Attempts[0].StatusCode)
	assert.Equal(t, resilient.Retry, rep.Attempts[0].Action)
	assert.Equal(t, resilient.CategoryUnavailable, rep.Attempts[0].Category)
	assert.True(t, rep.Replayed)
	assert.Nil(t, rep.Stopped)
}

func TestInvalidRequest(t *testing.T) {
	s := stubtest.New(stubtest.Reply(200))
	req, _ := http.NewRequest(http.MethodPost, "http:///x", strings.NewReader("{}"))
	_, err := resilient.NewTransport(s, fast()...).RoundTrip(req)
	require.ErrorIs(t, err, resilient.ErrInvalidRequest)
	assert.Empty(t, s.Attempts())
}

// Regression: a later 429 or 4xx (a rate limiter or a proxy in front of the
// API) must not erase that an earlier attempt may have been applied.
func TestUnknownSurvivesLaterAnswers(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Fail(readErr()), stubtest.Reply(429), stubtest.Reply(400))
	rep := new(resilient.Report)
	ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), "charge:1"), rep)
	resp, err := do(t, resilient.NewTransport(s, fast(resilient.WithStore(store))...), stubtest.Post(ctx, "{}"))
	require.NoError(t, err)
	assert.Equal(t, 400, resp.StatusCode)
	assert.True(t, rep.Unknown, "attempt 0 may have been applied and nothing answered for it")
	pending, err := store.Pending(context.Background())
	require.NoError(t, err)
	assert.Len(t, pending, 1, "the operation stays pending")

	// A success answers for it.
	s2 := stubtest.New(stubtest.Fail(readErr()), stubtest.Reply(429), stubtest.Reply(201, "Idempotency-Status: replayed"))
	rep2 := new(resilient.Report)
	_, err = do(t, resilient.NewTransport(s2, fast()...), stubtest.Post(resilient.ContextWithReport(context.Background(), rep2), "{}"))
	require.NoError(t, err)
	assert.False(t, rep2.Unknown)
}

// Regression: base transports that return a response with a nil Body.
func TestNilResponseBody(t *testing.T) {
	nilBody := func(code int) stubtest.Step {
		return func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: code, Header: http.Header{}, Request: req}, nil
		}
	}
	withErr := func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req}, readErr()
	}
	dedupes := resilient.WithDedupingServer("api.test")
	for _, opts := range [][]resilient.Option{fast(dedupes), fast(dedupes, resilient.WithAttemptTimeout(time.Second))} {
		s := stubtest.New(withErr, nilBody(503), nilBody(200))
		resp, err := resilient.NewTransport(s, opts...).RoundTrip(stubtest.Post(context.Background(), "{}"))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Empty(t, b)
		require.NoError(t, resp.Body.Close())
		assert.Len(t, s.Attempts(), 3)
	}
}

// TestRetryThatCannotRewindKeepsTheLastAnswer: when a retry's body cannot
// be rewound, the caller gets the last answer, as documented, not an error.
func TestRetryThatCannotRewindKeepsTheLastAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(503))
		tr := resilient.NewTransport(s)
		rep := new(resilient.Report)
		req, err := http.NewRequestWithContext(resilient.ContextWithReport(t.Context(), rep), http.MethodPut, "http://api.test/v1/x", strings.NewReader("{}"))
		require.NoError(t, err)
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "Service Unavailable", string(b), "the kept body")
		resp.Body.Close()
		assert.Len(t, s.Attempts(), 1)
		assert.ErrorIs(t, rep.Stopped, resilient.ErrBodyNotReplayable)
		assert.Equal(t, s.Opened.Load(), s.Closed.Load())
	})
}
