package resilient

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHeaderDelay bounds any delay parsed from a header, so that arithmetic on
// it cannot overflow. Delays above the Transport's Retry-After maximum (30 s by
// default) stop the retries anyway.
const maxHeaderDelay = 365 * 24 * time.Hour

// ParseRetryAfter parses a Retry-After value (RFC 9110 §10.2.3): either
// delay-seconds or an HTTP-date in any of the three forms http.ParseTime
// accepts. A date is relative to now; a date in the past is a zero delay.
// ok is false for an empty, negative or malformed value, which callers
// ignore. Huge values are clamped to a year.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
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

// parseSeconds parses a non-negative decimal integer of seconds, clamped.
func parseSeconds(v string) (time.Duration, bool) {
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

// ServerDelay returns the server-directed delay of a response's headers:
// Retry-After when present and valid (see ParseRetryAfter); otherwise the IETF
// RateLimit fields when they say the quota is spent (`RateLimit: "p";r=0;t=30`,
// or RateLimit-Remaining: 0 with RateLimit-Reset); otherwise 0. Malformed
// values are ignored. The result is not capped by the Transport's maximum.
func ServerDelay(h http.Header, now time.Time) time.Duration {
	if d, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok {
		return d
	}
	if v := h.Get("RateLimit"); v != "" {
		if d, ok := parseRateLimit(v); ok {
			return d
		}
	}
	if strings.TrimSpace(h.Get("RateLimit-Remaining")) == "0" {
		if d, ok := parseSeconds(strings.TrimSpace(h.Get("RateLimit-Reset"))); ok {
			return d
		}
	}
	return 0
}

// parseRateLimit reads the first policy item of a RateLimit field
// (draft-ietf-httpapi-ratelimit-headers: `"default";r=0;t=30`) and returns t
// when r is 0.
func parseRateLimit(v string) (time.Duration, bool) {
	item, _, _ := strings.Cut(v, ",")
	var r, t string
	for _, p := range strings.Split(item, ";")[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch k {
		case "r":
			r = val
		case "t":
			t = val
		}
	}
	if r != "0" || t == "" {
		return 0, false
	}
	return parseSeconds(t)
}
