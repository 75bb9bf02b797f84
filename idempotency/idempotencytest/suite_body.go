package idempotencytest

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// moreRules are the suite's rules of bodies that cannot be read whole and
// of claims held by a live owner; Run runs them after its own.
var moreRules = []struct {
	name string
	run  func(*testing.T, Env)
}{
	{"BodyHalfClosed", bodyHalfClosed},
	{"BodyReadTimeout", bodyReadTimeout},
	{"BodyOuterLimit", bodyOuterLimit},
	{"KeylessInTransaction", keylessInTransaction},
	{"SlowHandlerKeepsClaim", slowHandlerKeepsClaim},
	{"AnswerAtLeaseEnd", answerAtLeaseEnd},
	{"InboxSlowFnKeepsClaim", inboxSlowFnKeepsClaim},
}

// runMore runs moreRules as subtests of t, each on a new Env from f.
func runMore(t *testing.T, f Factory) {
	for _, r := range moreRules {
		t.Run(r.name, func(t *testing.T) { r.run(t, f(t)) })
	}
}

// bodyServer is the app behind the middleware, behind outer (nil: none),
// on a loopback server configured by cfgSrv before it starts.
func bodyServer(t *testing.T, env Env, outer func(http.Handler) http.Handler, cfgSrv func(*http.Server)) *server {
	t.Helper()
	mw, err := idempotency.New(env.Store, idempotency.Config{})
	require.NoError(t, err)
	a := newApp(env)
	var h http.Handler = mw.Handler(a)
	if outer != nil {
		h = outer(h)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", h)
	hs := httptest.NewUnstartedServer(mux)
	if cfgSrv != nil {
		cfgSrv(hs.Config)
	}
	hs.Start()
	s := &server{Server: hs, app: a, mw: mw}
	t.Cleanup(func() {
		close(a.release)
		s.Close()
	})
	return s
}

// partialPost sends, over a raw connection, a keyed POST that announces
// payment's length but sends its first half only; then halfClose closes
// the connection's write side, or not. It returns the answer, read with a
// bound of a minute (the server answers first).
func partialPost(t *testing.T, s *server, key string, halfClose bool) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	head := "POST /v1/payments HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
		"Idempotency-Key: " + key + "\r\nContent-Length: " + strconv.Itoa(len(payment)) + "\r\n\r\n"
	_, err = conn.Write([]byte(head + payment[:len(payment)/2]))
	require.NoError(t, err)
	if halfClose {
		require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the server answers a body it could not read")
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// assertNothingStored checks that key ran nothing and stored nothing: the
// whole request then runs once, as a first request.
func assertNothingStored(t *testing.T, env Env, s *server, key string) {
	t.Helper()
	assert.Equal(t, 0, env.Count(key), "the handler did not run")
	a := s.post(t, "/v1/payments", key, payment)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	assert.Equal(t, idempotency.StatusStored, a.header.Get("Idempotency-Status"), "nothing was stored: the whole request runs")
	assert.Equal(t, 1, env.Count(key))
}

// readAnswer reads resp whole as an answer.
func readAnswer(t *testing.T, resp *http.Response) answer {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

// bodyHalfClosed: the client stops sending mid-body (it half-closes its
// connection): 400, never the implicit 200 of a handler that did not run.
func bodyHalfClosed(t *testing.T, env Env) {
	s := bodyServer(t, env, nil, nil)
	a := readAnswer(t, partialPost(t, s, "halfclosed", true))
	assertProblem(t, a, http.StatusBadRequest, "incomplete-body")
	assertNothingStored(t, env, s, "halfclosed")
}

// bodyReadTimeout: the server's ReadTimeout fires mid-body: 408.
func bodyReadTimeout(t *testing.T, env Env) {
	s := bodyServer(t, env, nil, func(hs *http.Server) { hs.ReadTimeout = 200 * time.Millisecond })
	a := readAnswer(t, partialPost(t, s, "timedout", false))
	assertProblem(t, a, http.StatusRequestTimeout, "body-timeout")
	assert.Equal(t, 0, env.Count("timedout"), "the handler did not run")
	// The rest of the check on a server without the deadline: the same
	// store, so the same records.
	assertNothingStored(t, env, bodyServer(t, env, nil, nil), "timedout")
}

// bodyOuterLimit: an http.MaxBytesReader outside the middleware is smaller
// than the body: 413.
func bodyOuterLimit(t *testing.T, env Env) {
	limit := func(n int64) func(http.Handler) http.Handler {
		return func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Body = http.MaxBytesReader(w, r.Body, n)
				h.ServeHTTP(w, r)
			})
		}
	}
	s := bodyServer(t, env, limit(8), nil)
	a := s.post(t, "/v1/payments", "outerlimit", payment)
	assertProblem(t, a, http.StatusRequestEntityTooLarge, "too-large")
	assert.Contains(t, string(a.body), "larger than 8 bytes")
	assertNothingStored(t, env, bodyServer(t, env, limit(1<<20), nil), "outerlimit")
}

// keylessInTransaction: a request without a key runs as it is, unstored;
// with a TxStore (Postgres) in a transaction of its own, committed with a
// 2xx and rolled back with a 5xx or a panic.
func keylessInTransaction(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	a := s.post(t, "/v1/payments", "", payment, "X-Effect", "keyless")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	assert.Empty(t, a.header.Values("Idempotency-Status"))
	assert.Equal(t, 1, env.Count("keyless"))
	f := s.post(t, "/v1/payments", "", payment, "X-Effect", "keyless-500", "X-Behave", "500")
	assert.Equal(t, http.StatusInternalServerError, f.status)
	_, err := s.send(t, context.Background(), http.MethodPost, "/v1/payments", "", payment, "X-Effect", "keyless-panic", "X-Behave", "panic")
	assert.Error(t, err, "net/http drops the connection of a handler that panicked")
	if _, ok := env.Store.(idempotency.TxStore); ok {
		assert.Equal(t, 0, env.Count("keyless-500"), "a 5xx rolls the transaction back")
		assert.Equal(t, 0, env.Count("keyless-panic"), "a panic rolls it back")
		return
	}
	assert.Equal(t, 1, env.Count("keyless-500"))
	assert.Equal(t, 1, env.Count("keyless-panic"))
}
