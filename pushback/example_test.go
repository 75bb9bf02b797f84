package pushback_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/resilienthttp/resilient/pushback"
)

// Mount the middleware in front of an API with the default budget: retries
// up to half the healthy answers of the last 10 s, plus one a second.
func Example() {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable) // the database is down
	})
	budget := pushback.New(pushback.Config{})
	mux := http.NewServeMux()
	mux.Handle("/v1/", budget.Middleware(api))
	// http.ListenAndServe(":8080", mux)

	// At total failure the budget is the floor alone, 10 retries in the
	// window: the next ones are refused before the API runs.
	for range 12 {
		r := httptest.NewRequest(http.MethodPost, "/v1/charges", nil)
		r.Header.Set("Retry-Attempt", "1")
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	st := budget.Stats()
	fmt.Println("retries admitted:", st.RetriesAdmitted(), "refused:", st.RetriesShed)
	// Output: retries admitted: 10 refused: 2
}

// A first attempt that fails while the budget is exhausted carries the
// pushback headers, so that the client does not send the retry.
func ExampleBudget_Middleware() {
	budget := pushback.New(pushback.Config{Ratio: -1, MinPerSecond: -1}) // no retries at all
	h := budget.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	r := httptest.NewRequest(http.MethodGet, "/v1/charges/ch_1", nil)
	r.Header.Set("Retry-Attempt", "0")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Code, "X-Should-Retry:", w.Header().Get("X-Should-Retry"))
	// Output: 502 X-Should-Retry: false
}

// Shed retries before first attempts when the server is full.
func ExampleConfig_maxInFlight() {
	budget := pushback.New(pushback.Config{
		MaxInFlight:        512, // first attempts are shed above 512 requests in service
		RetryInFlightShare: 0.5, // retries above 256
		Status:             http.StatusTooManyRequests,
	})
	_ = budget.Middleware(http.NotFoundHandler())
	fmt.Println(budget.Stats().InFlight)
	// Output: 0
}
