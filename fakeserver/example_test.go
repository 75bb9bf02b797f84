package fakeserver_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
)

// The classic ambiguous commit: the server creates the charge, the response is
// lost, the client retries with the same key and gets the stored response.
func Example() {
	s := fakeserver.New()
	defer s.Close()
	// The next create commits its effect, then the connection drops.
	_ = s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultLostResponse})

	post := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/charges", strings.NewReader(`{"amount":5000}`))
		req.Header.Set("Idempotency-Key", "order-1")
		return s.Client().Do(req)
	}
	_, err := post()
	fmt.Println("attempt 1 failed:", err != nil)
	resp, err := post()
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("attempt 2:", resp.StatusCode, resp.Header.Get("Idempotency-Status"))
	fmt.Println("effects:", s.Effects("order-1"))
	// Output:
	// attempt 1 failed: true
	// attempt 2: 201 replayed
	// effects: 1
}

// A scripted 503 and a reset, served in-process with no socket.
func ExampleServer_Transport() {
	s := fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{
		Match: "POST /v1/payments",
		Script: []fakeserver.Fault{
			{Kind: fakeserver.FaultStatus, Status: 503, RetryAfter: fakeserver.Duration(time.Second)},
			{Kind: fakeserver.FaultReset},
		},
	}))
	defer s.Close()
	c := &http.Client{Transport: s.Transport()}
	for attempt := range 3 {
		req, _ := http.NewRequest(http.MethodPost, "http://fake/v1/payments", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", "pay-1")
		req.Header.Set("Retry-Attempt", strconv.Itoa(attempt))
		resp, err := c.Do(req)
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			fmt.Println("connection reset")
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Printf("%d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	st := s.Stats()
	fmt.Println("requests:", st.Requests, "retries:", st.Retries, "effects:", st.Effects)
	// Output:
	// 503 Retry-After="1"
	// connection reset
	// 201 Retry-After=""
	// requests: 3 retries: 2 effects: 1
}
