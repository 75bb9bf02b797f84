// Command quickstart shows the core promise of resilient: a POST whose
// response is lost after the server committed it is retried with the same
// idempotency key, and the server applies it once — provided the server is
// known to dedupe by that key.
//
// It starts the fake payments API of package fakeserver on 127.0.0.1, which
// dedupes by Idempotency-Key as Stripe does, scripted to lose the response of
// the first charge after committing it, and creates one charge twice, each
// time against a fresh server:
//
//  1. through resilient.NewClient(): the lost response is the first answer
//     the client gets from this server, so nothing shows yet that it honours
//     keys, and a POST that may have been applied is not re-sent — against
//     an API that ignores keys, a re-send would charge twice. The caller
//     gets what a bare client would: an error with Unknown set (the charge
//     may exist; retry later with the same key, never a new one) and
//     Reason ErrUnsafeRetry.
//  2. through resilient.NewClient(resilient.WithDedupingServer(...)): the
//     application declares the API as one that dedupes, so the POST is
//     re-sent with the same key and the server replays its stored answer.
//
// A declaration is what teaches best here, because it is what a real
// application writes for a payments API it knows (WithDedupingServer
// ("api.stripe.com")). A server can also show it on its own, by echoing the
// request's key or answering Idempotency-Status, and a key the application
// chose itself (an Idempotency-Key header, ContextWithKey) is trusted too.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
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

// dedupingHost is the fake API's host. A host without a port matches any
// port; in production this would be, say, "api.stripe.com".
const dedupingHost = "127.0.0.1"

func run(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backoff := resilient.WithBackoff(resilient.FullJitter(50*time.Millisecond, time.Second))

	fmt.Fprintln(w, "1. resilient.NewClient(): nothing shows that the server dedupes by key")
	rep, effects, err := charge(ctx, w, resilient.NewClient(backoff))
	var re *resilient.Error
	if !errors.As(err, &re) || !re.Unknown || !errors.Is(err, resilient.ErrUnsafeRetry) {
		return fmt.Errorf("expected an unknown outcome not retried (ErrUnsafeRetry), got %v", err)
	}
	fmt.Fprintf(w, "   not re-sent: outcome unknown, the charge may exist; retry later with key %s, never a new one\n", re.Key)
	fmt.Fprintf(w, "   effects on the server for this key: %d\n", effects)
	if effects != 1 || len(rep.Attempts) != 1 {
		return fmt.Errorf("expected one attempt and one effect, got %d and %d", len(rep.Attempts), effects)
	}

	fmt.Fprintf(w, "\n2. resilient.NewClient(resilient.WithDedupingServer(%q)): the server is declared to dedupe by key\n", dedupingHost)
	rep, effects, err = charge(ctx, w, resilient.NewClient(resilient.WithDedupingServer(dedupingHost), backoff))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   effects on the server for this key: %d\n", effects)
	if effects != 1 || !rep.Replayed {
		return fmt.Errorf("expected exactly one effect and a replayed answer, got %d effect(s), replayed=%t", effects, rep.Replayed)
	}
	return nil
}

// charge creates one charge through client against a fresh fake API that
// loses the first response after committing it, prints each attempt from
// the Report and the response, and returns the Report, the server's effects
// for the key sent, and client.Do's error.
func charge(ctx context.Context, w io.Writer, client *http.Client) (*resilient.Report, int, error) {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/charges",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}},
	}))
	defer srv.Close()
	defer client.CloseIdleConnections()

	rep := new(resilient.Report)
	req, err := http.NewRequestWithContext(resilient.ContextWithReport(ctx, rep), http.MethodPost, srv.URL+"/v1/charges",
		strings.NewReader(`{"amount":1000,"currency":"eur","source":"tok_visa"}`))
	if err != nil {
		return rep, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	fmt.Fprintf(w, "   idempotency key: %s\n", rep.Key)
	for _, a := range rep.Attempts {
		fmt.Fprintf(w, "   attempt %d after %s: ", a.Attempt, a.Wait.Round(time.Millisecond))
		if a.Err != nil {
			fmt.Fprintf(w, "%s (%s, %s)\n", shortErr(a.Err), a.Category, a.Action)
			continue
		}
		fmt.Fprintf(w, "%d (%s, replayed=%t)\n", a.StatusCode, a.Action, a.Replayed)
	}
	if err != nil {
		return rep, srv.Effects(rep.Key), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rep, srv.Effects(rep.Key), err
	}
	fmt.Fprintf(w, "   response: %d %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
	return rep, srv.Effects(rep.Key), nil
}

// shortErr keeps the last part of a wrapped network error.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
