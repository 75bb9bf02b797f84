package resilient

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFirstAttemptWaitsForAPause: a 429 with Retry-After holds back the
// first attempts that follow it, when the wait fits their deadline.
func TestFirstAttemptWaitsForAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Duration
		start := time.Now()
		base := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			code, h := http.StatusOK, http.Header{}
			if len(sent) == 2 {
				code = http.StatusTooManyRequests
				h.Set("Retry-After", "3")
			}
			return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
		})
		tr := NewTransport(base, WithMaxAttempts(1))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		require.Equal(t, 429, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		assert.Equal(t, []time.Duration{0, 0, 3 * time.Second}, sent)
	})
}

// TestExpiredPauseIsCleared: once a server's pause has ended, the next
// request clears it.
func TestExpiredPauseIsCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(pausing(http.StatusTooManyRequests, "2"), WithMaxAttempts(1))
		pause, _ := http.NewRequest(http.MethodGet, "http://api.test/pause", nil)
		require.Equal(t, 429, roundTrip(t, tr, pause))
		v, _ := tr.hosts.M.Load("api.test")
		h := v.(*host.State)
		require.NotZero(t, h.Pauses.PauseUntil.Load())
		time.Sleep(3 * time.Second)
		require.Equal(t, 200, roundTrip(t, tr, stubtest.Get(context.Background(), "api.test")))
		assert.Zero(t, h.Pauses.PauseUntil.Load(), "the ended pause is cleared")
	})
}

// A 503's Retry-After holds back retries to the host, never first attempts:
// a new operation is sent at once. A 429's holds back first attempts too,
// when it fits their deadline; when it does not, they go out as a bare
// client's would.
func TestServerPauses(t *testing.T) {
	tests := []struct {
		name      string
		code      int
		deadline  time.Duration
		wantDelay bool
	}{
		{"503 does not hold first attempts", 503, time.Hour, false},
		{"429 holds first attempts", 429, time.Hour, true},
		{"429 does not hold a first attempt past its deadline", 429, 5 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := stubtest.New(stubtest.Deduping([]int{tt.code, 201}, "Retry-After: 10")...)
				tr := NewTransport(s, WithMaxAttempts(1))
				resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
				require.NoError(t, err)
				resp.Body.Close()
				ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
				defer cancel()
				start := time.Now()
				resp, err = tr.RoundTrip(stubtest.Post(ctx, "{}"))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 201, resp.StatusCode)
				assert.Equal(t, tt.wantDelay, time.Since(start) >= 10*time.Second, "held back for the pause")
			})
		})
	}
}
