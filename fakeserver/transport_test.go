package fakeserver_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

// trackedBody records whether it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

func newPost(t *testing.T, ctx context.Context, body *trackedBody) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, inProcessURL+"/v1/charges", body)
	require.NoError(t, err)
	r.Header.Set("Idempotency-Key", "k")
	return r
}

func TestTransportErrors(t *testing.T) {
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		fault fakeserver.Fault
		want  error
	}{
		{"context done before", expired, fakeserver.Fault{}, context.Canceled},
		{"reset", context.Background(), fakeserver.Fault{Kind: fakeserver.FaultReset}, syscall.ECONNRESET},
		{"lost response", context.Background(), fakeserver.Fault{Kind: fakeserver.FaultLostResponse}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakeserver.NewUnstarted()
			defer s.Close()
			require.NoError(t, s.Enqueue("*", tt.fault))
			body := &trackedBody{Reader: strings.NewReader(`{"a":1}`)}
			r := newPost(t, tt.ctx, body)
			resp, err := s.Transport().RoundTrip(r)
			assert.Nil(t, resp, "a response or an error, not both")
			require.ErrorIs(t, err, tt.want)
			assert.True(t, body.closed.Load(), "the request body is closed on every path")
		})
	}
}

func TestTransportHangReturnsContextError(t *testing.T) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	require.NoError(t, s.Enqueue("*", fakeserver.Fault{Kind: fakeserver.FaultHang}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	resp, err := s.Transport().RoundTrip(newPost(t, ctx, &trackedBody{Reader: strings.NewReader(`{}`)}))
	assert.Nil(t, resp)
	assert.Equal(t, context.DeadlineExceeded, err, "exactly ctx.Err()")
}

func TestCloseReleasesHangsAndRefusesLaterRequests(t *testing.T) {
	s := fakeserver.NewUnstarted()
	require.NoError(t, s.Enqueue("*", fakeserver.Fault{Kind: fakeserver.FaultHang}))
	errc := make(chan error, 1)
	go func() {
		_, err := s.Transport().RoundTrip(newPost(t, context.Background(), &trackedBody{Reader: strings.NewReader(`{}`)}))
		errc <- err
	}()
	require.Eventually(t, func() bool { return s.Stats().InFlight == 1 }, 30*time.Second, time.Millisecond)
	s.Close() // must not wait forever for the hung request
	require.ErrorIs(t, <-errc, io.ErrUnexpectedEOF)

	body := &trackedBody{Reader: strings.NewReader(`{}`)}
	_, err := s.Transport().RoundTrip(newPost(t, context.Background(), body))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.True(t, body.closed.Load())
}

func TestTransportLeavesTheRequestAlone(t *testing.T) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	r := newPost(t, context.Background(), &trackedBody{Reader: strings.NewReader(`{}`)})
	before := r.Header.Clone()
	resp, err := s.Transport().RoundTrip(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, before, r.Header)
	assert.Empty(t, r.RequestURI, "the caller's request is not turned into a server request")
	assert.Same(t, r, resp.Request)
	assert.Equal(t, "201 Created", resp.Status)
	assert.Positive(t, resp.ContentLength)
}

func TestTransportWorksWithClientTimeout(t *testing.T) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	require.NoError(t, s.Enqueue("*", fakeserver.Fault{Kind: fakeserver.FaultHang}))
	c := &http.Client{Transport: s.Transport(), Timeout: 50 * time.Millisecond}
	_, err := do(t, c, inProcessURL, req{key: "k"})
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestUnstartedClientIsInProcess(t *testing.T) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	assert.Empty(t, s.URL)
	r := mustDo(t, s.Client(), inProcessURL, req{key: "k"})
	assert.Equal(t, http.StatusCreated, r.status)
}

// BenchmarkInProcessPost measures a keyed create through the in-process
// transport: the cost per request of a storm simulation.
func BenchmarkInProcessPost(b *testing.B) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	c := &http.Client{Transport: s.Transport()}
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, _ := http.NewRequest(http.MethodPost, inProcessURL+"/v1/charges", strings.NewReader(`{"amount":100,"currency":"usd"}`))
			r.Header.Set("Idempotency-Key", "key-"+strconv.FormatInt(n.Add(1), 10))
			resp, err := c.Do(r)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
