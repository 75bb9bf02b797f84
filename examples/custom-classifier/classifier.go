package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/resilienthttp/resilient"
)

// peekLimit bounds how much of a body the classifier reads.
const peekLimit = 4 << 10

// providerClassifier wraps resilient.DefaultClassifier with three answers of
// a (fictional) payment provider that the generic table cannot know:
//
//	400 {"code":"card_declined_try_again"}  the issuer was unreachable; nothing was charged: retry   TRANSIENT
//	402 with Provider-Should-Retry: true     the provider asks for a retry: retry                   TRANSIENT
//	200 {"status":"duplicate"}               the charge already exists under this key: stop         PROVIDER.duplicate
//
// Everything else is left to DefaultClassifier. The classifier reads at most
// peekLimit bytes of a JSON body and puts them back (peekJSON), so the caller
// still reads the whole body.
func providerClassifier(o resilient.Outcome) resilient.Decision {
	d := resilient.DefaultClassifier(o)
	resp := o.Response
	if resp == nil {
		return d
	}
	switch resp.StatusCode {
	case http.StatusBadRequest:
		var p struct{ Code string }
		if peekJSON(resp, &p) && p.Code == "card_declined_try_again" {
			return resilient.Decision{Action: resilient.Retry, Category: resilient.CategoryTransient, Delay: d.Delay}
		}
	case http.StatusPaymentRequired:
		if strings.EqualFold(resp.Header.Get("Provider-Should-Retry"), "true") {
			return resilient.Decision{Action: resilient.Retry, Category: resilient.CategoryTransient, Delay: d.Delay}
		}
	case http.StatusOK:
		var p struct{ Status string }
		if peekJSON(resp, &p) && p.Status == "duplicate" {
			return resilient.Decision{Action: resilient.Terminal, Category: resilient.CategoryDuplicate, Replayed: d.Replayed}
		}
	}
	return d
}

// peekJSON decodes the start of a JSON response body into v and reports
// whether it could. It reads at most peekLimit bytes and replaces resp.Body
// with a reader that yields the same bytes, then the rest, so the body is
// left intact for the next reader (a Classifier must not consume it).
func peekJSON(resp *http.Response, v any) bool {
	if resp.Body == nil || resp.Body == http.NoBody ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return false
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, peekLimit))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return err == nil && json.Unmarshal(head, v) == nil
}
