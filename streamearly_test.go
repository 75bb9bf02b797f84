package resilient_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/require"
)

// Regression, over real sockets: a server answers 503 at once and goes on
// reading the upload (a proxy that drains it, full duplex). The retry of
// the upload (no GetBody, within the limit when the 503 came) failed
// mid-body, because the first attempt's write loop went on taking the
// caller's bytes past the limit. Now only the newest attempt takes them,
// and a read already under way hands its bytes to it.
func TestStreamedBodyAnsweredEarlyIsRetriedWhole(t *testing.T) {
	var n atomic.Int32
	retryIn := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.NewResponseController(w).EnableFullDuplex()
			w.WriteHeader(503)
			http.NewResponseController(w).Flush()
			io.Copy(io.Discard, r.Body)
			return
		}
		close(retryIn)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
	}))
	defer srv.Close()
	bare := func() *http.Transport { return &http.Transport{} }
	for _, wrapped := range []bool{false, true} {
		n.Store(0)
		retryIn = make(chan struct{})
		var rt http.RoundTripper = bare()
		if wrapped {
			rt = resilient.NewTransport(bare(), resilient.WithMaxBodyBuffer(1000), resilient.WithBackoff(zeroBackoff{}))
		}
		pr, pw := io.Pipe()
		go func() {
			pw.Write(make([]byte, 500))
			if wrapped {
				<-retryIn
			}
			pw.Write(make([]byte, 1000))
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPut, srv.URL, pr)
		resp, err := rt.RoundTrip(req)
		if !wrapped {
			// bare: the 503 while the body still goes; finish sending it
			require.NoError(t, err)
			require.Equal(t, 503, resp.StatusCode)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			continue
		}
		require.NoError(t, err, "wrapped: an error where bare returns the 503")
		t.Logf("wrapped: %d", resp.StatusCode)
		resp.Body.Close()
	}
}
