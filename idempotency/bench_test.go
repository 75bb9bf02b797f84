package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient/idempotency"
)

// created is the handler of the benchmarks: a small JSON answer.
var created = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":"pay_1","amount":1000,"currency":"eur"}` + "\n"))
})

const benchBody = `{"amount": 1000, "currency": "eur", "customer": "cus_123"}`

func serveBench(b *testing.B, h http.Handler, key func(i int) string) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(benchBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk_test_123")
		if key != nil {
			req.Header.Set("Idempotency-Key", key(i))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkMiddleware measures a request through the middleware with a
// MemoryStore, in process (no network), against the bare handler: Bare is
// the handler alone, First a new key each time (claim, run, store), Replay
// one key (lookup, replay).
func BenchmarkMiddleware(b *testing.B) {
	b.Run("Bare", func(b *testing.B) { serveBench(b, created, nil) })
	b.Run("First", func(b *testing.B) {
		mw, _ := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{})
		serveBench(b, mw.Handler(created), func(i int) string { return "k" + strconv.Itoa(i) })
	})
	b.Run("Replay", func(b *testing.B) {
		mw, _ := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{})
		serveBench(b, mw.Handler(created), func(int) string { return "same" })
	})
}

// BenchmarkFingerprint measures DefaultFingerprint alone on the
// benchmarks' JSON body: the canonical JSON the middleware hashes.
func BenchmarkFingerprint(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "/v1/payments?expand=customer&currency=eur", nil)
	req.Header.Set("Content-Type", "application/json")
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idempotency.DefaultFingerprint(req, body); err != nil {
			b.Fatal(err)
		}
	}
}
