package resilient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Category is the error taxonomy of an outcome, after seed 000's table
// (VALIDATION, AUTH, CONFLICT.idempotency.payload_mismatch, …). It is a string
// so that logs and metrics can carry it as is.
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
	// Request is the attempt's request (the Transport's clone, carrying the
	// key header when Keyed).
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
	// Ambiguous reports that the attempt may have reached the server without
	// a definitive answer (a reset or timeout after sending, a 5xx, a 409 "in
	// progress"): its effect may exist.
	Ambiguous bool
}

// Classifier decides what to do with an attempt's outcome. It must not
// consume the response body; it may replace it with an equivalent reader
// (DefaultClassifier peeks at small problem bodies of 409 and 422 answers).
// Classifiers compose: wrap DefaultClassifier and override the cases you know.
type Classifier func(o Outcome) Decision

var _ Classifier = DefaultClassifier

// peekLimit bounds how much of a 409/422 body the classifier reads.
const peekLimit = 4 << 10

// DefaultClassifier implements the classification table of the design:
//
//	2xx, 3xx                         success (Replayed from Idempotency-Status / Idempotent-Replayed)
//	dial error, refused, DNS timeout retry, any method (nothing was sent)         TRANSIENT
//	reset, EOF, timeout after send   retry if the method is idempotent or keyed    DEPENDENCY.timeout / TRANSIENT
//	408, 425                         retry                                          DEPENDENCY.timeout
//	429                              retry, Retry-After or RateLimit delay          RATE_LIMIT.exceeded
//	500                              retry if idempotent or keyed                   TRANSIENT
//	502, 503, 504                    retry if idempotent or keyed (503 always)      DEPENDENCY.unavailable / .timeout
//	other 5xx except 501, 505        retry if idempotent or keyed                   TRANSIENT
//	409 "in progress" (keyed)        retry after Retry-After or backoff             CONFLICT.in_progress
//	422, 409 "payload_mismatch"      terminal                                       CONFLICT.idempotency.payload_mismatch
//	400, 401, 403, 404, other 4xx    terminal                                       VALIDATION / AUTH / NOT_FOUND
//	501, 505, TLS verification       terminal                                       TERMINAL
//	context canceled                 terminal                                       CANCELED
//	context deadline exceeded        as a timeout after send (an attempt timeout)   DEPENDENCY.timeout
//
// A hint header X-Should-Retry or Stripe-Should-Retry of "false" makes a 4xx
// or 5xx terminal; "true" makes it retryable; a success stays a success. Malformed hints are
// ignored. Network errors are recognised with errors.Is and errors.As, never
// by matching their text. The only text match is in the body of a 409 or 422
// problem answer (see isInProgress), where servers carry no other signal.
func DefaultClassifier(o Outcome) Decision {
	if o.Err != nil {
		return classifyError(o)
	}
	resp := o.Response
	if resp == nil {
		return Decision{Action: Terminal, Category: CategoryTerminal}
	}
	d := classifyStatus(o)
	if resp.StatusCode < 400 {
		return d // hints speak of failures; a success stays one
	}
	switch hint := shouldRetryHint(resp.Header); {
	case hint < 0:
		d.Action = Terminal
	case hint > 0:
		d.Action = Retry
	}
	return d
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
	safe := o.Keyed || idempotentMethod(o.Request.Method)
	retryIfSafe := func(c Category) Decision {
		d := Decision{Action: Terminal, Category: c, Ambiguous: true}
		if safe {
			d.Action = Retry
		}
		return d
	}
	switch {
	case code >= 200 && code < 400:
		return Decision{Action: Success, Replayed: replayed(resp.Header)}
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly:
		return Decision{Action: Retry, Category: CategoryTimeout}
	case code == http.StatusTooManyRequests:
		return Decision{Action: Retry, Category: CategoryRateLimit, Delay: ServerDelay(resp.Header, o.Now)}
	case code == http.StatusServiceUnavailable:
		// A 503 is shed before processing by convention; retry any method.
		return Decision{Action: Retry, Category: CategoryUnavailable, Delay: ServerDelay(resp.Header, o.Now), Ambiguous: true}
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
		if isMismatch(resp) {
			return Decision{Action: Terminal, Category: CategoryPayloadMismatch}
		}
		if o.Keyed && isInProgress(resp) {
			return Decision{Action: Retry, Category: CategoryInProgress, Delay: ServerDelay(resp.Header, o.Now), Ambiguous: true}
		}
		return Decision{Action: Terminal, Category: CategoryConflict}
	case code == http.StatusUnprocessableEntity:
		if o.Keyed && isMismatch(resp) {
			return Decision{Action: Terminal, Category: CategoryPayloadMismatch}
		}
		return Decision{Action: Terminal, Category: CategoryValidation}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return Decision{Action: Terminal, Category: CategoryAuth}
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
	safe := o.Keyed || idempotentMethod(o.Request.Method)
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
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		cat = CategoryTimeout
	}
	d := Decision{Action: Terminal, Category: cat, Ambiguous: true}
	if safe {
		d.Action = Retry
	}
	return d
}

// notSent reports whether err proves the request never left the client: a
// failed dial (refused, unreachable, DNS) happens before any byte is written.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return !isPermanentDial(err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func isPermanentDial(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && dns.IsNotFound
}

// permanent reports errors that no retry can fix.
func permanent(err error) bool {
	var (
		cve *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		rh  tls.RecordHeaderError
		dns *net.DNSError
	)
	switch {
	case errors.As(err, &cve), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci), errors.As(err, &rh):
		return true
	case errors.As(err, &dns) && dns.IsNotFound:
		return true
	case errors.Is(err, ErrInvalidRequest):
		return true
	}
	return false
}

// shouldRetryHint reads X-Should-Retry / Stripe-Should-Retry: -1 for
// "false", +1 for "true", 0 when absent or malformed.
func shouldRetryHint(h http.Header) int {
	for _, name := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch strings.ToLower(strings.TrimSpace(h.Get(name))) {
		case "false":
			return -1
		case "true":
			return 1
		}
	}
	return 0
}

func replayed(h http.Header) bool {
	return strings.EqualFold(strings.TrimSpace(h.Get("Idempotency-Status")), "replayed") ||
		strings.EqualFold(strings.TrimSpace(h.Get("Idempotent-Replayed")), "true")
}

// PeekBody returns the first bytes (at most 4 KiB) of resp's body without
// consuming it: it replaces resp.Body with a reader that yields the same
// bytes, then the rest, and closes the original. A second call on the same
// response returns the same bytes and reads nothing. Classifiers use it to
// look at a problem body; a read error is kept for the caller after the
// bytes that came.
func PeekBody(resp *http.Response) []byte { return peek(resp) }

func peek(resp *http.Response) []byte {
	if p, ok := resp.Body.(*peekedBody); ok {
		return p.head
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	buf := make([]byte, peekLimit)
	n, err := io.ReadFull(resp.Body, buf)
	buf = buf[:n]
	var rest io.Reader = resp.Body
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		rest = eofReader{}
	case err != nil:
		// Keep the read error for the caller, after the bytes that came.
		rest = errReader{err: err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), rest), c: resp.Body, head: buf}
	return buf
}

type peekedBody struct {
	io.Reader
	c    io.Closer
	head []byte
}

func (p *peekedBody) Close() error { return p.c.Close() }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// isMismatch and isInProgress are the classifier's only text matches: a 409
// or 422 says why only in its body (RFC 9457 problem type or title, Stripe's
// message). They read at most peekLimit bytes and leave the body intact.
func isMismatch(resp *http.Response) bool {
	return bytes.Contains(bytes.ToLower(peek(resp)), []byte("mismatch"))
}

func isInProgress(resp *http.Response) bool {
	if resp.Header.Get("Retry-After") != "" {
		return true
	}
	b := bytes.ToLower(peek(resp))
	for _, s := range [...]string{"in-progress", "in_progress", "in progress", "concurrent"} {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}
