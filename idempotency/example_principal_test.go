package idempotency_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/resilienthttp/resilient/idempotency"
)

// A service that authenticates with a session cookie names it: a retry
// whose other cookies changed (a load balancer's, say) gets the replay,
// and another session re-using the key is refused, never given the answer.
func ExampleCookiePrincipal() {
	mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{
		Principal: idempotency.CookiePrincipal("sid"),
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, cookie := range []string{"sid=alice; lb=node1", "sid=alice; lb=node2", "sid=bob; lb=node1"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"sku": "A1"}`))
		req.Header.Set("Idempotency-Key", "order-1")
		req.Header.Set("Cookie", cookie)
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(cookie, "→", resp.StatusCode, resp.Header.Get("Idempotency-Status"))
	}
	// Output:
	// sid=alice; lb=node1 → 201 stored
	// sid=alice; lb=node2 → 201 replayed
	// sid=bob; lb=node1 → 422
}
