package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
)

// flaky answers 503 to the first attempt of every operation and 201 to the
// next, reporting the key it saw.
func flaky() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server dedupes by key and says so by echoing it, as Stripe's
		// does: that is what lets the client retry a POST after a 503.
		w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		if n.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "attempt %s, key length %d", r.Header.Get("Retry-Attempt"), len(r.Header.Get("Idempotency-Key")))
	}))
}

func ExampleNewClient() {
	srv := flaky()
	defer srv.Close()

	client := resilient.NewClient(resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, time.Second)))
	resp, err := client.Post(srv.URL+"/v1/charges", "application/json", strings.NewReader(`{"amount":1000}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var body strings.Builder
	fmt.Fprint(&body, resp.Status, ": ")
	buf := make([]byte, 64)
	n, _ := resp.Body.Read(buf)
	body.Write(buf[:n])
	fmt.Println(body.String())
	// Output: 201 Created: attempt 1, key length 36
}

func ExampleWrap() {
	srv := flaky()
	defer srv.Close()

	base := &http.Client{Timeout: 10 * time.Second}
	client := resilient.Wrap(base, resilient.WithMaxAttempts(3), resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, time.Second)))

	// A key chosen by the caller, e.g. derived from the business operation.
	ctx := resilient.ContextWithKey(context.Background(), "refund:ch_123:1000")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/refunds", strings.NewReader(`{"charge":"ch_123"}`))
	rep := new(resilient.Report)
	req = req.WithContext(resilient.ContextWithReport(req.Context(), rep))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, rep.Key, len(rep.Attempts), "attempts")
	// Output: 201 refund:ch_123:1000 2 attempts
}

func ExampleNewTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	tr := resilient.NewTransport(http.DefaultTransport,
		resilient.WithMaxAttempts(2),
		resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, time.Second)),
		resilient.WithAttemptTimeout(2*time.Second),
	)
	client := &http.Client{Transport: tr}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// The last response is returned as is: the caller sees the real status.
	fmt.Println(resp.StatusCode)
	// Output: 503
}

func ExampleError() {
	tr := resilient.NewTransport(http.DefaultTransport, resilient.WithMaxAttempts(2), resilient.WithBackoff(nil))
	client := &http.Client{Transport: tr}
	// Nothing listens on port 1: every attempt fails to dial, so nothing
	// was applied for sure and the outcome is not unknown.
	_, err := client.Post("http://127.0.0.1:1/v1/charges", "application/json", strings.NewReader(`{}`))
	var re *resilient.Error
	if errors.As(err, &re) {
		fmt.Println(re.Attempts, re.Unknown, errors.Is(err, resilient.ErrRetriesExhausted))
	}
	// Output: 2 false true
}

func ExampleContextWithOperation() {
	srv := flaky()
	defer srv.Close()

	// A Store keeps the key of each named operation until it has a definitive
	// answer; use persist/bolt or persist/redis to survive a crash.
	store := persist.NewMemory()
	client := resilient.NewClient(resilient.WithStore(store), resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, time.Second)))

	ctx := resilient.ContextWithOperation(context.Background(), "refund:ch_123")
	var keys []string
	for range 2 { // the same operation twice: one key
		rep := new(resilient.Report)
		req, _ := http.NewRequestWithContext(resilient.ContextWithReport(ctx, rep), http.MethodPost, srv.URL+"/v1/refunds", strings.NewReader(`{"amount":1000}`))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		keys = append(keys, rep.Key)
		fmt.Println(resp.StatusCode)
	}
	recs, _ := store.Pending(context.Background())
	fmt.Println("same key:", keys[0] == keys[1], "pending:", len(recs))
	// Output:
	// 201
	// 201
	// same key: true pending: 0
}
