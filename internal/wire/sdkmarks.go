package wire

import (
	"net/http"
	"strconv"
	"strings"
)

// An SDK that retries on its own marks its requests so that its servers can
// tell a retry from a first attempt; some also send an id per logical call.
// The Transport reads these marks to act as one retry loop with the SDK
// (see WithOuterRetries):
//
//	header                      sent by                       what it says                       a refused retry gets
//	X-Stainless-Retry-Count     Stainless SDKs (openai-go,    attempts before this one (0, 1…)   503, X-Should-Retry: false:
//	                            anthropic-sdk-go, …)                                             not retried
//	Amz-Sdk-Request             aws-sdk-go-v2 (any service)   attempt=N; max=M (N from 1)        *Error: retried by the SDK
//	Amz-Sdk-Invocation-Id       aws-sdk-go-v2                 the call's id (the key)            as a connection error
//	X-Goog-Api-Client           cloud.google.com/go/storage   gccl-invocation-id/ID (the key)    *Error
//	                                                          gccl-attempt-count/N (N from 1)
//	X-Stripe-Client-User-Agent  stripe-go                     its client; a call that repeats    *Error: retried by the SDK;
//	                                                          its Idempotency-Key is its retry   with WithRefusalResponses
//	                                                          (internal/loops, internal/loops/recent.go); the first is not      a 503, Stripe-Should-Retry:
//	                                                          known to be retried                false, Stripe error body:
//	                                                                                             not retried
//
// "A refused retry gets" is what RoundTrip returns when the host's gate
// refuses a retry the SDK drives; nothing is sent. Where the SDK honours
// a do-not-retry header, that is the answer (WithRefusalResponses'
// response); stripe-go gets it with WithRefusalResponses, as any refusal
// (it reads no header but a Stripe error body, which the answer carries).
// An SDK that gets an *Error retries it: each of its retries is refused in
// turn (nothing reaches the wire) while it sleeps its backoff, as it would
// alone, until the gate admits one or its attempts run out. AWS SDKs have
// no answer they do not retry. (That
// Google storage does not retry the *Error is read from its ShouldRetry,
// not tested here.) A request with none of the marks is
// treated as any other, unless WithOuterRetries says otherwise (a refused
// retry then gets a response only with WithRefusalResponses).

// Mark is what a request's marks say of its SDK's retry loop.
type Mark struct {
	// Count is the number of attempts the SDK sent before this one for the
	// same call: 0 for its first attempt. It is -1 when the SDK does not
	// say; for stripe-go the attempts sent under its key count (internal/loops, internal/loops/recent.go).
	Count int
	// max is the most attempts the SDK sends for the call (AWS's max=M);
	// 0 when it does not say.
	max int
	// Id is the SDK's own id of the call, the same on each of its
	// attempts; "" when it sends none.
	Id string
	// Respond: a refused retry is answered with a refusal response
	// carrying the do-not-retry hints, which this SDK honours.
	Respond bool
}

// markFields are the canonical names of the header fields that carry
// marks, indexed by length for checkHeader's one look per field. A header
// field whose name is not as long as one of them costs a table load.
var markFields = func() (t [32]string) {
	for _, f := range [...]string{"X-Stainless-Retry-Count", "Amz-Sdk-Request", "Amz-Sdk-Invocation-Id", "X-Goog-Api-Client", "X-Stripe-Client-User-Agent"} {
		t[len(f)] = f
	}
	return t
}()

// markField reports whether a header field name spells, in any case, one
// of the fields that carry marks.
func markField(name string) bool {
	return len(name) < len(markFields) && markFields[len(name)] != "" && strings.EqualFold(name, markFields[len(name)])
}

// ReadMark reads the marks of h, whose fields checkHeader found to include
// one (a field spelt otherwise than canonically is looked up by its
// spelling). ok is false when none of them is a valid mark.
func ReadMark(h http.Header) (m Mark, ok bool) {
	if v, found := fieldValue(h, "X-Stainless-Retry-Count"); found {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil && n >= 0 {
			return Mark{Count: n, Respond: true}, true
		}
	}
	if v, found := fieldValue(h, "Amz-Sdk-Request"); found {
		if n, max, valid := parseAmzRequest(v); valid {
			m, ok = Mark{Count: n - 1, max: max}, true
		}
	}
	if v, found := fieldValue(h, "Amz-Sdk-Invocation-Id"); found && ok {
		m.Id = strings.TrimSpace(v)
	}
	if ok {
		return m, true
	}
	if v, found := fieldValue(h, "X-Goog-Api-Client"); found {
		if m, ok := parseGoogClient(v); ok {
			return m, true
		}
	}
	if _, found := fieldValue(h, "X-Stripe-Client-User-Agent"); found {
		return Mark{Count: -1}, true
	}
	return Mark{}, false
}

// fieldValue returns the first value of the field name (canonical), or of
// any spelling of it.
func fieldValue(h http.Header, name string) (string, bool) {
	if vs := h[name]; len(vs) > 0 {
		return vs[0], true
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return vs[0], true
		}
	}
	return "", false
}

// parseAmzRequest parses "attempt=N; max=M" (M optional, other parameters
// ignored). N is at least 1.
func parseAmzRequest(v string) (attempt, max int, ok bool) {
	for v != "" {
		var p string
		p, v, _ = strings.Cut(v, ";")
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil {
			continue
		}
		switch strings.TrimSpace(k) {
		case "attempt":
			attempt, ok = n, n >= 1
		case "max":
			max = n
		}
	}
	return attempt, max, ok
}

// parseGoogClient reads Google's invocation id and attempt count out of an
// X-Goog-Api-Client value ("gl-go/1.22 gccl/1.40 gccl-invocation-id/ID
// gccl-attempt-count/N"). A value without an invocation id is no mark.
func parseGoogClient(v string) (Mark, bool) {
	var m Mark
	count := 1
	for _, tok := range strings.Fields(v) {
		name, val, _ := strings.Cut(tok, "/")
		switch name {
		case "gccl-invocation-id":
			m.Id = val
		case "gccl-attempt-count":
			if n, err := strconv.Atoi(val); err == nil && n >= 1 {
				count = n
			}
		}
	}
	if m.Id == "" {
		return Mark{}, false
	}
	m.Count = count - 1
	return m, true
}

// WillRetry reports whether the mark shows that its SDK retries the call
// on its own. It does if the SDK sent attempts before this one, or says it
// may send more. A mark with a count that says neither is taken to retry:
// a Stainless first attempt, a Google one. Such an SDK retries unless
// configured not to. One that does not retry sends no more than the
// Transport then sends: one attempt per call, the SDK alone's. AWS says
// when it will not (max=1). A mark without a count (stripe-go's) does not
// say; its key's repetition does (outerStart).
func (m Mark) WillRetry() bool {
	return m.Count > 0 || (m.Count == 0 && m.max != 1)
}
