package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/resilienthttp/resilient"
)

// A POST answered 500 by a server not known to dedupe by key (an SDK that
// retries nothing, such as github.com/sashabaranov/go-openai, sends one):
// it may have been applied, so it is not re-sent. The 500 is returned as
// a bare client would return it, and the Report says why.
func ExampleContextWithReport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	client := resilient.NewClient()

	var rep resilient.Report
	ctx := resilient.ContextWithReport(context.Background(), &rep)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, len(rep.Attempts), errors.Is(rep.Stopped, resilient.ErrUnsafeRetry))
	// Output: 500 1 true
}

// A loop of the application's own re-sends a request after a retryable
// failure. The Transport recognises the re-send (here: the same method,
// URL, header fields and body, from the same place in the code) and
// defers to the loop: one attempt, no wait of its own. Only the loop's
// first call gets the Transport's retries. Declaring the loop's host with
// WithOuterRetries(true, host) gives every call one attempt from the
// start.
func ExampleWithOuterRetries() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	for _, client := range []*http.Client{resilient.NewClient(), resilient.NewClient(resilient.WithOuterRetries(true, strings.TrimPrefix(srv.URL, "http://")))} {
		attempts.Store(0)
		var deferred []string
		for range 3 { // the loop: 3 tries
			var rep resilient.Report
			req, _ := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), &rep), http.MethodGet, srv.URL+"/v1/status", nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
			deferred = append(deferred, fmt.Sprintf("%q", rep.Deferred))
		}
		fmt.Println(attempts.Load(), strings.Join(deferred, " "))
	}
	// Output:
	// 6 "" "identical" "identical"
	// 3 "option" "option" "option"
}
