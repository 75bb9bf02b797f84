package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// failingServer is an HTTP server on 127.0.0.1 that answers 503 to a fixed
// fraction of the requests it receives, spread evenly (request n fails when
// ⌊(n+1)·rate⌋ > ⌊n·rate⌋), and 201 to the others. Even spreading, rather than
// chance, makes every run of the example show the same picture.
type failingServer struct {
	*httptest.Server
	rate float64

	mu       sync.Mutex
	received int
}

func newFailingServer(rate float64) *failingServer {
	s := &failingServer{rate: rate}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *failingServer) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	n := s.received
	s.received++
	s.mu.Unlock()
	if int(float64(n+1)*s.rate) > int(float64(n)*s.rate) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// requests returns how many requests reached the server.
func (s *failingServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}
