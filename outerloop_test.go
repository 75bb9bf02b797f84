package resilient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkRequest is attempt n (from 0) of an SDK call as the SDK of marks
// sends it, with body.
type sdkRequest func(n int, body string) *http.Request

var (
	stainless sdkRequest = func(n int, body string) *http.Request {
		req := stubtest.Post(context.Background(), body)
		req.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(n))
		return req
	}
	awsSDK = func(id string, max int) sdkRequest {
		return func(n int, body string) *http.Request {
			req := stubtest.Post(context.Background(), body)
			req.Header.Set("Amz-Sdk-Invocation-Id", id)
			req.Header.Set("Amz-Sdk-Request", "attempt="+strconv.Itoa(n+1)+"; max="+strconv.Itoa(max))
			return req
		}
	}
	unmarked sdkRequest = func(_ int, body string) *http.Request { return stubtest.Post(context.Background(), body) }
)

// roundTrips makes calls RoundTrips of one SDK call and returns the
// responses' statuses (0 for an error) and the errors.
func roundTrips(t *testing.T, tr http.RoundTripper, sdk sdkRequest, calls int, body string) ([]int, []error) {
	t.Helper()
	var codes []int
	var errs []error
	for n := range calls {
		resp, err := tr.RoundTrip(sdk(n, body))
		errs = append(errs, err)
		if err != nil {
			codes = append(codes, 0)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	return codes, errs
}

func keysOf(s *stubtest.Stub) (keys, attempts []string) {
	for _, a := range s.Attempts() {
		keys = append(keys, a.Header.Get("Idempotency-Key"))
		attempts = append(attempts, a.Header.Get("Retry-Attempt"))
	}
	return keys, attempts
}

// TestOuterLoopDrives: a request of an SDK that retries on its own gets one
// attempt per RoundTrip, numbered as the SDK counts, under one key per SDK
// call; without marks, or told the SDK does not retry, the Transport
// retries as it does for any request.
func TestOuterLoopDrives(t *testing.T) {
	const id = "0f8fad5b-d9cb-469f-a165-70867728950e"
	tests := []struct {
		name         string
		sdk          sdkRequest
		opts         []resilient.Option
		calls        int
		wantAttempts []string // Retry-Attempt of each attempt sent
		wantKey      string   // the key of every attempt; "" for one key, whichever
		oneKey       bool
	}{
		{"stainless: the SDK drives, one key", stainless, nil, 3, []string{"", "1", "2"}, "", true},
		{"aws: the SDK drives, its invocation id is the key", awsSDK(id, 4), nil, 4, []string{"", "1", "2", "3"}, id, true},
		{"aws max=1: the Transport drives", awsSDK(id, 1), nil, 1, []string{"", "1", "2", "3"}, id, true},
		{"stainless, WithOuterRetries(false): the Transport drives", stainless, []resilient.Option{resilient.WithOuterRetries(false)}, 1, []string{"", "1", "2", "3"}, "", true},
		{"no marks: the Transport drives the first call, its re-send defers, a key per call", unmarked, nil, 2, []string{"", "1", "2", "3", ""}, "", false},
		{"no marks, WithOuterRetries(true): one attempt per call", unmarked, []resilient.Option{resilient.WithOuterRetries(true)}, 3, []string{"", "", ""}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stubtest.New(stubtest.Reply(http.StatusServiceUnavailable))
			opts := append([]resilient.Option{resilient.WithBackoff(nil), resilient.WithDedupingServer("api.test"), resilient.WithRetryControl()}, tt.opts...)
			tr := resilient.NewTransport(s, opts...)
			codes, errs := roundTrips(t, tr, tt.sdk, tt.calls, `{"a":1}`)
			for i := range codes {
				require.NoError(t, errs[i])
				assert.Equal(t, http.StatusServiceUnavailable, codes[i], "the server's answer reaches the SDK")
			}
			keys, attempts := keysOf(s)
			assert.Equal(t, tt.wantAttempts, attempts)
			if tt.wantKey != "" {
				for _, k := range keys {
					assert.Equal(t, tt.wantKey, k)
				}
			}
			distinct := map[string]bool{}
			for _, k := range keys {
				assert.NotEmpty(t, k)
				distinct[k] = true
			}
			if tt.oneKey {
				assert.Len(t, distinct, 1, "one key per SDK call")
			} else {
				assert.Greater(t, len(distinct), 1, "a key per call")
			}
		})
	}
}

// TestOuterLoopKeys: a Stainless retry takes the key of the one pending call
// it continues, and a new key when it cannot tell which (two identical
// calls at once), when the body differs, or when the call it would
// continue has succeeded.
func TestOuterLoopKeys(t *testing.T) {
	t.Run("two calls at once with one body: never one key for both", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusInternalServerError))
		tr := resilient.NewTransport(s, resilient.WithDedupingServer("api.test"))
		for n := range 2 {
			for range 2 { // call A's attempt n, then call B's
				resp, err := tr.RoundTrip(stainless(n, `{"a":1}`))
				require.NoError(t, err)
				resp.Body.Close()
			}
		}
		keys, _ := keysOf(s)
		require.Len(t, keys, 4)
		assert.NotEqual(t, keys[0], keys[1], "two first attempts: two calls")
		for _, k := range keys[2:] {
			assert.NotEqual(t, keys[0], k, "a retry that could continue either call gets a key of its own")
			assert.NotEqual(t, keys[1], k)
		}
		assert.NotEqual(t, keys[2], keys[3])
	})
	t.Run("another body is another call", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusInternalServerError))
		tr := resilient.NewTransport(s)
		roundTrips(t, tr, stainless, 1, `{"a":1}`)
		resp, err := tr.RoundTrip(stainless(1, `{"a":2}`))
		require.NoError(t, err)
		resp.Body.Close()
		keys, _ := keysOf(s)
		assert.NotEqual(t, keys[0], keys[1])
	})
	t.Run("a call that succeeded is not continued", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusOK), stubtest.Reply(http.StatusInternalServerError))
		tr := resilient.NewTransport(s)
		roundTrips(t, tr, stainless, 1, `{"a":1}`) // call A: 200
		roundTrips(t, tr, stainless, 2, `{"a":1}`) // call B: 500, then its retry
		keys, _ := keysOf(s)
		require.Len(t, keys, 3)
		assert.NotEqual(t, keys[0], keys[1], "A and B")
		assert.Equal(t, keys[1], keys[2], "B's retry continues B")
	})
	t.Run("the application's key stays", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusInternalServerError))
		tr := resilient.NewTransport(s)
		for n := range 2 {
			req := stainless(n, `{"a":1}`)
			req.Header.Set("Idempotency-Key", "mine")
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		keys, attempts := keysOf(s)
		assert.Equal(t, []string{"mine", "mine"}, keys)
		assert.Equal(t, []string{"", "1"}, attempts)
	})
}

// TestOuterLoopReport: the Report numbers the attempt as the SDK does.
func TestOuterLoopReport(t *testing.T) {
	s := stubtest.New(stubtest.ReplyDeduping(http.StatusInternalServerError))
	tr := resilient.NewTransport(s)
	roundTrips(t, tr, stainless, 2, `{"a":1}`)
	rep := new(resilient.Report)
	req := stainless(2, `{"a":1}`)
	resp, err := tr.RoundTrip(req.WithContext(resilient.ContextWithReport(context.Background(), rep)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, rep.Attempts, 1)
	assert.Equal(t, 2, rep.Attempts[0].Attempt)
	assert.ErrorIs(t, rep.Stopped, resilient.ErrRetriesExhausted, "the call's one attempt is used: the SDK retries")
	keys, _ := keysOf(s)
	assert.Equal(t, keys[0], rep.Key)
}

// TestOuterLoopRefusal: the gate governs the SDK's retries. A retry it
// refuses is not sent, and the SDK gets what it does not retry: a Stainless
// SDK a 503 with X-Should-Retry: false, an AWS SDK an *Error.
func TestOuterLoopRefusal(t *testing.T) {
	noTokens := resilient.WithRetryControl(resilient.RetryTokens{MinTokens: 1, CapRatio: 0, Refill: 0})
	t.Run("stainless: a refusal response", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusInternalServerError))
		tr := resilient.NewTransport(s, noTokens)
		codes, errs := roundTrips(t, tr, stainless, 3, `{"a":1}`) // 1 token: the first retry only
		assert.Equal(t, []int{500, 500, 503}, codes)
		assert.Equal(t, []error{nil, nil, nil}, errs)
		assert.Len(t, s.Attempts(), 2, "the refused retry was not sent")
		resp, err := tr.RoundTrip(stainless(3, `{"a":1}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		assert.Equal(t, "tokens_exhausted", resp.Header.Get("Resilient-Refused"))
	})
	t.Run("aws: an *Error", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusInternalServerError))
		tr := resilient.NewTransport(s, noTokens)
		codes, errs := roundTrips(t, tr, awsSDK("0f8fad5b-d9cb-469f-a165-70867728950e", 4), 3, `{"a":1}`)
		assert.Equal(t, []int{500, 500, 0}, codes)
		assert.ErrorIs(t, errs[2], resilient.ErrTokensExhausted)
		var re *resilient.Error
		require.True(t, errors.As(errs[2], &re))
		assert.Zero(t, re.Attempts)
		assert.Len(t, s.Attempts(), 2)
	})
	t.Run("pushback refuses the SDK's retries", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusTooManyRequests, "Retry-After: 5", "X-Should-Retry: false"))
		tr := resilient.NewTransport(s)
		codes, _ := roundTrips(t, tr, stainless, 2, `{"a":1}`)
		assert.Equal(t, []int{429, 503}, codes)
		assert.Len(t, s.Attempts(), 1)
	})
	t.Run("a first attempt is never refused", func(t *testing.T) {
		s := stubtest.New(stubtest.Reply(http.StatusTooManyRequests, "Retry-After: 5", "X-Should-Retry: false"))
		tr := resilient.NewTransport(s)
		roundTrips(t, tr, stainless, 1, `{"a":1}`)
		codes, _ := roundTrips(t, tr, stainless, 1, `{"b":1}`)
		assert.Equal(t, []int{429}, codes)
		assert.Len(t, s.Attempts(), 2)
	})
}

// TestOuterLoopNoWait: the SDK chooses when to retry; the Transport adds no
// wait of its own. The one wait it adds is the server's: a retry the SDK
// sends sooner than the server's Retry-After waits what is left of it (an
// SDK that ignores the header is held to it; one that honours it waits
// nothing more).
func TestOuterLoopNoWait(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers []string
		want    time.Duration
	}{
		{"no delay asked", nil, 0},
		{"Retry-After: 3 on each answer", []string{"Retry-After: 3"}, 6 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := stubtest.New(stubtest.ReplyDeduping(http.StatusServiceUnavailable, tt.headers...))
				tr := resilient.NewTransport(s)
				start := time.Now()
				roundTrips(t, tr, stainless, 3, `{"a":1}`)
				assert.Equal(t, tt.want, time.Since(start), "virtual time")
				assert.Len(t, s.Attempts(), 3)
			})
		})
	}
}
