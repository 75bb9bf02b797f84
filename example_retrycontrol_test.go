package resilient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/resilienthttp/resilient"
)

// down is a base RoundTripper whose host answers every request with a 503.
type down struct{ sent int }

func (d *down) RoundTrip(req *http.Request) (*http.Response, error) {
	d.sent++
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// The retry controls are values of one option. By default each host gets
// retry tokens; here a budget replaces them, and a breaker joins it.
func ExampleWithRetryControl() {
	base := new(down)
	client := &http.Client{Transport: resilient.NewTransport(base,
		resilient.WithBackoff(nil),
		resilient.WithRetryControl(
			resilient.RetryBudget{Ratio: 0.1, MinPerSecond: -1}, // retries may add 10 % to the traffic
			resilient.CircuitBreaker{RetriesOnly: true},         // an open breaker refuses retries only
		))}

	stopped := map[string]int{}
	for range 50 {
		rep := new(resilient.Report)
		req, _ := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), rep),
			http.MethodGet, "http://api.example/v1/orders", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		stopped[fmt.Sprint(rep.Stopped)]++
	}
	fmt.Println("requests:", 50, "attempts sent:", base.sent)
	fmt.Println(stopped)

	// Output:
	// requests: 50 attempts sent: 52
	// map[resilient: circuit open:33 resilient: retry budget exhausted:17]
}

// NewBudget makes one in-memory budget that several Transports (or every
// host of one Transport) share, through SharedBudget.
func ExampleNewBudget() {
	b := resilient.NewBudget(resilient.RetryBudget{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second}) // 1 retry per window
	shared := resilient.WithRetryControl(resilient.SharedBudget(func(string) resilient.Budget { return b }))

	base := new(down)
	a := resilient.NewTransport(base, resilient.WithBackoff(nil), shared)
	c := resilient.NewTransport(base, resilient.WithBackoff(nil), shared)
	for _, tr := range []http.RoundTripper{a, c} {
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/v1/orders", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	fmt.Println("attempts sent by two Transports:", base.sent)

	// Output:
	// attempts sent by two Transports: 3
}
