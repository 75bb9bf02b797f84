package idempotency

import (
	"net/url"
	"slices"
	"strings"
)

// appendQuery appends to dst the canonical form of the raw query q, or
// nothing when q has no parameter. Its parameters are split at '&' (empty
// ones dropped; "a" and "a=" are one parameter), each name and value
// percent-decoded ('+' is a space), stably sorted by decoded name (the
// values of a repeated name keep their order: a list is not a set), and
// written back as name=value with url.QueryEscape, joined by '&'. A query
// with an invalid escape is kept byte for byte, after a '!'.
func appendQuery(dst []byte, q string) []byte {
	if q == "" {
		return dst
	}
	var buf [8][2]string
	params := buf[:0]
	for part := range strings.SplitSeq(q, "&") {
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		n, err1 := url.QueryUnescape(name)
		v, err2 := url.QueryUnescape(value)
		if err1 != nil || err2 != nil {
			return append(append(dst, '!'), q...)
		}
		params = append(params, [2]string{n, v})
	}
	slices.SortStableFunc(params, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	for i, p := range params {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = append(dst, url.QueryEscape(p[0])...)
		dst = append(dst, '=')
		dst = append(dst, url.QueryEscape(p[1])...)
	}
	return dst
}

// appendTarget appends the method, the path and, when the request has
// parameters, the canonical query, each followed by a NUL byte; a
// request without a query gets the bytes of fingerprint version 1, which
// had none, so that its records are still met.
func appendTarget(dst []byte, method, path, rawQuery string) []byte {
	dst = append(append(dst, method...), 0)
	dst = append(append(dst, path...), 0)
	n := len(dst)
	dst = appendQuery(append(dst, 'q', 0), rawQuery)
	if len(dst) == n+2 {
		return dst[:n] // no parameter
	}
	return append(dst, 0)
}
