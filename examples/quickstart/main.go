// Command quickstart shows the core promise of resilient: a POST whose
// response is lost after the server committed it is retried with the same
// idempotency key, and the server applies it once.
//
// It starts the fake payments API of package fakeserver on 127.0.0.1,
// scripted to lose the response of the first charge after committing it, and
// creates one charge through a resilient client.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer) error {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/charges",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}},
	}))
	defer srv.Close()

	client := resilient.NewClient(resilient.WithBackoff(resilient.FullJitter(50*time.Millisecond, time.Second)))

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep := new(resilient.Report)
	ctx = resilient.ContextWithReport(ctx, rep)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges",
		strings.NewReader(`{"amount":1000,"currency":"eur","source":"tok_visa"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "idempotency key: %s\n", rep.Key)
	for _, a := range rep.Attempts {
		fmt.Fprintf(w, "attempt %d after %s: ", a.Attempt, a.Wait.Round(time.Millisecond))
		if a.Err != nil {
			fmt.Fprintf(w, "%s (%s, %s)\n", shortErr(a.Err), a.Category, a.Action)
			continue
		}
		fmt.Fprintf(w, "%d (%s, replayed=%t)\n", a.StatusCode, a.Action, a.Replayed)
	}
	fmt.Fprintf(w, "response: %d %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
	fmt.Fprintf(w, "effects on the server for this key: %d (total %d)\n", srv.Effects(rep.Key), srv.TotalEffects())
	if n := srv.Effects(rep.Key); n != 1 {
		return fmt.Errorf("expected exactly one effect, got %d", n)
	}
	return nil
}

// shortErr keeps the last part of a wrapped network error.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
