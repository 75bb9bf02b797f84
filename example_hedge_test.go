package resilient_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/resilienthttp/resilient"
)

// WithHedging sends a second copy of a slow GET and returns whichever copy
// answers first; the Report says which attempt was a hedge and which won.
func ExampleWithHedging() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first copy (no Retry-Attempt header) is slow, the hedge
		// (Retry-Attempt: 1) is not.
		if r.Header.Get("Retry-Attempt") == "" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	client := resilient.NewClient(resilient.WithHedging(resilient.HedgingConfig{
		Delay: 50 * time.Millisecond, // or Quantile: 0.95, the host's recent p95
	}))
	rep := new(resilient.Report)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req = req.WithContext(resilient.ContextWithReport(req.Context(), rep))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	fmt.Println(string(body))
	fmt.Println("hedges:", rep.Hedges, "winner:", rep.Winner, "hedge won:", rep.HedgeWon)
	for _, a := range rep.Attempts {
		fmt.Println("attempt", a.Attempt, "hedge:", a.Hedge, "status:", a.StatusCode, "category:", a.Category)
	}
	// Output:
	// hello
	// hedges: 1 winner: 1 hedge won: true
	// attempt 0 hedge: false status: 0 category: CANCELED
	// attempt 1 hedge: true status: 200 category:
}
