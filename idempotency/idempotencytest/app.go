package idempotencytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
)

// app is the handler under test. Each request applies one effect named by
// its X-Effect header (else its key), then answers as X-Behave says:
//
//	(none)   201 with a JSON body numbered by run, Location, X-Request-Id, two Link values
//	panic    panics after the effect
//	500      answers 500 after the effect
//	big      writes a 4 KiB body after the effect
//	block    signals started, then waits for release (or its context)
//	429      answers 429 before any effect, setting Idempotency-Status itself
//	503      answers 503 before any effect, as a server-side budget sheds load
//	stream   tries to flush and hijack, and says what it got
type app struct {
	env     Env
	runs    atomic.Int64
	started chan string   // a blocking run sends its effect name once applied
	release chan struct{} // closed to let blocking runs finish
}

func newApp(env Env) *app {
	return &app{env: env, started: make(chan string, 128), release: make(chan struct{})}
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.Header.Get("X-Effect")
	if name == "" {
		name = r.Header.Get("Idempotency-Key")
	}
	body, _ := io.ReadAll(r.Body)
	switch r.Header.Get("X-Behave") {
	case "429":
		w.Header().Set("Idempotency-Status", "stored") // a handler's own header, stripped: nothing is stored
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case "503":
		w.Header().Set("Retry-After", "1")
		http.Error(w, "shed", http.StatusServiceUnavailable)
		return
	case "stream":
		flushErr := http.NewResponseController(w).Flush()
		_, hijacker := w.(http.Hijacker)
		_, flusher := w.(http.Flusher)
		fmt.Fprintf(w, "flush: %v; flusher %v; hijacker %v", errors.Is(flushErr, http.ErrNotSupported), flusher, hijacker)
		return
	}
	if err := a.env.Apply(r.Context(), name); err != nil {
		http.Error(w, "apply: "+err.Error(), http.StatusInternalServerError)
		return
	}
	switch r.Header.Get("X-Behave") {
	case "panic":
		panic("idempotencytest: the handler panics")
	case "500":
		http.Error(w, "the handler failed", http.StatusInternalServerError)
		return
	case "big":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte("x"), 4096))
		return
	case "block":
		a.started <- name
		select {
		case <-a.release:
		case <-r.Context().Done():
		}
	}
	run := a.runs.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/v1/payments/pay_%d", run))
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_%d_%d", run, time.Now().UnixNano()))
	w.Header().Add("Link", `</v1/payments>; rel="collection"`)
	w.Header().Add("Link", `</v1/docs>; rel="help"`)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("pay_%d", run), "effect": name, "bytes": len(body)})
}

// server is the app behind the middleware on a loopback server, routed
// by an http.ServeMux so that the scope's route is the pattern.
type server struct {
	*httptest.Server
	app *app
	mw  *idempotency.Middleware
}

func newServer(t testing.TB, env Env, cfg idempotency.Config) *server {
	t.Helper()
	mw, err := idempotency.New(env.Store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(env)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Handler(a))
	mux.Handle("POST /v1/refunds", mw.Handler(a))
	mux.Handle("POST /v1/payments/{id}/capture", mw.Handler(a))
	mux.Handle("GET /v1/payments", mw.Handler(a))
	s := &server{Server: httptest.NewServer(mux), app: a, mw: mw}
	t.Cleanup(func() {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
		s.Close()
	})
	return s
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string {
	return fmt.Sprintf("%d %v %q", a.status, a.header, a.body)
}

// post sends method path with key (none if "") and header pairs (name,
// value, ...); a header pair may repeat a name.
func (s *server) send(t testing.TB, ctx context.Context, method, path, key, body string, header ...string) (answer, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header, b}, nil
}

// post is send of a POST that must get an answer.
func (s *server) post(t testing.TB, path, key, body string, header ...string) answer {
	t.Helper()
	a, err := s.send(t, context.Background(), http.MethodPost, path, key, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
