// Command testing-with-fakeserver shows how to test an application's own API
// client against package fakeserver: the client (Payments, below) is what an
// application would ship; main_test.go is the test an application would
// write, with faults scripted per route and the server's ledger as the
// oracle.
//
//	go run ./examples/testing-with-fakeserver
//	go test ./examples/testing-with-fakeserver
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

// Payments is an application's client for a payments API.
type Payments struct {
	BaseURL string
	HTTP    *http.Client
}

// NewPayments returns a Payments client whose requests are made safe to
// retry by resilient. base is the application's own *http.Client.
func NewPayments(baseURL string, base *http.Client, opts ...resilient.Option) *Payments {
	return &Payments{BaseURL: baseURL, HTTP: resilient.Wrap(base, opts...)}
}

// Charge is the API's charge object.
type Charge struct {
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

// CreateCharge creates a charge. The key names the business operation (for
// example an order id), so that a retry by the application itself, not only
// by the Transport, is the same operation. Choosing the key is also what
// lets the Transport re-send a charge that may have been applied (a lost
// response, a 503): a key of the application's own says that it knows the
// API dedupes by key. Without one, NewPayments would need
// resilient.WithDedupingServer for the API's host.
func (p *Payments) CreateCharge(ctx context.Context, key string, amount int, currency string) (Charge, error) {
	body, _ := json.Marshal(map[string]any{"amount": amount, "currency": currency})
	req, err := http.NewRequestWithContext(resilient.ContextWithKey(ctx, key), http.MethodPost, p.BaseURL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return Charge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.HTTP.Do(req)
	if err != nil {
		return Charge{}, fmt.Errorf("payments: create charge: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Charge{}, fmt.Errorf("payments: create charge: %s", resp.Status)
	}
	var c Charge
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return Charge{}, fmt.Errorf("payments: create charge: decoding: %w", err)
	}
	return c, nil
}

func main() {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/charges",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultStatus, Status: 503}, {Kind: fakeserver.FaultLostResponse}},
	}))
	defer srv.Close()
	p := NewPayments(srv.URL, srv.Client(), resilient.WithBackoff(resilient.FullJitter(10*time.Millisecond, 100*time.Millisecond)))
	c, err := p.CreateCharge(context.Background(), "order-1001", 1000, "eur")
	if err != nil {
		log.Fatal(err)
	}
	st := srv.Stats()
	fmt.Printf("charge %s for %d %s; server saw %d requests (%d retries) and made %d effect(s)\n",
		c.ID, c.Amount, c.Currency, st.Requests, st.Retries, st.Effects)
}
