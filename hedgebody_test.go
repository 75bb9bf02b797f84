package resilient_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
)

type trackedBody struct {
	r      io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("read after close")
	}
	return b.r.Read(p)
}
func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// lateReader answers at once and reads the body afterwards, as net/http's
// write loop may (RoundTrip may return before the body is written).
type lateReader struct {
	wg  sync.WaitGroup
	err atomic.Value
}

func (l *lateReader) RoundTrip(req *http.Request) (*http.Response, error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		time.Sleep(50 * time.Millisecond)
		_, err := io.ReadAll(req.Body)
		if err != nil {
			l.err.Store(err)
		}
		req.Body.Close()
	}()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// Regression: with hedging on, the first attempt's body (the caller's,
// with GetBody) belongs to the base transport; the Transport must not close
// it when the call ends (hedged() had stopped clearing c.op.body.first:
// only the copy's was cleared).
func TestHedgedFirstBodyIsTheBaseTransports(t *testing.T) {
	base := &lateReader{}
	tr := resilient.NewTransport(base, resilient.WithHedging(resilient.HedgingConfig{Delay: time.Hour}))
	body := &trackedBody{r: bytes.NewReader([]byte("payload"))}
	req, _ := http.NewRequest(http.MethodPut, "http://example.test/x", body)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte("payload"))), nil }
	resp, err := tr.RoundTrip(req)
	assert.NoError(t, err)
	resp.Body.Close()
	base.wg.Wait()
	assert.Nil(t, base.err.Load(), "the Transport closed the body the base transport was still sending")
}
