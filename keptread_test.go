package resilient_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/require"
)

// Regression: a retryable answer whose body streams (first bytes, then
// more later): when the retry is then not sent (here GetBody fails), the
// caller reads the first bytes as they come, as from a bare client. The
// kept body used to block its first Read until 64 KiB or EOF.
func TestKeptAnswerShowsItsFirstBytesAtOnce(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
		w.Write([]byte("first"))
		http.NewResponseController(w).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	for _, wrapped := range []bool{false, true} {
		var rt http.RoundTripper = &http.Transport{}
		if wrapped {
			rt = resilient.NewTransport(rt, resilient.WithBackoff(zeroBackoff{}))
		}
		calls := 0
		req, _ := http.NewRequest(http.MethodPut, srv.URL, bytes.NewReader([]byte("x")))
		req.GetBody = func() (io.ReadCloser, error) {
			calls++
			if calls > 0 {
				return nil, errors.New("gone")
			}
			return io.NopCloser(bytes.NewReader([]byte("x"))), nil
		}
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, 503, resp.StatusCode)
		got := make(chan string, 1)
		go func() {
			b := make([]byte, 16)
			n, _ := resp.Body.Read(b)
			got <- string(b[:n])
		}()
		select {
		case s := <-got:
			require.Equal(t, "first", s)
		case <-time.After(2 * time.Second):
			resp.Body.Close()
			<-got
			t.Fatalf("wrapped=%v: first Read of the 503's body blocked (bare returns %q at once)", wrapped, "first")
		}
		resp.Body.Close()
	}
}
