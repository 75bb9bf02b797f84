// Command custom-classifier shows how to teach resilient a provider's own
// answers by wrapping resilient.DefaultClassifier: a 400 whose body says
// "card_declined_try_again" and a 402 with a retry header become retryable,
// and a 200 whose body says {"status":"duplicate"} becomes the terminal
// category PROVIDER.duplicate.
//
// A classifier decides whether an answer is worth retrying, not whether a
// POST is safe to re-send: the Transport re-sends a POST that may have been
// applied only when the server dedupes by key. The fake provider shows it
// the way Stripe does, by echoing the request's Idempotency-Key on every
// answer (see newProvider); main_test.go shows that without the echo the
// retryable 400 is returned as is, with Report.Stopped = ErrUnsafeRetry.
//
// It starts a fake provider on 127.0.0.1 and sends one charge to each of its
// routes, first with the default classifier, then with the custom one, and
// prints what each attempt got:
//
//	go run ./examples/custom-classifier
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/resilienthttp/resilient"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer) error {
	srv := newProvider()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	classifiers := []struct {
		name string
		c    resilient.Classifier
	}{
		{"default", resilient.DefaultClassifier},
		{"provider", providerClassifier},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "route\tclassifier\tattempts\tlast category\taction\tbody")
	for _, route := range []string{"/v1/declined", "/v1/required", "/v1/invalid", "/v1/duplicate"} {
		for _, cl := range classifiers {
			client := resilient.NewClient(resilient.WithClassifier(cl.c),
				resilient.WithBackoff(resilient.Exponential(5*time.Millisecond, 20*time.Millisecond)))
			line, err := charge(ctx, client, srv.URL+route)
			client.CloseIdleConnections()
			if err != nil {
				return fmt.Errorf("custom-classifier: %s with the %s classifier: %w", route, cl.name, err)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", route, cl.name, line)
		}
	}
	return tw.Flush()
}

// charge POSTs one charge and describes what happened, from its Report:
// the status of each attempt, the last attempt's category, and the body the
// caller finally read.
func charge(ctx context.Context, client *http.Client, url string) (string, error) {
	rep := new(resilient.Report)
	req, err := http.NewRequestWithContext(resilient.ContextWithReport(ctx, rep), http.MethodPost, url,
		strings.NewReader(`{"amount":1000,"currency":"eur"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	statuses := make([]string, len(rep.Attempts))
	for i, a := range rep.Attempts {
		statuses[i] = fmt.Sprint(a.StatusCode)
	}
	last := rep.Attempts[len(rep.Attempts)-1]
	category := string(last.Category)
	if category == "" {
		category = "-"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s", strings.Join(statuses, " → "), category, last.Action, body), nil
}
