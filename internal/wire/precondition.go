package wire

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// The policy this file carries out (which preconditions make a re-send of
// an unsafe request safe, and what a 412 after an ambiguous attempt means)
// is in the root's doc.go, under "Conditional requests".

// ErrPreconditionUnknown is the cause of the *Error that stands for a 412
// answering a re-send after an attempt that may have been applied.
var ErrPreconditionUnknown = errors.New("resilient: precondition failed on a re-send: an earlier attempt may have applied the request")

// Guarded reports whether header h carries a precondition that a request,
// once applied, fails when it is sent again (RFC 9110, section 13.1):
//
//   - If-Match with strong entity tags only: applying the request changes
//     the resource, and so its strong tag (section 8.8.1);
//   - If-None-Match: *: applying the request makes the resource exist.
//
// If-Match: * only asks that the resource exist, which a first apply does
// not change. A weak tag can survive a change. If-Unmodified-Since is not
// enough: a server may ignore it (section 13.1.4), and a date has one
// second's resolution, so an apply within the same second passes it
// again. A malformed field is nothing: a server may ignore it.
func Guarded(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	if vs := h["If-Match"]; len(vs) > 0 && strongTags(vs) {
		return true
	}
	vs := h["If-None-Match"]
	return len(vs) == 1 && strings.Trim(vs[0], " \t") == "*"
}

// strongTags reports whether the field lines vs of an If-Match form a
// list of one or more strong entity tags, none weak, no "*".
func strongTags(vs []string) bool {
	n := 0
	for _, v := range vs {
		for {
			v = strings.TrimLeft(v, " \t,")
			if v == "" {
				break
			}
			if v[0] != '"' {
				return false // "*", a weak tag (W/"…"), or not a tag
			}
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				return false
			}
			v = strings.TrimLeft(v[end+2:], " \t")
			if v != "" && v[0] != ',' {
				return false
			}
			n++
		}
	}
	return n > 0
}

// PreconditionUnknown reports whether resp, the last answer of a call of
// method whose earlier attempt may have been applied (ambiguous), is a
// 412. The precondition may have failed because that attempt applied the
// request: the caller gets an *Error with Unknown set in its place. A safe
// method (GET, HEAD, OPTIONS, TRACE) applies nothing: its 412 is returned.
func PreconditionUnknown(method string, resp *http.Response, ambiguous bool) bool {
	if !ambiguous || resp == nil || resp.StatusCode != http.StatusPreconditionFailed {
		return false
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
		return false
	}
	return true
}

// HoldAnswer keeps resp, an answer the caller gets in an *Error
// (Error.Response), readable after RoundTrip returns. http.Client cancels
// the request of a RoundTrip that returned an error (Client.Timeout), and
// a body read then fails. So its body is drained (keep), and holdAnswer
// waits until the drain stops: at the body's end, after drainLimit bytes,
// or when the attempt's context ends. It waits at most wait. The caller
// reads what was drained, then the rest, if any.
func HoldAnswer(resp *http.Response, wait time.Duration) {
	Keep(resp)
	hb, ok := resp.Body.(*heldBody)
	if !ok {
		return // no body
	}
	expired := false
	timer := time.AfterFunc(wait, func() {
		hb.mu.Lock()
		expired = true
		hb.wake.Broadcast()
		hb.mu.Unlock()
	})
	defer timer.Stop()
	hb.mu.Lock()
	for hb.draining && !expired {
		hb.wake.Wait()
	}
	hb.mu.Unlock()
}
