package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// newProvider starts a fake payment provider on 127.0.0.1. Each route fails
// the first request it sees for an idempotency key in its own way, then
// answers 201; /v1/duplicate always says the charge exists.
//
//	POST /v1/declined     400 {"code":"card_declined_try_again"}, then 201
//	POST /v1/required     402 with Provider-Should-Retry: true, then 201
//	POST /v1/invalid      400 {"code":"invalid_amount"}, always
//	POST /v1/duplicate    200 {"status":"duplicate","id":"ch_0"}, always
//
// Like Stripe, the provider echoes the request's Idempotency-Key on every
// answer. That is how a server shows that it dedupes by key, and what lets
// the Transport re-send a POST whose answer the classifier calls retryable:
// without it (or resilient.WithDedupingServer), a POST that may have been
// applied is not re-sent, whatever the classifier says, and the caller gets
// the first answer with Report.Stopped = resilient.ErrUnsafeRetry. The echo
// is chosen here over a declaration because the provider is fictional: it
// is the server, not the example, that says what it does with keys.
func newProvider() *httptest.Server {
	var (
		mu   sync.Mutex
		seen = map[string]bool{} // route + key → first request done
	)
	first := func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		k := r.URL.Path + " " + r.Header.Get("Idempotency-Key")
		if seen[k] {
			return false
		}
		seen[k] = true
		return true
	}
	reply := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	created := `{"id":"ch_1","status":"succeeded"}`

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/declined", func(w http.ResponseWriter, r *http.Request) {
		if first(r) {
			reply(w, http.StatusBadRequest, `{"code":"card_declined_try_again","message":"issuer unavailable"}`)
			return
		}
		reply(w, http.StatusCreated, created)
	})
	mux.HandleFunc("POST /v1/required", func(w http.ResponseWriter, r *http.Request) {
		if first(r) {
			w.Header().Set("Provider-Should-Retry", "true")
			reply(w, http.StatusPaymentRequired, `{"code":"authentication_pending"}`)
			return
		}
		reply(w, http.StatusCreated, created)
	})
	mux.HandleFunc("POST /v1/invalid", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusBadRequest, `{"code":"invalid_amount"}`)
	})
	mux.HandleFunc("POST /v1/duplicate", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, `{"status":"duplicate","id":"ch_0"}`)
	})
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			w.Header().Set("Idempotency-Key", k) // the echo: this server dedupes by key
		}
		mux.ServeHTTP(w, r)
	}))
}
