package resilient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	for i := range 50 {
		rep := new(resilient.Report)
		req, _ := http.NewRequestWithContext(resilient.ContextWithReport(context.Background(), rep),
			http.MethodGet, fmt.Sprintf("http://api.example/v1/orders/%d", i), nil)
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
