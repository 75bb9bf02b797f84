package main

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/resilienthttp/resilient"
)

// providerClassifier wraps resilient.DefaultClassifier with three answers of
// a (fictional) payment provider that the generic table cannot know:
//
//	400 {"code":"card_declined_try_again"}  the issuer was unreachable; nothing was charged: retry   TRANSIENT
//	402 with Provider-Should-Retry: true     the provider asks for a retry: retry                   TRANSIENT
//	200 {"status":"duplicate"}               the charge already exists under this key: stop         PROVIDER.duplicate
//
// Everything else is left to DefaultClassifier. The classifier reads at most
// 4 KiB of a JSON body and puts them back (resilient.PeekBody), so the caller
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
// whether it could, leaving the body intact (resilient.PeekBody).
func peekJSON(resp *http.Response, v any) bool {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return false
	}
	return json.Unmarshal(resilient.PeekBody(resp), v) == nil
}
