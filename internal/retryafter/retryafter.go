// Package retryafter parses the delays servers direct in their answers'
// headers (Retry-After, Retry-After-Ms, x-ms-retry-after-ms, the IETF
// RateLimit fields, X-Amz-Retry-After), for resilient.ServerDelay and for
// the modules of this repository.
package retryafter

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHeaderDelay bounds any delay parsed from a header, so that arithmetic on
// it cannot overflow. Delays above the Transport's Retry-After maximum (30 s by
// default) stop the retries anyway.
const maxHeaderDelay = 365 * 24 * time.Hour

// Parse parses a Retry-After value (RFC 9110 §10.2.3): either
// delay-seconds or an HTTP-date in any of the three forms http.ParseTime
// accepts. A date is relative to now; a date in the past is a zero delay.
// ok is false for an empty, negative or malformed value, which callers
// ignore. Huge values are clamped to a year.
func Parse(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		return parseSeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	if d < 0 {
		d = 0
	}
	return min(d, maxHeaderDelay), true
}

// parseSeconds parses a non-empty, non-negative decimal integer of seconds;
// values beyond maxHeaderDelay are clamped to it.
func parseSeconds(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > uint64(maxHeaderDelay/time.Second) {
		// Only digits, so a parse error is overflow: clamp.
		return maxHeaderDelay, true
	}
	return time.Duration(n) * time.Second, true
}

// Delay returns the server-directed delay of a response's headers, from
// the first of these that is present and valid:
//
//   - Retry-After-Ms, milliseconds (Stainless-generated APIs and SDKs read
//     it before Retry-After);
//   - x-ms-retry-after-ms, milliseconds (Azure services; the Azure SDKs
//     read it after retry-after-ms, before Retry-After);
//   - Retry-After (see Parse); an HTTP-date is measured against
//     the response's Date when it has a valid one (the server's clock, so
//     that a skewed client clock sends no retry before the server said),
//     else against now;
//   - the IETF RateLimit fields when they say a quota is spent and when it
//     comes back (`RateLimit: "p";r=0;t=30`, or RateLimit-Remaining: 0 with
//     RateLimit-Reset: 30); a spent quota without a reset time (r=0 and no
//     t, or no RateLimit-Reset) directs no delay;
//   - X-Amz-Retry-After, milliseconds (AWS), at most 5 s: AWS SDKs wait it
//     within [backoff, backoff + 5 s], which the Transport's wait, the
//     longer of this delay and the backoff, keeps.
//
// Otherwise it returns 0, which leaves the wait to the backoff. Malformed
// values are ignored; huge ones are clamped to a year. The result is not
// capped by the Transport's maximum.
func Delay(h http.Header, now time.Time) time.Duration {
	if v := headerValue(h, "Retry-After-Ms"); v != "" {
		if d, ok := parseMillis(v); ok {
			return d
		}
	}
	if v := headerValue(h, "X-Ms-Retry-After-Ms"); v != "" {
		if d, ok := parseMillis(v); ok {
			return d
		}
	}
	if d, ok := retryAfterOf(h, now); ok {
		return d
	}
	// Header names are written canonical (as net/http stores them) so that
	// Get does not allocate a canonical copy.
	if v := h.Get("Ratelimit"); v != "" {
		if d, ok := parseRateLimit(v); ok {
			return d
		}
	}
	if isZero(strings.TrimSpace(h.Get("Ratelimit-Remaining"))) {
		if d, ok := parseSeconds(strings.TrimSpace(h.Get("Ratelimit-Reset"))); ok {
			return d
		}
	}
	if v := headerValue(h, "X-Amz-Retry-After"); v != "" {
		if d, ok := parseMillis(v); ok {
			return min(d, amzRetryAfterMax)
		}
	}
	return 0
}

// amzRetryAfterMax is how far past its backoff an AWS SDK waits for
// X-Amz-Retry-After.
const amzRetryAfterMax = 5 * time.Second

// retryAfterOf parses h's Retry-After; an HTTP-date is relative to h's
// Date when that is valid, else to now.
func retryAfterOf(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(headerValue(h, "Retry-After"))
	if v == "" {
		return 0, false
	}
	if v[0] < '0' || v[0] > '9' {
		if date, err := http.ParseTime(strings.TrimSpace(headerValue(h, "Date"))); err == nil {
			now = date
		}
	}
	return Parse(v, now)
}

// parseMillis parses a non-negative number of milliseconds (a decimal
// fraction allowed, as Stainless SDKs read Retry-After-Ms), clamped to
// maxHeaderDelay.
func parseMillis(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	if f*float64(time.Millisecond) >= float64(maxHeaderDelay) || math.IsInf(f, 1) {
		return maxHeaderDelay, true
	}
	return time.Duration(f * float64(time.Millisecond)), true
}

// parseRateLimit reads a RateLimit field (draft-ietf-httpapi-ratelimit-headers:
// a list of policy items, `"default";r=0;t=30, "daily";r=10;t=3600`) and
// returns the longest t among the items whose remaining quota r is 0, and
// false when no such item has a valid t. It does not allocate.
func parseRateLimit(v string) (time.Duration, bool) {
	var (
		longest time.Duration
		found   bool
	)
	for v != "" {
		var item string
		item, v, _ = strings.Cut(v, ",")
		_, params, _ := strings.Cut(item, ";") // drop the policy name
		var r, t string
		var haveR, haveT bool
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.TrimSpace(k) {
			case "r":
				r, haveR = strings.TrimSpace(val), true
			case "t":
				t, haveT = strings.TrimSpace(val), true
			}
		}
		if !haveR || !haveT || !isZero(r) {
			continue
		}
		if d, ok := parseSeconds(t); ok {
			longest, found = max(longest, d), true
		}
	}
	return longest, found
}

// isZero reports whether v is a decimal integer equal to 0 ("0", "00").
func isZero(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '0' {
			return false
		}
	}
	return true
}

// headerValue is h.Get(name) for a name already in canonical form: one map
// lookup, without canonicalising name.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
