package pushback_test

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// nopWriter is a reusable ResponseWriter that keeps the status and headers
// and discards the body.
type nopWriter struct {
	h      http.Header
	status int
	body   int
}

func newNopWriter() *nopWriter { return &nopWriter{h: make(http.Header)} }

func (w *nopWriter) Header() http.Header { return w.h }
func (w *nopWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *nopWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body += len(p)
	return len(p), nil
}

// reset forgets the answer, keeping the header map.
func (w *nopWriter) reset() {
	clear(w.h)
	w.status, w.body = 0, 0
}

// request returns a POST with the given header pairs.
func request(kv ...string) *http.Request {
	r, err := http.NewRequest(http.MethodPost, "http://api.test/v1/charges", http.NoBody)
	if err != nil {
		panic(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

// first and retry are requests as resilient sends them.
func first() *http.Request         { return request("Retry-Attempt", "0") }
func retry(n string) *http.Request { return request("Retry-Attempt", n) }

// status returns a handler that answers code.
func status(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
}

// serve runs h on r and returns the answer.
func serve(h http.Handler, r *http.Request) *nopWriter {
	w := newNopWriter()
	h.ServeHTTP(w, r)
	return w
}

// refused reports whether w holds a pushback answer written in place of the
// handler's.
func refused(w *nopWriter) bool {
	return w.h.Get("Content-Type") == "application/problem+json"
}
