package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// failingServer is an HTTP server on 127.0.0.1 that stands for a payments
// API under strain: it answers 503 to a fixed fraction of the requests it
// receives, spread evenly (request n fails when ⌊(n+1)·rate⌋ > ⌊n·rate⌋),
// without applying them, and 201 to the others, creating one charge per
// idempotency key. Even spreading, rather than chance, makes every run of
// the example show the same picture.
//
// It dedupes by Idempotency-Key, and says so the way Stripe does: it echoes
// the request's key on every answer, the 503s included. That echo is what
// lets the Transport re-send a POST answered 503 (which may have been
// applied, for all a client knows); without it, or
// resilient.WithDedupingServer, the first 503 would be returned as is
// (ErrUnsafeRetry) and there would be no retries to control. The example
// lets the server show it rather than declaring it, so that every
// configuration compared gets the same evidence from the same answers.
type failingServer struct {
	*httptest.Server
	rate float64

	mu       sync.Mutex
	received int
	created  map[string]bool // key → charge created
	replays  int             // requests answered from the key store
}

func newFailingServer(rate float64) *failingServer {
	s := &failingServer{rate: rate, created: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *failingServer) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	if key != "" {
		w.Header().Set("Idempotency-Key", key) // the echo: this server dedupes by key
	}
	s.mu.Lock()
	n := s.received
	s.received++
	fail := int(float64(n+1)*s.rate) > int(float64(n)*s.rate)
	replay := !fail && key != "" && s.created[key]
	switch {
	case replay:
		s.replays++
	case !fail && key != "":
		s.created[key] = true
	}
	s.mu.Unlock()
	switch {
	case fail:
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	case replay:
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

// requests returns how many requests reached the server.
func (s *failingServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}

// effects returns how many charges the server created, and how many
// requests it answered from its key store instead.
func (s *failingServer) effects() (created, replays int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created), s.replays
}
