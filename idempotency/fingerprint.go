package idempotency

import (
	"bytes"
	"errors"
	"mime"
	"net/http"
	"strings"
)

// FingerprintFunc returns the bytes that identify a request's payload;
// the middleware hashes them with SHA-256. body is the whole request body.
// An error is answered with 400 and runs nothing.
type FingerprintFunc func(r *http.Request, body []byte) ([]byte, error)

// DefaultFingerprint identifies a request by its method, its path, its
// canonical query and its body. The query's parameters are sorted by
// name, their values kept in order, and percent-decoded; "a" is "a=" and
// empty parameters are dropped. A query with an invalid escape counts
// byte for byte. A JSON body is canonicalised: keys sorted by their UTF-8
// bytes, no insignificant white space, strings escaped minimally, numbers
// normalised (1, 1.0 and 1e0 are one number). Any other body counts byte
// for byte. A body is JSON when
// its Content-Type says so and it parses. It never fails.
func DefaultFingerprint(r *http.Request, body []byte) ([]byte, error) {
	b := make([]byte, 0, len(r.Method)+len(r.URL.Path)+len(r.URL.RawQuery)+len(body)+8)
	b = appendTarget(b, r.Method, r.URL.Path, r.URL.RawQuery)
	if ct := r.Header["Content-Type"]; len(ct) > 0 && isJSON(ct[0]) { // Header.Get, without canonicalising the name
		if out, err := appendCanonical(append(b, 'j', 0), body); err == nil {
			return out, nil
		}
	}
	return append(append(b, 'b', 0), body...), nil
}

// JSONFields returns a FingerprintFunc that identifies a request by its
// method, its path, its canonical query and the named top-level members of its JSON object
// body (an absent member counts as null), so that other members, such as
// a client timestamp or a trace id, may differ between retries. A body
// that is not a JSON object is an error (400).
func JSONFields(fields ...string) FingerprintFunc {
	return func(r *http.Request, body []byte) ([]byte, error) {
		v, err := decodeJSON(body)
		if err != nil {
			return nil, errors.New("the body is not JSON: " + err.Error())
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, errors.New("the body is not a JSON object")
		}
		b := appendTarget(nil, r.Method, r.URL.Path, r.URL.RawQuery)
		for _, f := range fields {
			b = appendString(b, f)
			b = append(b, ':')
			b = canonicalJSON(b, obj[f])
			b = append(b, 0)
		}
		return b, nil
	}
}

// JSONBody identifies a request by its method, its path, its canonical
// query and the canonical form of its body, which must be one JSON object whatever its
// Content-Type; an empty body counts as {}. Any other body is an error, so
// it is answered 400 before a claim is made or anything runs.
func JSONBody(r *http.Request, body []byte) ([]byte, error) {
	b := appendTarget(nil, r.Method, r.URL.Path, r.URL.RawQuery)
	if len(bytes.TrimSpace(body)) == 0 {
		return append(b, "{}"...), nil
	}
	v, err := decodeJSON(body)
	if err != nil {
		return nil, errors.New("the body is not JSON: " + err.Error())
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("the body is not a JSON object")
	}
	return canonicalJSON(b, v), nil
}

// isJSON reports whether a Content-Type is application/json or +json.
func isJSON(ct string) bool {
	if ct == "application/json" {
		return true // the common case, without mime's allocations
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
