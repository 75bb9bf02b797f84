package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/idempotency"
)

// lossyServer serves POST /v1/payments through handler and, once armed,
// drops the answer of the next request after the handler completed (and,
// behind the middleware, stored it): the client sees the connection close
// with no answer, as when a response is lost after commit.
type lossyServer struct {
	*httptest.Server
	armed   atomic.Bool
	mu      sync.Mutex
	effects map[string]int // by Idempotency-Key
	seen    map[string]int // requests by Idempotency-Key
}

func newLossyServer(t *testing.T, wrap func(http.Handler) http.Handler) *lossyServer {
	s := &lossyServer{effects: map[string]int{}, seen: map[string]int{}}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.effects[r.Header.Get("Idempotency-Key")]++
		n := len(s.effects)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id": "pay_`+strings.Repeat("1", n)+`"}`)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", wrap(app))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen[r.Header.Get("Idempotency-Key")]++
		s.mu.Unlock()
		if !s.armed.CompareAndSwap(true, false) {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(httptest.NewRecorder(), r) // the effect, committed; its answer is lost
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.Close()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *lossyServer) counts(key string) (effects, seen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[key], s.seen[key]
}

// pay sends one payment with a client of default options.
func pay(t *testing.T, c *http.Client, url string) (*http.Response, []byte, *resilient.Report, error) {
	rep := &resilient.Report{}
	req, err := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), rep),
		http.MethodPost, url+"/v1/payments", bytes.NewReader([]byte(`{"amount": 1000}`)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, rep, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body, rep, nil
}

// A client with resilient's defaults, against the middleware: a POST whose
// answer is lost after commit is retried with its key and gets the replay,
// one effect, with no WithDedupingServer; the stored answers of the route
// showed that the server dedupes. Against a plain handler it is not
// retried: the outcome is unknown, as with a bare client.
func TestClientDefaultsRetryLostAnswerIntoReplay(t *testing.T) {
	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{})
	require.NoError(t, err)
	tests := []struct {
		name  string
		wrap  func(http.Handler) http.Handler
		retry bool
	}{
		{"middleware", mw.Handler, true},
		{"plain handler", func(h http.Handler) http.Handler { return h }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newLossyServer(t, tt.wrap)
			client := resilient.NewClient()
			defer client.CloseIdleConnections()

			resp, _, _, err := pay(t, client, srv.URL)
			require.NoError(t, err, "a first payment, answered")
			assert.Equal(t, http.StatusCreated, resp.StatusCode)

			srv.armed.Store(true)
			resp, body, rep, err := pay(t, client, srv.URL)
			effects, seen := srv.counts(rep.Key)
			require.NotEmpty(t, rep.Key, "the client keyed the POST")
			assert.Equal(t, 1, effects, "one effect, whatever happens")
			if !tt.retry {
				require.Error(t, err)
				var rerr *resilient.Error
				require.True(t, errors.As(err, &rerr), "%v", err)
				assert.True(t, rerr.Unknown, "the outcome is unknown, as for a bare client")
				assert.Equal(t, 1, seen, "not re-sent: nothing shows the server dedupes")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, idempotency.StatusReplayed, resp.Header.Get("Idempotency-Status"))
			assert.JSONEq(t, `{"id": "pay_11"}`, string(body), "the answer of the run whose answer was lost")
			assert.Equal(t, 2, seen, "re-sent once, with its key")
		})
	}
}

// The first POST a client ever sends to a route has no evidence yet that
// the server dedupes: its lost answer is not retried (the client is never
// worse than a bare one), and its effect stays one.
func TestClientFirstPostToARouteIsNotRetried(t *testing.T) {
	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{})
	require.NoError(t, err)
	srv := newLossyServer(t, mw.Handler)
	client := resilient.NewClient()
	defer client.CloseIdleConnections()
	srv.armed.Store(true)
	_, _, rep, err := pay(t, client, srv.URL)
	require.Error(t, err)
	effects, seen := srv.counts(rep.Key)
	assert.Equal(t, 1, effects)
	assert.Equal(t, 1, seen)
}
