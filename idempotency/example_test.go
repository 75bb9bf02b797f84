package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/resilienthttp/resilient/idempotency"
)

// The middleware on an API's unsafe route: the second request with the
// key gets the first one's answer, and the handler runs once.
func ExampleNew() {
	var payments atomic.Int64
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": %d}`, payments.Add(1))
	})
	mux := http.NewServeMux()

	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{RequireKey: true})
	if err != nil {
		panic(err)
	}
	mux.Handle("POST /payments", mw.Handler(pay)) // after authentication

	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, key := range []string{"order-1", "order-1", ""} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount": 1000}`))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotency-Status"), strings.Split(string(body), ",")[0])
	}
	fmt.Println("payments:", payments.Load())
	// Output:
	// 201 stored {"id": 1}
	// 201 replayed {"id": 1}
	// 400  {"type":"https://github.com/resilienthttp/resilient/problems/missing-key"
	// payments: 1
}

// An Inbox runs a webhook's handling once per event id, however many
// times the event is delivered.
func ExampleInbox() {
	inbox := &idempotency.Inbox{Store: idempotency.NewMemoryStore(), Name: "stripe-webhooks"}
	handle := func(ctx context.Context) ([]byte, error) {
		fmt.Println("crediting the account")
		return []byte("credited"), nil
	}
	for range 3 { // the provider delivers the event three times
		res, replayed, err := inbox.Do(context.Background(), "evt_1NG8Du2eZvKYlo2C", []byte(`{"amount": 1000}`), handle)
		fmt.Println(string(res), replayed, err)
	}
	// Output:
	// crediting the account
	// credited false <nil>
	// credited true <nil>
	// credited true <nil>
}

// JSONFields fingerprints only the members that make the operation, so a
// retry that changes a client timestamp is still the same request.
func ExampleJSONFields() {
	mw, _ := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{
		Fingerprint: idempotency.JSONFields("amount", "currency"),
	})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	for _, body := range []string{
		`{"amount": 1000, "currency": "eur", "sent_at": "12:00:00"}`,
		`{"amount": 1000, "currency": "eur", "sent_at": "12:00:05"}`,
		`{"amount": 2000, "currency": "eur", "sent_at": "12:00:09"}`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotency-Status"))
	}
	// Output:
	// 201 stored
	// 201 replayed
	// 422
}
