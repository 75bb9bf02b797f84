package resilient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/wire"

	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stalledBody yields some bytes, then blocks until closed.
type stalledBody struct {
	sent   bool
	closed chan struct{}
	once   sync.Once
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "partial"), nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *stalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// endlessBody never ends, and counts what is read of it.
type endlessBody struct{ read atomic.Int64 }

func (b *endlessBody) Read(p []byte) (int, error) {
	b.read.Add(int64(len(p)))
	return len(p), nil
}
func (b *endlessBody) Close() error { return nil }

// Regression: a retryable answer whose retry is then not sent reaches the
// caller whole, as a bare client's would: a body over the drain limit, and
// one that stalls before its end, were cut (the caller got an *Error).
func TestKeptAnswerIsWholeWhenTheRetryIsNotSent(t *testing.T) {
	big := strings.Repeat("x", 3*wire.DrainLimit+17)
	tests := []struct {
		name string
		body func() io.ReadCloser
		want string
	}{
		{"short", func() io.ReadCloser { return io.NopCloser(strings.NewReader("busy")) }, "busy"},
		{"over the drain limit", func() io.ReadCloser { return io.NopCloser(strings.NewReader(big)) }, big},
		{"stalls, then ends", func() io.ReadCloser { return &slowBody{parts: []string{"par", "tial"}, gap: time.Second} }, "partial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: tt.body(), Request: req}, nil
				})
				tr := NewTransport(base, WithBackoff(nil), WithDedupingServer("api.test"))
				req := stubtest.Post(context.Background(), "{}")
				calls := 0
				req.GetBody = func() (io.ReadCloser, error) {
					calls++
					return nil, errors.New("gone") // the retry cannot be sent
				}
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err, "the last answer stands")
				defer resp.Body.Close()
				assert.Equal(t, 503, resp.StatusCode)
				got, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(got))
				assert.Equal(t, 1, calls, "the retry was tried")
			})
		})
	}
}

// slowBody returns parts one at a time, gap apart.
type slowBody struct {
	parts []string
	gap   time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap)
	n := copy(p, b.parts[0])
	b.parts = b.parts[1:]
	return n, nil
}
func (b *slowBody) Close() error { return nil }

// A discarded body is drained bounded in bytes and in time: a body that
// stalls mid-way does not hold the retry loop, an endless one is not read
// to its end.
func TestDiscardIsBounded(t *testing.T) {
	t.Run("stalled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := 0
			base := RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				n++
				if n == 1 {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: &stalledBody{closed: make(chan struct{})}, Request: req}, nil
				}
				return &http.Response{StatusCode: 201, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			})
			tr := NewTransport(base, WithBackoff(nil), WithDedupingServer("api.test"))
			start := time.Now()
			resp, err := tr.RoundTrip(stubtest.Post(context.Background(), "{}"))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 201, resp.StatusCode)
			assert.Zero(t, time.Since(start), "the drain runs beside the backoff: a stalled body holds nothing")
		})
	})
	t.Run("endless", func(t *testing.T) {
		body := &endlessBody{}
		wire.Discard(&http.Response{Body: body})
		assert.LessOrEqual(t, body.read.Load(), int64(wire.DrainLimit))
	})
}
