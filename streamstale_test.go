package resilient_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/require"
)

type zeroBackoff struct{}

func (zeroBackoff) Delay(int, time.Duration) time.Duration { return time.Millisecond }

// staleWriter is a base transport that behaves as http.Transport does when
// a server answers before it has read the whole body (a 503 from a proxy
// that then drains the upload, an early 413/401): RoundTrip returns the
// answer while its write loop keeps reading the request body, until the
// body ends. The second attempt answers 200 once it has the whole body.
type staleWriter struct {
	mu        sync.Mutex
	n         int
	firstRead chan struct{} // closed when attempt 1 has read 500 bytes
	retryIn   chan struct{} // closed when attempt 2 has started reading
	wg        sync.WaitGroup
}

func (s *staleWriter) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if n == 1 {
		s.wg.Add(1)
		go func() { // the write loop, still writing after RoundTrip returned
			defer s.wg.Done()
			buf := make([]byte, 100)
			total := 0
			for {
				k, err := req.Body.Read(buf)
				total += k
				if total == 500 {
					close(s.firstRead)
				}
				if err != nil {
					break
				}
			}
			req.Body.Close()
		}()
		<-s.firstRead
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("busy")), Request: req}, nil
	}
	close(s.retryIn)
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(rune(len(b))))), Request: req}, nil
}

// The caller's upload (no GetBody) is 1500 bytes, the replay limit 1000.
// Attempt 1 is answered 503 after 500 bytes while net/http keeps sending
// the rest. A bare client returns the 503; the wrapped one must return the
// 503 or the retry's answer, never an error.
func TestStreamedBodyStaleWriterLeavesTheRetryItsBytes(t *testing.T) {
	base := &staleWriter{firstRead: make(chan struct{}), retryIn: make(chan struct{})}
	tr := resilient.NewTransport(base, resilient.WithMaxBodyBuffer(1000), resilient.WithBackoff(zeroBackoff{}))
	pr, pw := io.Pipe()
	go func() {
		pw.Write(make([]byte, 500))
		<-base.retryIn // the producer goes on once the retry is under way
		time.Sleep(20 * time.Millisecond)
		pw.Write(make([]byte, 1000))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPut, "http://example.test/upload", pr)
	resp, err := tr.RoundTrip(req)
	base.wg.Wait()
	require.NoError(t, err, "bare returns the 503; wrapped returned an error")
	resp.Body.Close()
}
