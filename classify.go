package resilient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/resilienthttp/resilient/internal/wire"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/retryafter"
)

// Category is the error taxonomy of an outcome, as a dotted name. Its first
// part says who must act:
//
//   - VALIDATION and AUTH: the caller's request;
//   - CONFLICT: the resource or the operation's key;
//   - RATE_LIMIT and DEPENDENCY: the server, for a while;
//   - TRANSIENT: nobody, try again.
//
// Further parts narrow it (CONFLICT.idempotency.payload_mismatch). It is a
// string so that logs and metrics can carry it as is.
type Category string

// Categories assigned by DefaultClassifier.
const (
	CategoryNone            Category = ""
	CategoryValidation      Category = "VALIDATION"
	CategoryAuth            Category = "AUTH"
	CategoryNotFound        Category = "NOT_FOUND"
	CategoryConflict        Category = "CONFLICT"
	CategoryInProgress      Category = "CONFLICT.in_progress"
	CategoryPayloadMismatch Category = "CONFLICT.idempotency.payload_mismatch"
	CategoryPrecondition    Category = "CONFLICT.precondition"
	CategoryRateLimit       Category = "RATE_LIMIT.exceeded"
	CategoryTimeout         Category = "DEPENDENCY.timeout"
	CategoryUnavailable     Category = "DEPENDENCY.unavailable"
	CategoryTransient       Category = "TRANSIENT"
	CategoryDuplicate       Category = "PROVIDER.duplicate"
	CategoryTerminal        Category = "TERMINAL"
	CategoryCanceled        Category = "CANCELED"
	CategoryCircuitOpen     Category = "CIRCUIT_OPEN"
	CategoryClient          Category = "CLIENT"
)

// Action is what the Transport does with an outcome.
type Action uint8

const (
	// Success: return the response.
	Success Action = iota
	// Retry: the outcome is transient; try again if attempts, budget and
	// deadline allow.
	Retry
	// Terminal: return the response or error as is; retrying cannot help.
	Terminal
)

// String returns "success", "retry" or "terminal".
func (a Action) String() string {
	switch a {
	case Success:
		return "success"
	case Retry:
		return "retry"
	case Terminal:
		return "terminal"
	}
	return "action(?)"
}

// Outcome is one attempt's result, as seen by a Classifier.
type Outcome struct {
	// Request is the attempt's request. It is the Transport's copy,
	// carrying the key header when Keyed. For the first attempt of an
	// unkeyed request that needed nothing added, it is the caller's
	// request itself. It must not be modified.
	Request *http.Request
	// Response is the attempt's response; nil when Err is set.
	Response *http.Response
	// Err is the attempt's error; nil when Response is set.
	Err error
	// Keyed reports whether the request carries an idempotency key.
	Keyed bool
	// Now is when the outcome was observed; Retry-After dates are relative
	// to it.
	Now time.Time
}

// Decision is a Classifier's verdict on an Outcome.
type Decision struct {
	Action   Action
	Category Category
	// Delay is a server-directed wait (Retry-After, RateLimit); 0 if none.
	// The Transport waits max(Delay, backoff) and never shortens it; a Delay
	// over the Retry-After maximum stops the retries (ErrDelayTooLong).
	Delay time.Duration
	// Replayed reports that the server answered from its idempotency store
	// (Idempotency-Status: replayed or Idempotent-Replayed: true).
	Replayed bool
	// Unknown reports that the attempt may have reached the server without
	// a definitive answer: its effect may exist. A reset or timeout after
	// sending, a 5xx and a 409 "in progress" are such answers.
	Unknown bool
	// Pushback reports that the server asked its clients to stop retrying.
	// Such an answer is a 429 or 5xx with a do-not-retry hint and a
	// server-directed Delay. The hint is X-Should-Retry or
	// Stripe-Should-Retry "false". The pushback middleware (package
	// pushback) answers so. The Transport then sends no retry to the host
	// for Delay (at most the Retry-After maximum), whatever the operation.
	// First attempts still go out.
	Pushback bool
}

// Classifier decides what to do with an attempt's outcome. It must not
// consume the response body. It may replace it with an equivalent reader:
// DefaultClassifier peeks at the JSON bodies of 400, 409 and 422 answers to
// keyed requests. Classifiers compose: wrap DefaultClassifier and override
// the cases you know.
type Classifier func(o Outcome) Decision

var _ Classifier = DefaultClassifier

// The titles that draft-ietf-httpapi-idempotency-key-header (section "Error
// Handling") gives its problem answers. The draft's examples share one
// placeholder type URI for all of them, so the title is what tells them apart.
const (
	draftTitleInProgress  = "A request is outstanding for this Idempotency-Key" // 409
	draftTitleAlreadyUsed = "Idempotency-Key is already used"                   // 422: a different payload
)

// Stripe's idempotency errors, in its JSON error object
// {"error": {"type": ..., "code": ...}}.
const (
	stripeCodeKeyInUse    = "idempotency_key_in_use" // 409: a request with the key is in flight
	stripeTypeIdempotency = "idempotency_error"      // the key was used with other parameters
)

// DefaultClassifier implements this classification table. Its middle
// column is what the Transport does. "Unsafe" is a request whose method is
// not idempotent (POST, PATCH, custom methods). The answers marked
// "unsafe: with evidence" are Retry decisions. The Transport carries them
// out only with evidence that the server dedupes by the key, or under a
// strong precondition: the unsafe-retry guard (see "Unsafe requests" in
// the package documentation). A request without a key never has the first.
// Without evidence, the answer is returned
// as a bare client would get it, with ErrUnsafeRetry.
//
//	2xx, 3xx                              success (Replayed from Idempotency-Status / Idempotent-Replayed)
//	dial error, refused, DNS timeout      retry, any method (nothing was sent)          TRANSIENT
//	reset, EOF, timeout after send        retry if idempotent; keyed or conditional unsafe: with evidence  DEPENDENCY.timeout / TRANSIENT
//	408, 425                              retry; unsafe: with evidence                  DEPENDENCY.timeout
//	429                                   retry, Retry-After or RateLimit delay         RATE_LIMIT.exceeded
//	500                                   retry if idempotent; keyed or conditional unsafe: with evidence  TRANSIENT
//	502, 504                              retry if idempotent; keyed or conditional unsafe: with evidence  DEPENDENCY.unavailable / .timeout
//	503                                   retry; unsafe: with evidence                  DEPENDENCY.unavailable
//	other 5xx except 501, 505             retry if idempotent; keyed or conditional unsafe: with evidence  TRANSIENT
//	keyed 409, "in progress" answer       retry after Retry-After, else backoff         CONFLICT.in_progress
//	keyed 409, no answer, Retry-After     retry after Retry-After (as in progress)      CONFLICT.in_progress
//	keyed 400/409/422, "mismatch" answer  terminal                                      CONFLICT.idempotency.payload_mismatch
//	other 409 (every unkeyed one)         terminal                                      CONFLICT
//	412                                   terminal                                      CONFLICT.precondition
//	400, 401, 403, 404, other 4xx         terminal                                      VALIDATION / AUTH / NOT_FOUND
//	501, 505, TLS verification            terminal                                      TERMINAL
//	the client's own limits (see below)   terminal                                      TERMINAL
//	context canceled                      terminal                                      CANCELED
//	context deadline exceeded             as a timeout after send (attempt timeout)     DEPENDENCY.timeout
//
// An unsafe request needs no evidence when the failure proves it was not
// applied: a failed dial, nothing written, a 429. An unkeyed one is
// retried only then: its 408, 425 and 503 (which a proxy may send after
// the backend applied it) are returned as a bare client gets them, and
// the classifier already makes its other 5xx and its errors after sending
// terminal. A conditional request is one with a strong precondition: an
// If-Match of strong entity tags, or If-None-Match: *. Its precondition is
// evidence of its own, keyed or not: applied once, it fails when sent
// again (see "Conditional requests" in the package documentation).
//
// The idempotency answers are recognised by status, by whether the request
// carried a key, and by the structured members of a JSON body. They are
// never recognised by words in free text. An unkeyed request never gets
// CONFLICT.in_progress or CONFLICT.idempotency.payload_mismatch. The body is read only when the
// Content-Type says JSON, at most its first 4 KiB (see PeekBody). It must
// be one complete JSON object within them. An "in progress" answer is one
// of:
//
//   - application/problem+json with type
//     https://github.com/resilienthttp/resilient/problems/in-progress, or with the
//     title the IETF draft draft-ietf-httpapi-idempotency-key-header gives it,
//     "A request is outstanding for this Idempotency-Key";
//   - a JSON error object with Stripe's code idempotency_key_in_use:
//     {"error": {"code": "idempotency_key_in_use", ...}}.
//
// A "mismatch" answer is one of:
//
//   - application/problem+json with type
//     https://github.com/resilienthttp/resilient/problems/payload-mismatch, or with
//     the draft's title "Idempotency-Key is already used";
//   - a JSON error object of Stripe's type idempotency_error (with another
//     code than idempotency_key_in_use): {"error": {"type": "idempotency_error", ...}}.
//
// Titles are compared whole, ignoring case and surrounding spaces. Types and
// codes are compared exactly. A keyed 409 with no recognisable answer but a
// valid Retry-After is taken for "in progress". The server says when to come
// back, and the draft allows a 409 without a problem body. Re-sending under
// the same key cannot apply the operation twice where the server dedupes by
// key. Without Retry-After it is a terminal CONFLICT, as it is for a bare
// client.
//
// A hint header X-Should-Retry or Stripe-Should-Retry of "false" makes a 4xx
// or 5xx terminal. "true" makes it retryable. A success stays a success.
// "false" on a 429 or 5xx that also says when to come back (Retry-After,
// RateLimit) is pushback (Decision.Pushback). The server asks for no retry
// to the host until then. Malformed hints are ignored.
//
// Network errors are recognised by their types and values (errors.Is,
// errors.AsType), never by matching their text. The errors of the client's
// own limits and configuration are terminal: the same request fails the
// same way again. They are a response header over
// Transport.MaxResponseHeaderBytes, a scheme no RoundTripper serves,
// http.ErrSchemeMismatch, TLS verification, and a body shorter than its
// ContentLength. net/http does not type most of them. They are recognised by
// their text in one place (clientLimitErrors). Any other error after the
// request may have been sent is retried if the request is idempotent or
// keyed. Malformed responses are such errors.
//
// DefaultClassifier does not allocate, except when it reads a JSON body of a
// 400, 409 or 422 answer to a keyed request.
func DefaultClassifier(o Outcome) Decision {
	if o.Err != nil {
		return classifyError(o)
	}
	resp := o.Response
	if resp == nil {
		return Decision{Action: Terminal, Category: CategoryTerminal}
	}
	if plainSuccess(resp, nil) {
		return success(resp, o.Keyed) // the common case first
	}
	d := classifyStatus(o)
	if resp.StatusCode < 400 {
		return d // hints speak of failures; a success stays one
	}
	switch hint := shouldRetryHint(resp.Header); {
	case hint < 0:
		d = terminal(d, false)
		if code := resp.StatusCode; code == http.StatusTooManyRequests || code >= 500 {
			if d.Delay == 0 {
				d.Delay = ServerDelay(resp.Header, o.Now)
			}
			d.Pushback = d.Delay > 0
		}
	case hint > 0:
		d.Action = Retry
	}
	return d
}

// plainSuccess reports whether DefaultClassifier calls an attempt's
// outcome a success whatever its headers and time: a 2xx or 3xx answer.
func plainSuccess(resp *http.Response, err error) bool {
	return err == nil && resp != nil && resp.StatusCode >= 200 && resp.StatusCode < 400
}

// success is DefaultClassifier's decision on a plain success. Only a keyed
// request can be answered from an idempotency store: an unkeyed success
// skips the two header lookups.
func success(resp *http.Response, keyed bool) Decision {
	return Decision{Action: Success, Replayed: keyed && replayed(resp.Header)}
}

// idempotentMethod reports whether RFC 9110 makes method idempotent.
func idempotentMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete, "":
		return true
	}
	return false
}

func classifyStatus(o Outcome) Decision {
	resp := o.Response
	code := resp.StatusCode
	safe := safeToResend(o)
	retryIfSafe := func(c Category) Decision {
		return Decision{Action: retryIf(safe), Category: c, Unknown: true}
	}
	switch {
	case code >= 200 && code < 400:
		return success(resp, o.Keyed)
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly:
		return Decision{Action: Retry, Category: CategoryTimeout}
	case code == http.StatusTooManyRequests:
		return Decision{Action: Retry, Category: CategoryRateLimit, Delay: ServerDelay(resp.Header, o.Now)}
	case code == http.StatusServiceUnavailable:
		// A 503 is shed before processing by convention: a Retry for any
		// method. The Transport re-sends an unsafe one only with evidence
		// that the server dedupes it (decide.go).
		return Decision{Action: Retry, Category: CategoryUnavailable, Delay: ServerDelay(resp.Header, o.Now), Unknown: true}
	case code == http.StatusBadGateway:
		return retryIfSafe(CategoryUnavailable)
	case code == http.StatusGatewayTimeout:
		return retryIfSafe(CategoryTimeout)
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		return Decision{Action: Terminal, Category: CategoryTerminal}
	case code >= 500:
		d := retryIfSafe(CategoryTransient)
		d.Delay = ServerDelay(resp.Header, o.Now)
		return d
	case code == http.StatusConflict:
		if !o.Keyed {
			return Decision{Action: Terminal, Category: CategoryConflict}
		}
		switch idempotencyAnswer(resp) {
		case answerMismatch:
			return Decision{Action: Terminal, Category: CategoryPayloadMismatch}
		case answerInProgress:
			return inProgress(resp, o.Now)
		}
		if _, ok := retryafter.Parse(resp.Header.Get("Retry-After"), o.Now); ok {
			return inProgress(resp, o.Now)
		}
		return Decision{Action: Terminal, Category: CategoryConflict}
	case code == http.StatusUnprocessableEntity || code == http.StatusBadRequest:
		if o.Keyed && idempotencyAnswer(resp) == answerMismatch {
			return Decision{Action: Terminal, Category: CategoryPayloadMismatch}
		}
		return Decision{Action: Terminal, Category: CategoryValidation}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return Decision{Action: Terminal, Category: CategoryAuth}
	case code == http.StatusPreconditionFailed:
		return Decision{Action: Terminal, Category: CategoryPrecondition}
	case code == http.StatusNotFound || code == http.StatusGone:
		return Decision{Action: Terminal, Category: CategoryNotFound}
	case code >= 400:
		return Decision{Action: Terminal, Category: CategoryValidation}
	}
	// 1xx reaching a RoundTripper's caller is not something to retry.
	return Decision{Action: Terminal, Category: CategoryTerminal}
}

func classifyError(o Outcome) Decision {
	err := o.Err
	safe := safeToResend(o)
	if errors.Is(err, context.Canceled) {
		return Decision{Action: Terminal, Category: CategoryCanceled}
	}
	if notSent(err) {
		return Decision{Action: Retry, Category: CategoryTransient}
	}
	if permanent(err) {
		return Decision{Action: Terminal, Category: CategoryTerminal}
	}
	// From here on the request may have reached the server.
	cat := CategoryTransient
	if ne, ok := errors.AsType[net.Error](err); errors.Is(err, context.DeadlineExceeded) || (ok && ne.Timeout()) {
		cat = CategoryTimeout
	}
	return Decision{Action: retryIf(safe), Category: cat, Unknown: true}
}

// safeToResend reports whether o's request may be re-sent after it may
// have been applied, as far as the classifier knows: its method is
// idempotent, it is keyed (the Transport asks for evidence that the
// server dedupes by the key), or a strong precondition guards it.
func safeToResend(o Outcome) bool {
	return o.Keyed || idempotentMethod(o.Request.Method) || wire.Guarded(o.Request.Header)
}

// retryIf is Retry if safe, else Terminal.
func retryIf(safe bool) Action {
	if safe {
		return Retry
	}
	return Terminal
}

// notSent reports whether err proves the request never left the client: a
// failed dial (refused, unreachable, DNS) happens before any byte is written.
func notSent(err error) bool {
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		return !isPermanentDial(err)
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		return dns.IsTimeout || dns.IsTemporary
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func isPermanentDial(err error) bool {
	dns, ok := errors.AsType[*net.DNSError](err)
	return ok && dns.IsNotFound
}

// is reports whether err's tree holds an error of type E.
func is[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// permanent reports errors that no retry can fix.
func permanent(err error) bool {
	switch {
	case is[*tls.CertificateVerificationError](err), is[x509.UnknownAuthorityError](err),
		is[x509.HostnameError](err), is[x509.CertificateInvalidError](err), is[tls.RecordHeaderError](err):
		return true
	case isPermanentDial(err):
		return true
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrBodyNotReplayable), errors.Is(err, http.ErrSchemeMismatch):
		return true
	}
	return wire.ClientLimit(err)
}

// shouldRetryHint reads X-Should-Retry / Stripe-Should-Retry: -1 for
// "false", +1 for "true", 0 when absent or malformed.
func shouldRetryHint(h http.Header) int {
	for _, name := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := strings.TrimSpace(headerValue(h, name)); {
		case strings.EqualFold(v, "false"):
			return -1
		case strings.EqualFold(v, "true"):
			return 1
		}
	}
	return 0
}

func replayed(h http.Header) bool { return replayHeadersOf(h).replay() }

// replayHeaders are the two headers of a response that speak of the
// server's idempotency store. Classifying a keyed answer and judging
// whether its server dedupes both read them: an attempt looks them up once
// (attempt.replayHeaders).
type replayHeaders struct{ status, replayed string }

func replayHeadersOf(h http.Header) replayHeaders {
	if len(h) == 0 {
		return replayHeaders{}
	}
	return replayHeaders{headerValue(h, "Idempotency-Status"), headerValue(h, "Idempotent-Replayed")}
}

// replay reports whether the headers say the answer was replayed from the
// store (Idempotency-Status: replayed or Idempotent-Replayed: true).
func (r replayHeaders) replay() bool {
	return strings.EqualFold(strings.TrimSpace(r.status), "replayed") ||
		strings.EqualFold(strings.TrimSpace(r.replayed), "true")
}

// present reports whether either header is there, whatever its value.
func (r replayHeaders) present() bool { return r.status != "" || r.replayed != "" }

// headerValue is h.Get(name) for a name already in canonical form (a
// constant, or the configured key header, canonicalised by WithKeyHeader):
// one map lookup. Header.Get canonicalises its argument on every call,
// which costs more than the lookup on a request's hot path.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// inProgress is the decision for a keyed 409 whose operation is still being
// processed: retry, after the server's delay if it gave one. The effect may
// exist (the first request may commit).
func inProgress(resp *http.Response, now time.Time) Decision {
	return Decision{Action: Retry, Category: CategoryInProgress, Delay: ServerDelay(resp.Header, now), Unknown: true}
}

// answer is an idempotency answer recognised in a response body.
type answer uint8

const (
	answerNone       answer = iota
	answerInProgress        // a request with the same key is still being processed
	answerMismatch          // the key was used with a different request
)

// idempotencyAnswer recognises the idempotency answers listed in
// DefaultClassifier's documentation. It reads the structured members of a
// JSON body: a problem's type or title (RFC 9457), or Stripe's error type
// and code. It reads the body only when the Content-Type is JSON, at most
// peekLimit bytes, and leaves it intact.
func idempotencyAnswer(resp *http.Response) answer {
	problem, ok := jsonMediaType(resp.Header.Get("Content-Type"))
	if !ok || resp.ContentLength == 0 {
		return answerNone
	}
	head := peek(resp)
	if len(head) == 0 {
		return answerNone
	}
	var body struct {
		Type  string          `json:"type"`
		Title string          `json:"title"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(head, &body) != nil {
		return answerNone // not one object, or cut at peekLimit
	}
	if problem {
		switch title := strings.TrimSpace(body.Title); {
		case body.Type == problemTypeInProgress, strings.EqualFold(title, draftTitleInProgress):
			return answerInProgress
		case body.Type == problemTypePayloadMismatch, strings.EqualFold(title, draftTitleAlreadyUsed):
			return answerMismatch
		}
	}
	var stripe struct {
		Type string `json:"type"`
		Code string `json:"code"`
	}
	if len(body.Error) == 0 || body.Error[0] != '{' || json.Unmarshal(body.Error, &stripe) != nil {
		return answerNone
	}
	switch {
	case stripe.Code == stripeCodeKeyInUse:
		return answerInProgress
	case stripe.Type == stripeTypeIdempotency:
		return answerMismatch
	}
	return answerNone
}

// jsonMediaType reports whether the Content-Type value ct names a JSON media
// type (application/json, or any type with the +json suffix), and whether it is
// application/problem+json. It ignores parameters and case and does not
// allocate.
func jsonMediaType(ct string) (problem, ok bool) {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	switch {
	case strings.EqualFold(mt, "application/problem+json"):
		return true, true
	case strings.EqualFold(mt, "application/json"):
		return false, true
	case len(mt) > len("+json") && strings.EqualFold(mt[len(mt)-len("+json"):], "+json"):
		return false, true
	}
	return false, false
}

// classify returns the decision of cfg's Classifier on a, an attempt of a
// call in ctx (the caller's) keyed with key ("" if none). It returns a's
// replay headers too, read once for a keyed answer. It adds what the
// Transport knows better than any classifier:
//
//   - a cancelled caller is terminal;
//   - no response is no success;
//   - a write that got no answer of its own may have been applied.
//
// It is the decision's first step (decide.go); the unsafe-retry guard
// follows it (call.verdict). It changes nothing: the verdict says it all.
func classify(cfg *config, a *wire.Attempt, ctx context.Context, key string) (verdict, replayHeaders) {
	var rh replayHeaders
	if !a.Sent {
		return verdict{d: Decision{Action: Terminal, Category: CategoryClient}, err: a.Err}, rh
	}
	v := verdict{err: a.Err}
	if key != "" && a.Resp != nil {
		rh = replayHeadersOf(a.Resp.Header)
	}
	switch {
	case !cfg.customClassifier && plainSuccess(a.Resp, a.Err):
		// DefaultClassifier's first case (success), without building
		// its Outcome.
		v.d = Decision{Action: Success, Replayed: rh.replay()}
	case a.Err != nil && ctx.Err() != nil:
		// The caller gave up; nothing else matters.
		v.err = withCause(ctx.Err(), a.Err)
		v.d = Decision{Action: Terminal, Category: CategoryCanceled, Unknown: true}
	default:
		v.d = cfg.classifier(Outcome{Request: a.Req, Response: a.Resp, Err: a.Err, Keyed: key != "", Now: clock.Wall(a.End)})
	}
	if a.Err != nil && v.d.Action == Success {
		// No response is no success, whatever a classifier says, and it
		// proves nothing about the effect.
		v.d = terminal(v.d, true)
	}
	// A write that got no answer of its own (an error after a write, or an
	// answer to a re-send net/http made after the first write's connection
	// died) may have been applied, whatever the last error says.
	// A request cut short by its own body (the caller's reader failed)
	// never reached the server whole.
	if (a.Err != nil && a.Writes.Any && !errors.Is(a.Err, ErrBodyNotReplayable)) || (a.Resp != nil && v.d.Action != Success && a.Writes.Again) {
		v.d.Unknown = true
	}
	return v, rh
}

// terminal returns d made terminal, and ambiguous too if ambiguous.
func terminal(d Decision, ambiguous bool) Decision {
	d.Action = Terminal
	d.Unknown = d.Unknown || ambiguous
	return d
}

// withCause returns err, the error of an attempt cut short by the caller's
// context, so that errors.Is finds ctxErr in it too. Its text is err's
// alone: the context's error is the Reason beside it.
func withCause(ctxErr, err error) error {
	if errors.Is(err, ctxErr) {
		return err
	}
	return wire.Wrap(err, ctxErr)
}
