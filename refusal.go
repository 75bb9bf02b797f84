package resilient

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WithRefusalResponses makes a request that the Transport refuses end with a
// synthetic response instead of an *Error. Such a request was refused
// without sending anything. Its host's breaker is open, its retry tokens or
// budget refused a retry, or a rate limit or pause does not fit the
// deadline. The response is a 503 Service Unavailable with:
//
//   - "X-Should-Retry: false" and "Stripe-Should-Retry: false";
//   - a Retry-After when the Transport knows when the host will be tried
//     again;
//   - a "Resilient-Refused" header naming the reason;
//   - an application/problem+json body that also carries a Stripe-shaped
//     "error" object.
//
// Use it under SDKs that retry every error with their own sleeps but not
// such an answer (stripe-go). A local refusal is then not retried. The
// response's Request is the caller's request; it was never sent. Off by
// default: RoundTrip returns an *Error.
func WithRefusalResponses() Option {
	return func(c *config) { c.refusalResponses = true }
}

// refusalResponse turns err into a refusal response if it is an *Error for
// a request the Transport refused without sending anything; nil otherwise.
func refusalResponse(req *http.Request, err error, now time.Time) *http.Response {
	var e *Error
	if !errors.As(err, &e) || e.Attempts > 0 {
		return nil
	}
	var reason string
	switch {
	case errors.Is(e.Reason, ErrCircuitOpen):
		reason = "circuit_open"
	case errors.Is(e.Reason, ErrTokensExhausted):
		reason = "tokens_exhausted"
	case errors.Is(e.Reason, ErrBudgetExhausted):
		reason = "budget_exhausted"
	case errors.Is(e.Reason, ErrDelayTooLong):
		reason = "delay_too_long"
	case errors.Is(e.Reason, ErrRateLimited):
		reason = "rate_limited"
	case errors.Is(e.Reason, ErrPushback):
		reason = "pushback"
	default:
		return nil
	}
	h := http.Header{
		"Content-Type":        {"application/problem+json"},
		"X-Should-Retry":      {"false"},
		"Stripe-Should-Retry": {"false"},
		"Resilient-Refused":   {reason},
	}
	if !e.RetryAt.IsZero() {
		if s := int(e.RetryAt.Sub(now).Seconds() + 0.999); s > 0 {
			h.Set("Retry-After", strconv.Itoa(s))
		}
	}
	// A problem body (RFC 9457), with a Stripe-shaped "error" member as
	// well: stripe-go retries an error answer whose body is not a Stripe
	// error object, whatever its headers say.
	body := `{"type":"` + ProblemTypeRefused + `","title":"Refused by the client","status":503,"detail":"` + reason +
		`","error":{"type":"api_error","code":"` + reason + `","message":"resilient: refused without sending: ` + reason + `"}}`
	return &http.Response{
		Status: "503 Service Unavailable", StatusCode: http.StatusServiceUnavailable,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Request: req,
	}
}

// ProblemTypeRefused is the RFC 9457 problem type of the Transport's refusal
// responses (WithRefusalResponses): it refused to send the request.
const ProblemTypeRefused = "https://github.com/resilienthttp/resilient/problems/refused"

// The problem types of the idempotency answers that DefaultClassifier
// recognises besides the IETF draft's titles and Stripe's error codes; the
// fakeserver package answers with them (fakeserver.ProblemTypeBase).
const (
	problemTypeInProgress      = "https://github.com/resilienthttp/resilient/problems/in-progress"
	problemTypePayloadMismatch = "https://github.com/resilienthttp/resilient/problems/payload-mismatch"
)
